"""One replica: the decode core (specplan.simulator.engine.core.decode) driven by a SimPy clock, one event per step.

    loop:  admit → schedule → wait the step's price → commit → first tokens / finish / requeue

The loop is the one every driver runs (specplan.simulator.engine.core.step.serve),
this replica its driver, each step priced: its duration is the quote the policy's Θ read (drafting + verify at
B and the batch's KV context + host time + the scheduling overhead the
policy pays). Prefill is either chunked (prompt chunks share the decode
step's token budget, in the core; a prompt's last chunk emits its first
token) or disaggregated: a FIFO prefill stage at tokens_per_s in front of
the decode queue, or a prefill pool (specplan.simulator.engine.cluster.prefill,
given at construction) whose requests `receive` takes when their KV has
arrived. Either way a request's KV reaches the decode queue with no token
yet, and the end of its first decode step is its first token, as in the
engines' disaggregated serving, where the client streams from the decode
side; with `engine.prefill.first_token: prefill` the stage's end is the
first token instead (`prefill_done`). A preempted request goes back to the head of the queue
(chunked) or through prefill again to recompute its prompt and generated
tokens (disaggregated); evicted before its first token, it still awaits it.
The stage marks of TTFT's parts (`request_log.ttft_parts`) are the request
log's transitions, called where each stage ends: here for the fixed-rate
stage, in the pool and the core for theirs. What every driver does
(enqueue, finish, requeue, wake) is `EngineDriver`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
import simpy

from specplan.simulator.engine.cluster.prefill import PrefillPool
from specplan.simulator.engine.core.decode import DecodeCore
from specplan.simulator.engine.core.driver import EngineDriver
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.step import PRICED, StepClock, StepPlan, serve


class Replica(EngineDriver):
    """A decode engine in simulated time; `submit(rid)` hands it a routed request."""

    def __init__(self, env: simpy.Environment, core: DecodeCore, log: RequestLog,
                 on_done: Callable[[int], None], prefill_pool: PrefillPool | None = None,
                 clock: StepClock = PRICED) -> None:
        super().__init__(env, core, log)
        self.core: DecodeCore = core
        self.index, self.on_done = core.index, on_done
        self.config = core.config
        self.prefill_pool = prefill_pool
        self.prefill_free_at = 0.0
        self.in_prefill = 0
        self.awaiting_first = 0    # KV received from disaggregated prefill, first token not yet emitted
        self.decoding: np.ndarray | None = None  # a step's decoding ids, while some await their first token
        self.clock = clock  # the priced step (kv_tiers.LoadingClock: waiting for host-tier loads)
        env.process(self.run())

    # ---- arrivals -----------------------------------------------------------------
    def outstanding(self) -> int:
        """Requests this replica holds: in prefill, queued, or running."""
        state = self.core.state  # read directly: the router asks every replica at every arrival
        return self.in_prefill + len(state.queue) + state.batch.n

    def submit(self, rid: int, blocks: Sequence[int] | None = None, rank: int | None = None) -> None:
        self.core.remember(rid, blocks, rank)
        log = self.log
        log.routed(rid, self.index)
        if self.rejects(rid):
            return
        if self.config.chunked:
            self.enqueue(rid)
        else:
            self.start_prefill(rid, int(log["prompt_tokens"][rid]), first=True)

    def start_prefill(self, rid: int, tokens: int, first: bool) -> None:
        """Disaggregated prefill: a FIFO stage at tokens_per_s, then the decode queue."""
        assert self.config.prefill_tokens_per_s is not None
        now = self.env.now
        start = max(now, self.prefill_free_at)
        self.prefill_free_at = done_at = start + tokens / self.config.prefill_tokens_per_s
        self.in_prefill += 1
        self.log.prefill(rid)
        self.log.prefill_started(rid, start)
        event = self.env.timeout(done_at - now)
        event.callbacks.append(lambda _e: self.prefill_done(rid, first))

    def prefill_done(self, rid: int, first: bool) -> None:
        """The stage's KV is at this replica at once; the first token is the decode's (`first_tokens`), or the
        stage's own with `engine.prefill.first_token: prefill`."""
        self.in_prefill -= 1
        log, now = self.log, self.env.now
        log.kv_ready(rid, now, computed=True)
        if first and self.config.stage_first_token:
            log.first_token(rid, now, counted=True)
            if log["output_tokens"][rid] <= 1:
                self.finish(np.array([rid]))
                return
            first = False
        self.receive(rid, first)

    def receive(self, rid: int, first: bool) -> None:
        """A request whose KV has reached this replica (from the prefill stage or a pool); `first`: its first
        token comes from its first decode step."""
        self.log.routed(rid, self.index)
        self.awaiting_first += first
        self.enqueue(rid)

    # ---- the engine loop (specplan.simulator.engine.core.step.serve): this replica as its driver ----------
    def run(self) -> Generator[simpy.Event, Any, None]:
        yield from serve(self.core, self.env, self.clock, self)

    def planned(self, plan: StepPlan) -> None:
        """Before a step's time passes: the ids it decodes, while some await their first token (disaggregated
        prefill's requests get it at the end of their first step)."""
        if self.awaiting_first:
            self.decoding = self.core.decoding_ids(plan)

    def stepped(self, finished: np.ndarray, evicted: np.ndarray) -> None:
        if self.decoding is not None:
            self.awaiting_first -= self.log.first_token(self.decoding, self.env.now).size
            self.decoding = None
        EngineDriver.stepped(self, finished, evicted)  # not super(): called every step

    def done(self, rid: int) -> None:
        self.on_done(rid)

    def requeue(self, rid: int) -> None:
        """A preempted request: back to the head of the queue, or through prefill again."""
        if self.config.chunked:
            self.enqueue(rid, front=True)
            return
        tokens = int(self.log["prompt_tokens"][rid] + self.log["generated_tokens"][rid])
        first = bool(np.isnan(self.log["first_token_s"][rid]))  # evicted before its first token: still awaits it
        self.awaiting_first -= first
        if self.prefill_pool is not None:
            self.prefill_pool.submit(rid, tokens, None, first=first)
        else:
            self.start_prefill(rid, tokens, first)
