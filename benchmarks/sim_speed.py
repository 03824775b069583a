"""Simulator speed: simulated output tokens and engine steps per wall-second, by policy.

Standard workload: 8 replicas, a closed loop of 64 users per replica, an
MTP-style drafter (γ = 3, per-position acceptance 0.87 / 0.8 / 0.75, request
and token spread 0.3, perfect confidences), 600 simulated seconds, in one
process (one core). Two policies on the same workload: `static` length 3
(fixed lengths: no confidences, no per-step decision) and `dspark-async`
(confidences and a global search every step). Prints, per policy, the
median of `--repeats` runs of each rate, the median over runs of the
tokens rate as a ratio to the machine's reference rate measured in the same
process around each run (benchmarks/reference.py: simulated tokens per
reference step), and the median over runs of the tokens rate as a share of
a bare SimPy loop of the same workload run just before and just after it
(`bare_loop`: per replica one process, each step one numpy draw of its
requests' accepted drafts and one timeout of the step's price; issue 46's
measure of what a step costs over the least a step can cost).

    .venv/bin/python benchmarks/sim_speed.py [--repeats 3] [--duration 600] [--policy static --policy dspark-async]
        [--output-median 300]   (longer outputs: fewer arrivals and retirements per step, the engine's step alone)
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time
from pathlib import Path

import numpy as np
import simpy
from reference import bracketed

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping

STANDARD = {
    "name": "bench-sim-speed",
    "seed": 1,
    "horizon": {"duration_s": 600, "warmup_s": 10},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.02}, "gpus_per_replica": 1},
    "cluster": {"replicas": 8, "router": "least_loaded"},
    "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 4_000_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 50_000}, "scheduling_overhead_ms": 0.1},
    "drafter": {"family": "mtp", "block_size": 3,
                "acceptance": {"per_position": {"chat": [0.87, 0.8, 0.75]}, "domains": {"chat": 1.0},
                               "request_sigma": 0.3, "token_sigma": 0.3},
                "confidence": {"kind": "perfect"}, "latency": {"kind": "fixed", "ms": 0.5}},
    "policy": {"name": "static", "params": {"length": 3}},
    "workload": {"arrivals": {"kind": "closed_loop", "users": 512, "think_s": 1.0},
                 "prompt_tokens": {"kind": "lognormal", "median": 800, "sigma": 0.7, "max": 8000},
                 "output_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.8, "max": 4000}},
}
POLICIES = {"static": {"name": "static", "params": {"length": 3}}, "dspark-async": {"name": "dspark-async"}}


def rates(policy: str, duration_s: float, output_median: float) -> tuple[float, float, float]:
    """(simulated output tokens, engine steps, simulated seconds) per wall-second of one run."""
    raw = copy.deepcopy(STANDARD)
    raw["horizon"] = {"duration_s": duration_s, "warmup_s": 10}
    raw["workload"]["output_tokens"]["median"] = output_median
    raw["workload"]["output_tokens"]["max"] = max(4000, int(40 * output_median))
    raw["engine"]["kv_capacity_tokens"] = max(4_000_000, int(64 * 10 * output_median))
    raw["policy"] = POLICIES[policy]
    scenario = scenario_from_mapping(raw, Path.cwd())
    start = time.perf_counter()
    result = simulate(scenario)
    wall = time.perf_counter() - start
    tokens = int(result.steps["emitted_tokens"].sum()) + int(result.requests["first_token_s"].notna().sum())
    return tokens / wall, len(result.steps) / wall, duration_s / wall


def bare_loop(duration_s: float, output_median: float) -> float:
    """Simulated output tokens per wall-second of the standard workload as a bare SimPy loop: each replica one
    process whose step is one numpy draw (which of its 64 requests' 3 drafts are accepted) and one timeout of
    the step's price; no requests, no admission, no records (`output_median` moves nothing: every row decodes)."""
    engine, drafter = STANDARD["engine"], STANDARD["drafter"]
    rows, block = engine["max_batch_requests"], drafter["block_size"]
    acceptance = np.array(drafter["acceptance"]["per_position"]["chat"])
    profile = STANDARD["hardware"]["profile"]
    fixed_ms = profile["base_ms"] + drafter["latency"]["ms"] + engine["scheduling_overhead_ms"]
    env, emitted = simpy.Environment(), [0]

    def replica(rng: np.random.Generator):
        while True:
            accepted = int((rng.random((rows, block)) < acceptance).cumprod(axis=1).sum())
            emitted[0] += rows + accepted
            yield env.timeout((fixed_ms + profile["per_token_ms"] * rows * (1 + block)) / 1000.0)

    for child in np.random.SeedSequence(STANDARD["seed"]).spawn(STANDARD["cluster"]["replicas"]):
        env.process(replica(np.random.default_rng(child)))
    start = time.perf_counter()
    env.run(until=duration_s)
    return emitted[0] / (time.perf_counter() - start)


def of_bare_loop(measure, duration_s: float, output_median: float) -> tuple[tuple[float, float, float], float]:
    """(what `measure` returned, the bare loop's tokens rate around it: geometric mean of one before and after)."""
    before = bare_loop(duration_s, output_median)
    value = measure()
    return value, math.sqrt(before * bare_loop(duration_s, output_median))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--policy", action="append", choices=sorted(POLICIES), help="default: both")
    ap.add_argument("--output-median", type=float, default=300.0, help="median output tokens (default 300)")
    args = ap.parse_args()
    print(f"workload: 8 replicas x 64 closed-loop users, MTP-style drafter γ = 3, outputs median "
          f"{args.output_median:g} tokens, {args.duration:g} simulated s; median of {args.repeats} runs")
    for policy in args.policy or list(POLICIES):
        runs = [bracketed(lambda p=policy: of_bare_loop(lambda: rates(p, args.duration, args.output_median),
                                                        args.duration, args.output_median))
                for _ in range(args.repeats)]
        tokens, steps, sim = (statistics.median(measured[i] for (measured, _), _ in runs) for i in range(3))
        ratio = statistics.median(measured[0] / reference for (measured, _), reference in runs)
        reference = statistics.median(reference for _, reference in runs)
        bare = statistics.median(measured[0] / loop for (measured, loop), _ in runs)
        print(f"  {policy:<13} {tokens:>12,.0f} simulated output tokens/s  {steps:>9,.0f} engine steps/s  "
              f"{sim:>6.1f} simulated s/s  ({ratio:.1f} tokens per reference step; reference "
              f"{reference:,.0f} steps/s; {bare:.3f} of a bare SimPy loop's tokens/s)")


if __name__ == "__main__":
    main()
