"""The reference engine: a small but real speculative serving engine in torch.

`specplan fidelity` checks the simulator's predictions against this engine.
It shares with the simulator everything that is *decided* and nothing that
is *timed*:

  shared  the workload generators and their named streams (traces.workload,
          driven by a SimPy RealtimeEnvironment so that requests arrive in
          wall-clock time); the drafter's acceptance and confidence models and
          their streams (simulator.drafters: p and c per step, outcomes are
          uniform draws < p); the verification policy (policies/: StepView → ℓ);
          the request and step records and the summary (simulator.engine.records,
          simulator.engine.metrics), so both sides are measured the same way
  real    every duration: the drafter's forward, one flattened variable-length
          forward of all requests' tokens against their own KV caches (prompts
          prefilled in chunks by the same forward), and the host work between
          them (admission, policy, bookkeeping), all read from the wall clock

One engine step:

    admit    waiting requests, FIFO, while a batch slot and KV capacity remain
    draft    p, c for the decoding requests; a real drafter forward over their blocks
    decide   ℓ (R,) from the policy, which sees confidences, never p
    verify   one forward: 1 + ℓ tokens per decoding request and a prompt chunk
             per prefilling request (chunks FIFO within the step's token budget);
             linear layers run on the flat batch, attention as one padded call
             for the verify blocks and one for the prompt chunks
    commit   accepted = min(accepted prefix, ℓ); each KV cache keeps its
             accepted tokens; emit min(accepted + 1, remaining); a prompt that
             completes emits its first token
    clock    the SimPy clock moves to the wall clock, so requests that arrived
             during the step are admitted at the next one

The batch is a structure of numpy arrays (simulator.engine.batch.Batch); per-token
work happens inside torch, never in Python loops.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import simpy
import simpy.rt

from policies.base import Policy, StepOutcome, StepView, step_view
from policies.registry import make_policy
from simulator.core.errors import SpecplanError
from simulator.core.streams import seed_sequence, stream
from simulator.drafters.drafter import Drafter, build_drafter
from simulator.engine.batch import Batch, attention_context
from simulator.engine.intake import admit_fifo, domain_mix, register, request_domains
from simulator.engine.metrics import summarize
from simulator.engine.records import DONE, QUEUED, RequestLog, StepLog
from simulator.scenario import ChunkedPrefill, Scenario
from traces.workload import start_workload
from validation.runner import ModelRunner


@dataclass
class EngineResult:
    """What one real run measured, in the simulator's own record formats."""

    scenario: Scenario
    summary: dict[str, Any]
    requests: pd.DataFrame
    steps: pd.DataFrame


class PollingRealtimeEnvironment(simpy.rt.RealtimeEnvironment):
    """A wall-clock SimPy environment that polls instead of sleeping until the next event.

    An engine loop that sleeps between arrivals lets the core go idle, and
    the forwards right after pay for it (measured on the 2-core CPU with
    tiny-cpu: steps right after an idle wait ran 45% over the profile when
    sleeping, 23% when polling). Serving engines poll; so does this one.
    """

    def step(self) -> None:
        due = self.peek()
        if due != simpy.core.Infinity:
            real_due = self.real_start + (due - self.env_start) * self.factor
            while time.monotonic() < real_due:
                pass
        simpy.core.Environment.step(self)


class WallClock:
    """Seconds since the run started, on the same scale as the environment's clock."""

    def __init__(self, env: simpy.rt.RealtimeEnvironment) -> None:
        self.env = env

    def now_s(self) -> float:
        return self.env.env_start + (time.monotonic() - self.env.real_start) / self.env.factor


