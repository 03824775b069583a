"""The engine loop, written once: admit → schedule → time → wait → commit. Every driver of a decode core runs it.

    yield from serve(core, env, clock, driver)     the body of a SimPy process

    admit     waiting requests join the batch under the KV rule (`DecodeCore.admit`);
              with no running row the loop waits for the driver's wake-up (`driver.idle()`)
    schedule  the core decides the step (`DecodeCore.schedule`: rows, drafts, the policy's
              lengths, the price quote) and returns its `StepPlan`
    time      the clock says how long its parts took (`StepTiming`, ms) and how long to wait:
              `PRICED` charges the quote (drafting + verify at B and the batch's KV context +
              host time + the scheduling overhead the policy pays), the same quote the
              policy's Θ read; the reference engine's clock runs the real forwards and reads
              the wall clock (specplan.validation.engine)
    wait      one SimPy timeout: one event per engine step
    commit    the core applies the step at its end (`DecodeCore.commit`): tokens, records,
              retirements, preemptions; the driver then handles the finished and preempted
              requests (`driver.stepped`)

The simulator's replicas (specplan.simulator.engine.cluster.replica), the reference
engine and the tests' driver (tests/drive.py) all run this loop, so a test
drives the code it tests; what each does around a step (waking, first
tokens, requeueing, opening real KV caches) is its `Driver`
(specplan.simulator.engine.core.driver.EngineDriver, the base all three subclass).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple, Protocol

import numpy as np
import simpy

from specplan.engines import StepMode
from specplan.policies.base import Decision, ThetaChoice
from specplan.simulator.engine.price.quote import StepQuote
from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.engine.step_modes import UNMODELLED

NEW = tuple.__new__  # a NamedTuple made from a tuple of all its fields (its own __new__ is a Python call)


class StepPlan(NamedTuple):
    """What one step will do: decided before its time passes, applied by `commit` (the core makes it from a tuple)."""

    rows: Any                        # decoding rows that run: ALL, or an index array
    decode_requests: int             # R: rows that decode this step
    lengths: np.ndarray | int        # ℓ per decoding row (R,), or one ℓ for all (fixed lengths, uniform decisions)
    accepted: np.ndarray             # drafts the target accepts per decoding row (R,), ≤ ℓ
    prefill_take: np.ndarray | None  # prompt tokens per batch row this step (chunked prefill)
    prefill_tokens: int
    drafting_requests: int
    verify_tokens: int               # B = R + Σℓ + prefill tokens
    context_tokens: int              # KV context the profile lookup uses
    deferred_requests: int           # decoding rows the token budget left out
    quote: StepQuote
    decision: Decision | None        # the policy's Decision when it decided this step (None: fixed or no drafts)
    truncated_drafts: int = 0        # drafts cut at the budget edge (engine.budget: truncate)
    held_requests: int = 0           # decoding rows that wait for their rank's prefill batch (separate prefill)
    load: StepLoad | None = None     # the step per attention rank, when the price reads it
    mode: StepMode = UNMODELLED      # how the engine runs it: graph, piecewise or eager, why (specplan.engines)

    @property
    def theta_choice(self) -> ThetaChoice | None:
        """What the policy's Decision said it optimised (None: no Θ choice)."""
        return None if self.decision is None else self.decision.theta

    @property
    def draft_width(self) -> tuple[int, int] | None:
        """(widest, all) drafts when the policy drafted fewer than whole blocks (drafting priced for them)."""
        return None if self.decision is None else self.decision.draft_width

    @property
    def step_ms(self) -> float:
        """The step's price at its B: what a priced driver charges."""
        return self.quote.step_ms(self.verify_tokens)


class StepTiming(NamedTuple):
    """How long the step's parts took (priced or measured), in ms.

    `overhead_ms` is everything outside drafting and the verify forward: host
    time plus the scheduling overhead the policy pays (a quote's `host_ms +
    scheduling_ms`), as the step records keep it.
    """

    draft_ms: float
    verify_ms: float
    overhead_ms: float


class StepClock(Protocol):
    def time(self, plan: StepPlan, now: float) -> tuple[StepTiming, float]:
        """The step's parts (ms) and how long the driver waits for its end (s)."""
        ...


class PricedClock:
    """A step lasts its price: the quote at the step's verify tokens B."""

    def time(self, plan: StepPlan, now: float) -> tuple[StepTiming, float]:
        quote = plan.quote
        verify_ms = quote.verify_ms(plan.verify_tokens)
        return (NEW(StepTiming, (quote.draft_ms, verify_ms, quote.host_ms + quote.scheduling_ms)),
                (quote.fixed_ms + verify_ms) / 1000.0)


PRICED = PricedClock()

class Core(Protocol):
    """What the loop asks of a decode core (specplan.simulator.engine.core.decode.DecodeCore)."""

    @property
    def waiting(self) -> int: ...

    @property
    def running(self) -> int: ...

    def enqueue(self, rid: int, front: bool = False) -> None: ...

    def admit(self, now: float) -> int: ...

    def schedule(self, now: float) -> StepPlan: ...

    def commit(self, plan: StepPlan, timing: StepTiming, now: float) -> tuple[np.ndarray, np.ndarray]: ...


class Driver(Protocol):
    """What a driver does around the loop's steps (specplan.simulator.engine.core.driver.EngineDriver)."""

    def admitted(self, count: int) -> None: ...

    def idle(self) -> simpy.Event | None: ...

    def planned(self, plan: StepPlan) -> None: ...

    def stepped(self, finished: np.ndarray, evicted: np.ndarray) -> None: ...


def serve(core: Core, env: simpy.Environment, clock: StepClock,
          driver: Driver) -> Generator[simpy.Event, Any, None]:
    """The engine loop (see the module docstring), until the driver's `idle` says stop."""
    schedule, commit, time, timeout = core.schedule, core.commit, clock.time, env.timeout  # bound once, used per step
    planned, stepped = driver.planned, driver.stepped
    while True:
        if core.waiting:
            admitted = core.admit(env.now)
            if admitted:
                driver.admitted(admitted)
        if core.running == 0:
            wake = driver.idle()
            if wake is None:
                return
            yield wake
            continue
        now = env.now
        plan = schedule(now)
        planned(plan)
        timing, wait_s = time(plan, now)
        yield timeout(wait_s)
        finished, evicted = commit(plan, timing, env.now)
        stepped(finished, evicted)
