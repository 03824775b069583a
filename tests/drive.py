"""Drive a scenario's decode core with every request queued at t = 0, steps back to back.

The core (specplan.simulator.engine.decode) takes its time from whoever drives it;
here it steps through the same function as a replica (specplan.simulator.engine.step,
each step lasting its price) in a SimPy environment of its own, but with no arrivals
and no prefill stage to wait for, so a test can step the engine's own logic fast and
look at it before each commit (`on_plan`) and after it (`on_step`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from specplan.simulator.core.streams import stream
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.decode import DecodeCore
from specplan.simulator.engine.intake import register
from specplan.simulator.engine.records import DONE, RequestLog, StepLog
from specplan.simulator.engine.step import PRICED, StepPlan, step
from specplan.simulator.scenario import Scenario


@dataclass
class Driven:
    core: DecodeCore
    log: RequestLog
    steps: StepLog

    def pooled_tau(self) -> float:
        """Σ (accepted + 1) / proposals over every decoding request-step."""
        frame = self.steps.frame()
        proposals = frame["decode_requests"].sum()
        return float((frame["accepted_tokens"].sum() + proposals) / proposals)


def drive(scenario: Scenario, prompts: np.ndarray, outputs: np.ndarray, domains: np.ndarray | None = None,
          on_plan: Callable[[DecodeCore, StepPlan], None] | None = None,
          on_step: Callable[[DecodeCore], None] | None = None, max_steps: int = 1_000_000) -> Driven:
    """Serve the requests (prompt and output lengths, domain indices) to completion; returns the records.

    `on_plan(core, plan)` sees each step before it is committed, `on_step(core)` after.
    """
    parts = assemble(scenario)
    log, steps = RequestLog(), StepLog()
    core = parts.core(log, steps)
    offsets = parts.drafter.acceptance.request_offsets(len(prompts), stream(scenario.seed, "request_sigma"))
    domains = np.zeros(len(prompts), dtype=np.int64) if domains is None else domains
    for prompt, output, domain, offset in zip(prompts.tolist(), outputs.tolist(), domains.tolist(), offsets.tolist(),
                                              strict=True):
        rid = register(log, 0.0, prompt, output, domain, offset)
        if not parts.config.chunked:  # the prefill stage's first token, at once
            log["first_token_s"][rid] = 0.0
            log["generated_tokens"][rid] = 1
            if output <= 1:
                log["status"][rid] = DONE
                continue
        core.enqueue(rid)
    env = simpy.Environment()
    env.process(serve(core, env, log, on_plan, on_step, max_steps))
    env.run()
    core.drain()
    return Driven(core, log, steps)


def serve(core: DecodeCore, env: simpy.Environment, log: RequestLog,
          on_plan: Callable[[DecodeCore, StepPlan], None] | None, on_step: Callable[[DecodeCore], None] | None,
          max_steps: int) -> Generator[simpy.Event, Any, None]:
    """Admit and step until the batch and the queue are empty (preempted requests back at the head)."""
    for _ in range(max_steps):
        core.admit(env.now)
        if core.batch.n == 0:
            return
        finished, evicted = yield from step(core, env, PRICED, on_plan)
        log["status"][finished] = DONE
        for rid in evicted[::-1].tolist():
            core.enqueue(rid, front=True)
        if on_step is not None:
            on_step(core)
