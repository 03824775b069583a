"""One replica: the decode core (specplan.simulator.engine.decode) driven by a SimPy clock, one event per step.

    loop:  admit → plan → wait the step's price → commit → finish / requeue

The step's duration is its price (`StepPlan.step_ms`: drafting + verify at
B and the batch's KV context + host time + the scheduling overhead the
policy pays), the same quote the policy's Θ read. Prefill is either
disaggregated (a FIFO prefill stage at tokens_per_s in front of the decode
queue; the first token comes from prefill) or chunked (prompt chunks share
the decode step's token budget, in the core). Preempted requests go back
to the head of the queue (chunked) or through the prefill stage again to
recompute their prompt and generated tokens (disaggregated).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from specplan.policies.base import Policy
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.decode import DecodeCore, StepTiming
from specplan.simulator.engine.records import DONE, PREFILL, QUEUED, RequestLog, StepLog


class Replica:
    """A decode engine in simulated time; `submit(rid)` hands it a routed request."""

    def __init__(self, env: simpy.Environment, index: int, config: EngineConfig, policy: Policy, drafter: Any,
                 profile: Any, seed: int, log: RequestLog, steps: StepLog, on_done: Callable[[int], None]) -> None:
        self.env, self.index, self.log, self.on_done = env, index, log, on_done
        self.config = config
        self.core = DecodeCore(config, policy, drafter, profile, log, steps, seed, index)
        self.prefill_free_at = 0.0
        self.in_prefill = 0
        self.wake: simpy.Event | None = None
        env.process(self.run())

    # ---- arrivals -----------------------------------------------------------------
    def outstanding(self) -> int:
        """Requests this replica holds: in prefill, queued, or running."""
        return self.in_prefill + len(self.core.queue) + self.core.batch.n

    def submit(self, rid: int) -> None:
        log = self.log
        log["replica"][rid] = self.index
        need = int(log["prompt_tokens"][rid] + log["output_tokens"][rid]) + self.config.block_size
        if need > self.config.request_kv_limit:
            log.reject(rid, "kv_capacity: prompt + output + block exceed kv_capacity_tokens (of one attention rank)"
                       if self.config.ranks > 1 else "kv_capacity: prompt + output + block exceed kv_capacity_tokens")
            self.on_done(rid)
        elif self.config.chunked:
            self.enqueue(rid)
        else:
            self.start_prefill(rid, int(log["prompt_tokens"][rid]), first=True)

    def start_prefill(self, rid: int, tokens: int, first: bool) -> None:
        """Disaggregated prefill: a FIFO stage at tokens_per_s, then the decode queue."""
        assert self.config.prefill_tokens_per_s is not None
        now = self.env.now
        done_at = max(now, self.prefill_free_at) + tokens / self.config.prefill_tokens_per_s
        self.prefill_free_at = done_at
        self.in_prefill += 1
        self.log["status"][rid] = PREFILL
        event = self.env.timeout(done_at - now)
        event.callbacks.append(lambda _e: self.prefill_done(rid, first))

    def prefill_done(self, rid: int, first: bool) -> None:
        self.in_prefill -= 1
        log = self.log
        if first:
            log["first_token_s"][rid] = self.env.now
            log["generated_tokens"][rid] = 1
            if log["output_tokens"][rid] <= 1:
                self.finish(np.array([rid]))
                return
        self.enqueue(rid)

    def enqueue(self, rid: int, front: bool = False) -> None:
        self.log["status"][rid] = QUEUED
        self.core.enqueue(rid, front)
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    # ---- the engine loop ------------------------------------------------------------
    def run(self) -> Generator[simpy.Event, Any, None]:
        core, env = self.core, self.env
        while True:
            if core.queue:
                core.admit(env.now)
            if core.batch.n == 0:
                self.wake = env.event()
                yield self.wake
                self.wake = None
                continue
            plan = core.plan(env.now)
            quote = plan.quote
            verify_ms = quote.verify_ms(plan.verify_tokens)
            yield env.timeout((quote.fixed_ms + verify_ms) / 1000.0)
            timing = StepTiming(quote.draft_ms, verify_ms, quote.host_ms + quote.overhead_ms)
            finished, evicted = core.commit(plan, timing, env.now)
            if finished.size:
                self.finish(finished)
            if evicted.size:
                for rid in evicted[::-1].tolist():
                    self.requeue(rid)

    def finish(self, ids: np.ndarray) -> None:
        finish_s, status, now = self.log["finish_s"], self.log["status"], self.env.now
        for rid in ids.tolist():
            finish_s[rid] = now
            status[rid] = DONE
            self.on_done(rid)

    def requeue(self, rid: int) -> None:
        """A preempted request: back to the head of the queue, or through prefill again."""
        if self.config.chunked:
            self.enqueue(rid, front=True)
            return
        tokens = int(self.log["prompt_tokens"][rid] + self.log["generated_tokens"][rid])
        self.start_prefill(rid, tokens, first=False)
