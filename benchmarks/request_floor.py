"""The least a request-level simulator of sim_speed's workload can cost: issue 46's goal set against a floor.

issue 46 measures `specplan run` as a share of `sim_speed.bare_loop`: each
replica one process stepping 64 rows that never end (one numpy draw and one
timeout per step). The workload it is compared on has requests: 512
closed-loop users think, arrive, are routed, wait for a prefill stage, join
a batch, decode until their output is out, and leave (about 41 of each
replica's 64 users decode at once). This benchmark writes that workload as
plainly as numpy and SimPy allow, with none of the engine's rules (no KV
accounting, budget, records, acceptance spread, confidences or policy):

    arrival     a user's think time ends (a timeout callback): lengths drawn, routed to the replica with the
                fewest outstanding requests, its prompt through the replica's FIFO prefill stage (a timeout)
    admission   at a step's start, waiting requests join the batch (one concatenate)
    step        one numpy draw of the rows' accepted drafts (γ = 3, the per-position acceptance), tokens
                emitted up to each row's output, one timeout of the step's linear price
    retirement  rows whose output is out leave (one compaction); each user thinks again

and prints its simulated output tokens per wall-second as a share of the bare
loop's, run just before and after it in the same process (sim_speed's
measure), beside `specplan run`'s share measured the same way. The floor's
share is what a step *with requests* can reach on this workload before any
of the engine's rules is paid for.

    .venv/bin/python benchmarks/request_floor.py [--repeats 3] [--duration 600] [--no-specplan]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import deque

import numpy as np
import simpy
from sim_speed import STANDARD, bare_loop, rates

ENGINE, DRAFTER, WORKLOAD = STANDARD["engine"], STANDARD["drafter"], STANDARD["workload"]
ACCEPTANCE = np.array(DRAFTER["acceptance"]["per_position"]["chat"])
PROFILE = STANDARD["hardware"]["profile"]
FIXED_MS = PROFILE["base_ms"] + DRAFTER["latency"]["ms"] + ENGINE["scheduling_overhead_ms"]
PREFILL_TOKENS_PER_S = ENGINE["prefill"]["tokens_per_s"]


class Floor:
    """The workload with requests and nothing else (the module docstring)."""

    def __init__(self, seed: int) -> None:
        replicas = STANDARD["cluster"]["replicas"]
        users = WORKLOAD["arrivals"]["users"]
        self.env = simpy.Environment()
        children = np.random.SeedSequence(seed).spawn(replicas + 1)
        self.rng = np.random.default_rng(children[-1])  # arrivals: think times and lengths
        self.outstanding = np.zeros(replicas, dtype=np.int64)
        self.waiting: list[deque[int]] = [deque() for _ in range(replicas)]
        self.free_at = [0.0] * replicas
        self.wake: list[simpy.Event | None] = [None] * replicas
        self.emitted = 0
        for index, child in enumerate(children[:-1]):
            self.env.process(self.replica(index, np.random.default_rng(child)))
        for _ in range(users):
            self.think()

    def think(self) -> None:
        event = self.env.timeout(self.rng.exponential(WORKLOAD["arrivals"]["think_s"]))
        event.callbacks.append(self.arrive)

    def arrive(self, _event: simpy.Event) -> None:
        prompt = min(WORKLOAD["prompt_tokens"]["max"], round(self.rng.lognormal(
            math.log(WORKLOAD["prompt_tokens"]["median"]), WORKLOAD["prompt_tokens"]["sigma"])))
        output = min(WORKLOAD["output_tokens"]["max"], max(1, round(self.rng.lognormal(
            math.log(WORKLOAD["output_tokens"]["median"]), WORKLOAD["output_tokens"]["sigma"]))))
        replica = int(np.argmin(self.outstanding))
        self.outstanding[replica] += 1
        now = self.env.now
        self.free_at[replica] = done = max(now, self.free_at[replica]) + prompt / PREFILL_TOKENS_PER_S
        event = self.env.timeout(done - now)
        event.callbacks.append(lambda _e: self.prefilled(replica, output))

    def prefilled(self, replica: int, output: int) -> None:
        self.emitted += 1  # the first token
        self.waiting[replica].append(output - 1)
        wake = self.wake[replica]
        if wake is not None and not wake.triggered:
            wake.succeed()

    def replica(self, index: int, rng: np.random.Generator):
        left = np.zeros(0, dtype=np.int64)
        waiting, rows = self.waiting[index], ENGINE["max_batch_requests"]
        while True:
            if waiting and left.size < rows:
                joining = [waiting.popleft() for _ in range(min(len(waiting), rows - left.size))]
                left = np.concatenate((left, np.array(joining, dtype=np.int64)))
            if left.size == 0:
                self.wake[index] = self.env.event()
                yield self.wake[index]
                continue
            n = left.size
            accepted = (rng.random((n, ACCEPTANCE.size)) < ACCEPTANCE).cumprod(axis=1).sum(axis=1)
            emitted = np.minimum(accepted + 1, left)
            self.emitted += int(emitted.sum())
            left = left - emitted
            yield self.env.timeout((FIXED_MS + PROFILE["per_token_ms"] * n * (1 + ACCEPTANCE.size)) / 1000.0)
            done = left <= 0
            if done.any():
                finished = int(done.sum())
                left = left[~done]
                self.outstanding[index] -= finished
                for _ in range(finished):
                    self.think()


EMITTED: dict[str, int] = {}  # the last run's simulated output tokens, by simulator (the two workloads compared)


def floor_rate(duration_s: float) -> float:
    """Simulated output tokens per wall-second of the floor."""
    floor = Floor(STANDARD["seed"])
    start = time.perf_counter()
    floor.env.run(until=duration_s)
    EMITTED["floor"] = floor.emitted
    return floor.emitted / (time.perf_counter() - start)


def specplan_rate(duration_s: float) -> float:
    """Simulated output tokens per wall-second of `specplan run` (sim_speed's static run)."""
    tokens_rate, _steps_rate, sim_rate = rates("static", duration_s, 300.0)
    EMITTED["specplan"] = round(tokens_rate * duration_s / sim_rate)
    return tokens_rate


def share(measure, duration_s: float) -> float:
    """`measure`'s tokens rate over the bare loop's around it (geometric mean of one run before and after)."""
    before = bare_loop(duration_s, 300.0)
    value = measure()
    return value / math.sqrt(before * bare_loop(duration_s, 300.0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--no-specplan", action="store_true", help="the floor alone (not specplan run beside it)")
    args = ap.parse_args()
    print(f"workload: sim_speed's (8 replicas x 64 closed-loop users, γ = 3, outputs median 300), "
          f"{args.duration:g} simulated s; median of {args.repeats} runs, each a share of the bare loop around it")
    floors = [share(lambda: floor_rate(args.duration), args.duration) for _ in range(args.repeats)]
    print(f"  request floor   {statistics.median(floors):.3f} of the bare loop's tokens/s "
          f"(runs: {', '.join(f'{v:.3f}' for v in floors)})")
    if not args.no_specplan:
        runs = [share(lambda: specplan_rate(args.duration), args.duration) for _ in range(args.repeats)]
        print(f"  specplan static {statistics.median(runs):.3f} of the bare loop's tokens/s "
              f"(runs: {', '.join(f'{v:.3f}' for v in runs)})")
        print(f"  the same workload: {EMITTED['floor']:,} simulated output tokens in the floor, "
              f"{EMITTED['specplan']:,} in specplan run")


if __name__ == "__main__":
    main()