def check_engine_scenario(scenario: Scenario) -> None:
    """The reference engine is one device with chunked prefill; say so before running."""
    if scenario.cluster.replicas != 1:
        raise SpecplanError(f"reference engine: cluster.replicas must be 1, got {scenario.cluster.replicas}")
    if not isinstance(scenario.engine.prefill, ChunkedPrefill):
        raise SpecplanError("reference engine: engine.prefill must be {mode: chunked} "
                            "(prompts share the verify forward on one device)")
    if scenario.drafter.family not in ("dflash", "none"):
        raise SpecplanError(f"reference engine: drafter.family must be dflash or none, got "
                            f"'{scenario.drafter.family}' (its drafter is one parallel forward over R·γ tokens)")
    if scenario.horizon.duration_s is None:
        raise SpecplanError("reference engine: horizon.duration_s is required (it runs in wall-clock time)")


class ReferenceEngine:
    """One device serving a scenario's workload with real forwards; `run()` measures it."""

    def __init__(self, scenario: Scenario, runner: ModelRunner, profile: Any) -> None:
        check_engine_scenario(scenario)
        self.scenario, self.runner = scenario, runner
        self.env = PollingRealtimeEnvironment(strict=False)
        self.clock = WallClock(self.env)
        self.drafter: Drafter = build_drafter(scenario.drafter, profile,
                                              seed_sequence(scenario.seed, "calibration"))
        engine = scenario.engine
        self.max_batch = engine.max_batch_requests
        self.kv_capacity = engine.kv_capacity_tokens
        assert isinstance(engine.prefill, ChunkedPrefill)  # checked by the scenario guard above
        self.chunk_tokens = engine.prefill.chunk_tokens
        self.padded_attention = engine.attention == "padded"
        self.max_step_tokens = engine.max_step_tokens or profile.max_tokens
        self.steps_per_s = profile.steps_per_s(np.maximum(np.arange(self.max_step_tokens + 1), 1))
        self.gamma = self.drafter.block_size
        self.policy = make_policy(scenario.policy, self.gamma)
        self.speculates = self.policy.drafts and self.gamma > 0
        self.learns = type(self.policy).observe is not Policy.observe
        seed = scenario.seed
        self.rng_p, self.rng_c = stream(seed, "acceptance", 0), stream(seed, "confidence", 0)
        self.rng_u = stream(seed, "outcomes", 0)
        self.offset_rng = stream(seed, "request_sigma")
        self.log, self.steps = RequestLog(), StepLog()
        self.queue: deque[int] = deque()
        self.batch = Batch()
        self.done_events: dict[int, simpy.Event] = {}
        self.wake: simpy.Event | None = None
        self.step_index = 0
        self.first_token_rows = np.zeros(0, dtype=bool)
        self.step_context: list[int] = []

    # ---- arrivals (the simulator's workload processes call this) ----------------
    @property
    def domains(self) -> tuple[str, ...]:
        return request_domains(self.scenario, self.drafter)

    def domain_mix(self) -> np.ndarray:
        return domain_mix(self.scenario, self.domains)

    def submit(self, prompt: int, output: int, domain: int) -> simpy.Event:
        rid = register(self.log, self.env.now, prompt, output, domain, self.drafter, self.offset_rng)
        self.log["replica"][rid] = 0
        event = self.env.event()
        self.done_events[rid] = event
        if prompt + output + self.gamma > self.kv_capacity:
            self.log.reject(rid, "kv_capacity: prompt + output + block exceed kv_capacity_tokens")
            self.finish(np.array([rid]), rejected=True)
            return event
        self.enqueue(rid)
        return event

    def enqueue(self, rid: int, front: bool = False) -> None:
        self.log["status"][rid] = QUEUED
        (self.queue.appendleft if front else self.queue.append)(rid)
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    # ---- the run ----------------------------------------------------------------
    def run(self) -> EngineResult:
        self.runner.warm_up(self.max_step_tokens, self.max_batch, self.gamma)
        start_workload(self.env, self.scenario, self.submit, self.domain_mix())
        self.env.process(self.loop())
        self.env.sync()
        wall_start = time.perf_counter()
        self.env.run(until=self.scenario.horizon.duration_s)
        wall_s = time.perf_counter() - wall_start
        self.flush(np.ones(self.batch.n, dtype=bool))
        requests, steps = self.log.frame(self.domains), self.steps.frame()
        steps["context_tokens"] = np.asarray(self.step_context, dtype=np.int64)
        summary = summarize(self.scenario, requests, steps, self.env.now, wall_s)
        summary["engine"] = "reference (real torch forwards, wall clock)"
        return EngineResult(self.scenario, summary, requests, steps)

    def loop(self) -> Generator[simpy.Event, Any, None]:
        """Steps back to back while requests run; each step's time runs from the previous step's end."""
        cycle_start_s: float | None = None
        while True:
            self.admit()
            if self.batch.n == 0:
                self.wake = self.env.event()
                yield self.wake
                self.wake = None
                cycle_start_s = None
                continue
            if cycle_start_s is None:
                cycle_start_s = self.clock.now_s()
            end_s = self.step(cycle_start_s)
            yield self.env.timeout(max(0.0, end_s - self.env.now))
            self.after_step()
            cycle_start_s = end_s

    # ---- admission --------------------------------------------------------------
    def kv_used(self) -> int:
        return int(self.batch["kv_tokens"].sum() + self.batch["prefill_left"].sum()) + self.batch.n * self.gamma

    def admit(self) -> None:
        admitted = admit_fifo(self.queue, self.log, self.env.now, self.max_batch - self.batch.n,
                              self.kv_used(), self.kv_capacity, self.gamma)
        if not admitted:
            return
        rows: dict[str, list] = {name: [] for name in self.batch.cols}
        for rid, generated, kv in admitted:
            self.runner.open(rid)
            values = {"rid": rid, "remaining": int(self.log["output_tokens"][rid]) - generated,
                      "generated": generated, "kv_tokens": 0, "domain": int(self.log["domain"][rid]),
                      "offset": float(self.log["acceptance_offset"][rid]), "prefill_left": kv,
                      "steps": 0, "accepted": 0, "verified": 0}
            for name, value in values.items():
                rows[name].append(value)
        self.batch.append(rows)

    # ---- one step ---------------------------------------------------------------
    def step(self, start_s: float) -> float:
        """Draft, decide, verify and commit one step; records it and returns its end (s)."""
        b = self.batch
        decode = b["prefill_left"] == 0
        r = int(decode.sum())
        take = self.prefill_chunks(b["prefill_left"], r)
        self.step_context.append(attention_context(b["kv_tokens"], decode, take, self.padded_attention))
        lengths, accepted, drafting, draft_ms = self.speculate(decode, r, int(take.sum()))
        counts = take.copy()
        counts[decode] = 1 + lengths
        kept = take.copy()
        kept[decode] = 1 + accepted
        active = counts > 0
        verify_ms = self.runner.verify(b["rid"][active], counts[active], take[active] > 0)
        self.runner.keep(b["rid"][active], kept[active])
        emitted = self.commit(decode, lengths, accepted, take)
        end_s = self.clock.now_s()
        host_ms = max(0.0, (end_s - start_s) * 1000.0 - draft_ms - verify_ms)
        self.steps.add((end_s, 0, b.n, r, drafting, int(counts.sum()), int(take.sum()), emitted,
                        int(accepted.sum()), draft_ms, verify_ms, host_ms))
        self.step_index += 1
        return end_s

    def prefill_chunks(self, left: np.ndarray, decode_requests: int) -> np.ndarray:
        """Prompt tokens of each prefilling row taken this step: FIFO within the chunk budget."""
        budget = max(0, min(self.chunk_tokens, self.max_step_tokens - decode_requests))
        before = np.cumsum(left) - left
        return np.clip(budget - before, 0, left)

    def speculate(self, decode: np.ndarray, r: int, reserved: int) -> tuple[np.ndarray, np.ndarray, int, float]:
        """ℓ, accepted drafts, drafting requests and the drafter's measured ms, for decoding rows."""
        zeros = np.zeros(r, dtype=np.int64)
        if not self.speculates or r == 0:
            return zeros, zeros, 0, 0.0
        b = self.batch
        ids = b["rid"][decode]
        mask = self.policy.drafting_mask(ids)
        drafted = np.ones(r, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        p, c = self.drafter.draft(b["domain"][decode], b["offset"][decode], self.rng_p, self.rng_c)
        ok = self.rng_u.random(p.shape) < p
        prefix = np.where(ok.all(axis=1), self.gamma, ok.argmin(axis=1))
        c = np.where(drafted[:, None], c, 0.0)
        prefix = np.where(drafted, prefix, 0)
        drafting = int(drafted.sum())
        draft_ms = self.runner.draft(drafting, self.gamma) if drafting else 0.0
        view = self.view(c, ids, reserved, drafted, prefix)
        lengths = np.where(drafted, np.asarray(self.policy.decide(view), dtype=np.int64), 0)
        return lengths, np.minimum(prefix, lengths), drafting, draft_ms

    def view(self, c: np.ndarray, ids: np.ndarray, reserved: int, drafted: np.ndarray,
             prefix: np.ndarray) -> StepView:
        return step_view(self.policy, prefix, confidences=c, request_ids=ids, steps_per_s=self.steps_per_s,
                         max_step_tokens=self.max_step_tokens, reserved_tokens=reserved,
                         max_batch_requests=self.max_batch, block_size=self.gamma,
                         step_index=self.step_index, now_s=self.env.now, drafted=drafted)

    def commit(self, decode: np.ndarray, lengths: np.ndarray, accepted: np.ndarray,
               take: np.ndarray) -> int:
        """Apply emissions and prompt chunks to the batch; returns tokens emitted."""
        c = self.batch.cols
        emit = np.minimum(accepted + 1, c["remaining"][decode])
        for name, delta in (("remaining", -emit), ("generated", emit), ("kv_tokens", emit),
                            ("steps", 1), ("accepted", accepted), ("verified", lengths)):
            c[name][decode] += delta
        if self.learns and decode.any():
            self.policy.observe(StepOutcome(c["rid"][decode], lengths, accepted, self.env.now))
        was = c["prefill_left"] > 0
        c["prefill_left"] -= take
        c["kv_tokens"] += take
        first = was & (c["prefill_left"] == 0) & (c["generated"] == 0)
        c["generated"][first] += 1
        c["kv_tokens"][first] += 1
        c["remaining"][first] -= 1
        self.first_token_rows = first
        return int(emit.sum()) + int(first.sum())

    def after_step(self) -> None:
        """At the step's end time: first tokens, finished requests, KV overflow."""
        b, log = self.batch, self.log
        log["first_token_s"][b["rid"][self.first_token_rows]] = self.env.now
        done = (b["remaining"] <= 0) & (b["prefill_left"] == 0)
        if done.any():
            self.flush(done)
            ids = b["rid"][done]
            b.keep(~done)
            self.finish(ids)
        if self.kv_used() > self.kv_capacity:
            self.preempt()

    def flush(self, rows: np.ndarray) -> None:
        b, log = self.batch, self.log
        ids = b["rid"][rows]
        log["generated_tokens"][ids] = b["generated"][rows]
        for src, dst in (("steps", "steps"), ("accepted", "accepted_tokens"), ("verified", "verified_tokens")):
            log[dst][ids] += b[src][rows]
        b["steps"][rows] = 0
        b["accepted"][rows] = 0
        b["verified"][rows] = 0

    def finish(self, ids: np.ndarray, rejected: bool = False) -> None:
        if not rejected:
            self.log["finish_s"][ids] = self.env.now
            self.log["status"][ids] = DONE
            self.runner.release(ids)
        for rid in ids.tolist():
            self.done_events.pop(rid).succeed()

    def preempt(self) -> None:
        """Recompute-style, as the simulator: evict the youngest until the KV footprint fits."""
        b = self.batch
        keep = np.cumsum(b["kv_tokens"] + b["prefill_left"] + self.gamma) <= self.kv_capacity
        keep[0] = True
        evict = ~keep
        self.flush(evict)
        ids = b["rid"][evict]
        b.keep(keep)
        self.runner.release(ids)
        self.log["preemptions"][ids] += 1
        for rid in reversed(ids.tolist()):
            self.enqueue(rid, front=True)
