"""The reference engine: a small but real speculative serving engine in torch.

`specplan fidelity` checks the simulator's predictions against this engine.
It shares with the simulator everything that is *decided* and nothing that
is *timed*:

  shared  the workload generators and their named streams (specplan.simulator.engine.cluster.workload,
          driven by a SimPy RealtimeEnvironment so that requests arrive in
          wall-clock time); the drafter's acceptance and confidence models and
          their streams (specplan.simulator.drafters: p and c per step, outcomes are
          uniform draws < p); the verification policy (policies/: StepView → ℓ);
          the request and step records and the summary (specplan.simulator.engine.records.step_log,
          specplan.simulator.engine.records.summary), so both sides are measured the same way
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

The batch is a structure of numpy arrays (specplan.simulator.engine.batch.Batch); per-token
work happens inside torch, never in Python loops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import simpy
import simpy.rt

from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.drafter import Drafter
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.batch import PREFILL_LEFT, RID
from specplan.simulator.engine.cluster.workload import start_workload
from specplan.simulator.engine.core.decode import DecodeCore
from specplan.simulator.engine.core.driver import EngineDriver
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.step import StepPlan, StepTiming, serve
from specplan.simulator.engine.intake import FrontDoor
from specplan.simulator.engine.records.recorders import merged_counts
from specplan.simulator.engine.records.step_log import StepLog
from specplan.simulator.engine.records.summary import summarize
from specplan.simulator.scenario import ChunkedPrefill, Scenario
from specplan.validation.runner import ModelRunner


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


class MeasuredClock:
    """A step lasts what its real forwards and the host work around them took (specplan.simulator.engine.core.step).

    `forwards(plan)` runs the drafter and verify forwards and returns their ms; the host time is
    the rest of the cycle since the previous step's end, or since the engine woke from an idle
    wait (`restart`): admission, scheduling and bookkeeping. The driver
    waits until the wall clock's end of the step, so requests that arrived meanwhile are
    admitted at the next one.
    """

    def __init__(self, wall: WallClock, forwards: Callable[[StepPlan], tuple[float, float]]) -> None:
        self.wall, self.forwards = wall, forwards
        self.cycle_start_s: float | None = None

    def restart(self) -> None:
        """The engine woke from an idle wait: the next step's cycle starts now."""
        self.cycle_start_s = self.wall.now_s()

    def time(self, plan: StepPlan, now: float) -> tuple[StepTiming, float]:
        start_s = self.wall.now_s() if self.cycle_start_s is None else self.cycle_start_s
        draft_ms, verify_ms = self.forwards(plan)
        end_s = self.wall.now_s()
        host_ms = max(0.0, (end_s - start_s) * 1000.0 - draft_ms - verify_ms)
        self.cycle_start_s = end_s
        return StepTiming(draft_ms, verify_ms, host_ms), max(0.0, end_s - now)


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


class ReferenceEngine(EngineDriver):
    """One device serving a scenario's workload with real forwards; `run()` measures it."""

    def __init__(self, scenario: Scenario, runner: ModelRunner, profile: StepProfile) -> None:
        check_engine_scenario(scenario)
        self.scenario, self.runner = scenario, runner
        env = PollingRealtimeEnvironment(strict=False)
        self.clock = WallClock(env)
        parts = assemble(scenario, profile)
        self.drafter: Drafter = parts.drafter
        self.config = parts.config
        log = RequestLog()
        super().__init__(env, parts.core(log, StepLog()), log)
        self.core: DecodeCore
        self.front = FrontDoor(scenario, self.drafter, self.log)
        self.measured = MeasuredClock(self.clock, self.forwards)

    # ---- arrivals (the simulator's workload processes call this) ----------------
    def submit(self, prompt: int, output: int, domain: int, blocks: tuple[int, ...] | None = None) -> simpy.Event:
        """One arrival (prompt block hashes, if the trace has them, are not used: no prefix cache here)."""
        rid, event = self.front.arrive(self.env, prompt, output, domain)
        self.log.routed(rid, 0)
        if not self.rejects(rid):
            self.enqueue(rid)
        return event

    def done(self, rid: int) -> None:
        self.front.done(rid)

    # ---- the run ----------------------------------------------------------------
    def run(self) -> EngineResult:
        self.runner.warm_up(self.config.max_step_tokens, self.config.engine.max_batch_requests,
                            self.config.block_size)
        env = self.env
        assert isinstance(env, simpy.rt.RealtimeEnvironment)
        arrivals = start_workload(env, self.scenario, self.submit, self.front.domain_mix)
        env.process(self.loop())
        env.sync()
        wall_start = time.perf_counter()
        env.run(until=self.scenario.horizon.duration_s)
        wall_s = time.perf_counter() - wall_start
        self.core.drain()
        recorded, _spec, drafts, chunks = merged_counts([self.core.recorders],
                                                        1 if self.config.dp is None else self.config.dp.ranks)
        requests, steps = self.log.frame(self.front.domains), self.core.recorders.steps.frame()
        summary = summarize(self.scenario, requests, steps, env.now, wall_s, extra_counts={**arrivals.summary_counts(),
                                                                                     **recorded}, chunks=chunks)
        summary["draft_record"] = None if drafts is None else drafts.as_json()
        summary["engine"] = "reference (real torch forwards, wall clock)"
        return EngineResult(self.scenario, summary, requests, steps)

    def loop(self) -> Generator[simpy.Event, Any, None]:
        """Steps back to back while requests run (specplan.simulator.engine.core.step.serve, this engine its
        driver), each measured by the wall clock from the previous step's end (`MeasuredClock`)."""
        yield from serve(self.core, self.env, self.measured, self)

    def admitted(self, count: int) -> None:
        """Each admitted request gets its real KV cache."""
        batch = self.core.state.batch
        for rid in batch.ints[RID][batch.n - count:].tolist():
            self.runner.open(rid)

    def idle(self) -> simpy.Event:
        """Wait for an arrival; the next step's cycle starts when it wakes the loop."""
        wake = super().idle()
        assert wake is not None
        wake.callbacks.append(lambda _event: self.measured.restart())
        return wake

    def stepped(self, finished: np.ndarray, evicted: np.ndarray) -> None:
        self.runner.release(finished)
        self.runner.release(evicted)
        super().stepped(finished, evicted)

    def forwards(self, plan: StepPlan) -> tuple[float, float]:
        """The step's real forwards: the drafter over the drafting blocks, one verify; their ms."""
        ints = self.core.state.batch.ints
        drafts = plan.lengths if isinstance(plan.lengths, int) else self.config.block_size
        draft_ms = self.runner.draft(plan.drafting_requests, drafts) if plan.drafting_requests else 0.0
        counts = np.zeros(ints.shape[1], dtype=np.int64) if plan.prefill_take is None else plan.prefill_take.copy()
        kept = counts.copy()
        counts[plan.rows.index] = 1 + plan.lengths
        kept[plan.rows.index] = 1 + plan.accepted
        active = counts > 0
        prefill = ints[PREFILL_LEFT][active] > 0
        rids = ints[RID][active]
        verify_ms = self.runner.verify(rids, counts[active], prefill)
        self.runner.keep(rids, kept[active])
        return draft_ms, verify_ms
