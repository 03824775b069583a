"""Drive a scenario's decode core without SimPy: every request queued at t = 0, steps back to back.

The core (specplan.simulator.engine.decode) takes its time from whoever drives it;
here each step lasts its price, as in a replica, but there are no arrivals
and no prefill stage to wait for, so a test can step the engine's own logic
fast and look at it between steps (`on_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specplan.simulator.core.streams import stream
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.decode import DecodeCore, StepPlan, StepTiming
from specplan.simulator.engine.intake import register
from specplan.simulator.engine.records import DONE, RequestLog, StepLog
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
    drafter, config = parts.drafter, parts.config
    log, steps = RequestLog(), StepLog()
    core = parts.core(log, steps)
    offsets = drafter.acceptance.request_offsets(len(prompts), stream(scenario.seed, "request_sigma"))
    domains = np.zeros(len(prompts), dtype=np.int64) if domains is None else domains
    for prompt, output, domain, offset in zip(prompts.tolist(), outputs.tolist(), domains.tolist(), offsets.tolist(),
                                              strict=True):
        rid = register(log, 0.0, prompt, output, domain, offset)
        if not config.chunked:  # the prefill stage's first token, at once
            log["first_token_s"][rid] = 0.0
            log["generated_tokens"][rid] = 1
            if output <= 1:
                log["status"][rid] = DONE
                continue
        core.enqueue(rid)
    now, finished = 0.0, 0
    for _ in range(max_steps):
        core.admit(now)
        if core.batch.n == 0:
            break
        plan = core.plan(now)
        if on_plan is not None:
            on_plan(core, plan)
        quote = plan.quote
        now += plan.step_ms / 1000.0
        timing = StepTiming(quote.draft_ms, quote.verify_ms(plan.verify_tokens), quote.host_ms + quote.scheduling_ms)
        done, evicted = core.commit(plan, timing, now)
        log["status"][done] = DONE
        finished += done.size
        for rid in evicted[::-1].tolist():
            core.enqueue(rid, front=True)
        if on_step is not None:
            on_step(core)
    core.drain()
    return Driven(core, log, steps)
