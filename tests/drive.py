"""Drive a scenario's decode core with every request queued at t = 0, steps back to back.

The core (specplan.simulator.engine.core.decode) takes its time from whoever drives it;
here it runs the same loop as a replica (specplan.simulator.engine.core.step.serve, each
step lasting its price) in a SimPy environment of its own, but with no arrivals and no
prefill stage to wait for, so a test can step the engine's own logic fast and look at
it before each commit (`on_plan`) and after it (`on_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from specplan.simulator.core.streams import stream
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.core.decode import DecodeCore
from specplan.simulator.engine.core.driver import EngineDriver
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.step import PRICED, StepPlan, serve
from specplan.simulator.engine.intake import register
from specplan.simulator.engine.records.step_log import StepLog
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
          on_step: Callable[[DecodeCore], None] | None = None) -> Driven:
    """Serve the requests (prompt and output lengths, domain indices) to completion; returns the records.

    `on_plan(core, plan)` sees each step before it is committed, `on_step(core)` after.
    """
    parts = assemble(scenario)
    log, steps = RequestLog(), StepLog()
    core = parts.core(log, steps)
    env = simpy.Environment()
    driver = Driver(env, core, log, on_plan, on_step)
    offsets = parts.drafter.acceptance.request_offsets(len(prompts), stream(scenario.seed, "request_sigma"))
    domains = np.zeros(len(prompts), dtype=np.int64) if domains is None else domains
    for prompt, output, domain, offset in zip(prompts.tolist(), outputs.tolist(), domains.tolist(), offsets.tolist(),
                                              strict=True):
        rid = register(log, 0.0, prompt, output, domain, offset)
        if not parts.config.chunked:  # the prefill stage emits the first token at once (first_token: prefill)
            log.first_token(rid, 0.0, counted=True)
            if output <= 1:
                log.finished(rid, 0.0)
                continue
        core.enqueue(rid)
    env.process(serve(core, env, PRICED, driver))
    env.run()
    core.drain()
    return Driven(core, log, steps)


class Driver(EngineDriver):
    """Requests finish in the log, preempted ones go back to the head of the queue; the loop stops when
    the batch and the queue are empty (specplan.simulator.engine.core.driver.EngineDriver)."""

    def __init__(self, env: simpy.Environment, core: DecodeCore, log: RequestLog,
                 on_plan: Callable[[DecodeCore, StepPlan], None] | None,
                 on_step: Callable[[DecodeCore], None] | None) -> None:
        super().__init__(env, core, log)
        self.core: DecodeCore = core
        self.on_plan, self.on_step = on_plan, on_step

    def idle(self) -> None:
        return None

    def planned(self, plan: StepPlan) -> None:
        if self.on_plan is not None:
            self.on_plan(self.core, plan)

    def stepped(self, finished: np.ndarray, evicted: np.ndarray) -> None:
        super().stepped(finished, evicted)
        if self.on_step is not None:
            self.on_step(self.core)
