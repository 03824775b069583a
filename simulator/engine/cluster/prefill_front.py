"""Where a replica's requests compute their prompts: one `PrefillFront` per prefill mode, chosen at assembly.

    InEngine   chunked prefill: the decode core computes prompts in chunks inside its steps (a prompt's
               last chunk emits its first token); an arrival joins the decode queue, a preempted request
               its head
    Stage      disaggregated prefill at a fixed rate: a FIFO stage at `engine.prefill.tokens_per_s` in
               front of the decode queue; its KV is at the replica when the stage ends
    PoolStage  a prefill pool (specplan.simulator.engine.cluster.prefill, `cluster.prefill`): the
               simulation sends arrivals there before any replica is chosen; a preempted request goes
               back to it and its KV comes to whichever replica the router then picks

`prefill_front(env, core, log, pool)` picks one when the simulation builds a
replica (the pool, else the prefill mode), never a branch in the replica.

The first-token rule, once (the base class): a request whose KV reaches the
replica whole with no token yet (from the stage or the pool) awaits its first
token, which is the end of its first decode step, as the engines'
disaggregated serving streams from the decode side; with
`engine.prefill.first_token: prefill` the stage's end is the first token
instead. A request preempted before its first token still awaits it after its
prompt is computed again (`awaits_first`).

    front.submit(driver, rid, blocks)   a request handed to the replica: its prompt is computed
    front.requeue(driver, rid)          a preempted request: its prompt and generated tokens again
    front.receive(driver, rid, first)   its KV is at the replica: it joins the decode queue
    front.planned(plan)                 before a step: the ids it decodes, while some await their first token
    front.stepped(now)                  after it: their first tokens
    front.in_prefill                    requests in the front's own stage (what the router counts)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import simpy

from specplan.simulator.engine.cluster.prefill import PrefillPool
from specplan.simulator.engine.core.decode import DecodeCore
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.step import StepPlan


class FrontDriver(Protocol):
    """What a front asks of its replica (specplan.simulator.engine.core.driver.EngineDriver)."""

    def enqueue(self, rid: int, front: bool = False) -> None: ...

    def finish(self, ids: np.ndarray) -> None: ...

    def receive(self, rid: int, first: bool) -> None: ...


class PrefillFront(ABC):
    """A replica's prefill front: where prompts are computed (each subclass), and the first-token rule (here)."""

    in_prefill = 0

    def __init__(self, core: DecodeCore, log: RequestLog) -> None:
        self.core, self.log = core, log
        self.awaiting = 0                         # KV received whole, first token not yet emitted
        self.decoding: np.ndarray | None = None   # a step's decoding ids, while some await their first token

    @abstractmethod
    def submit(self, driver: FrontDriver, rid: int, blocks: Sequence[int] | None) -> None:
        """A request handed to the replica before its prompt is computed (`blocks`: its prompt's block hashes)."""

    @abstractmethod
    def requeue(self, driver: FrontDriver, rid: int) -> None:
        """A preempted request: its prompt and generated tokens are computed again."""

    def awaits_first(self, rid: int) -> bool:
        """A preempted request's first token is still to come (it was evicted before it): it awaits it again, no
        longer in this replica's decode batch until its KV comes back."""
        first = bool(np.isnan(self.log["first_token_s"][rid]))
        self.awaiting -= first
        return first

    def receive(self, driver: FrontDriver, rid: int, first: bool) -> None:
        """A request whose KV is at the replica; `first`: its first token comes from its first decode step."""
        self.awaiting += first
        driver.enqueue(rid)

    def planned(self, plan: StepPlan) -> None:
        if self.awaiting:
            self.decoding = self.core.decoding_ids(plan)

    def stepped(self, now: float) -> None:
        if self.decoding is not None:
            self.awaiting -= self.log.first_token(self.decoding, now).size
            self.decoding = None


class InEngine(PrefillFront):
    """Chunked prefill: prompts are the decode core's (its last chunk emits the first token)."""

    def submit(self, driver: FrontDriver, rid: int, blocks: Sequence[int] | None) -> None:
        driver.enqueue(rid)

    def requeue(self, driver: FrontDriver, rid: int) -> None:
        driver.enqueue(rid, front=True)


class Stage(PrefillFront):
    """Disaggregated prefill: a FIFO stage at `tokens_per_s`, then the decode queue."""

    def __init__(self, env: simpy.Environment, core: DecodeCore, log: RequestLog, tokens_per_s: float,
                 first_token: bool) -> None:
        super().__init__(core, log)
        self.env, self.tokens_per_s, self.first_token = env, tokens_per_s, first_token
        self.free_at = 0.0
        self.in_prefill = 0

    def submit(self, driver: FrontDriver, rid: int, blocks: Sequence[int] | None) -> None:
        self.start(driver, rid, int(self.log["prompt_tokens"][rid]), first=True)

    def requeue(self, driver: FrontDriver, rid: int) -> None:
        log = self.log
        tokens = int(log["prompt_tokens"][rid] + log["generated_tokens"][rid])
        self.start(driver, rid, tokens, self.awaits_first(rid))

    def start(self, driver: FrontDriver, rid: int, tokens: int, first: bool) -> None:
        now = self.env.now
        start = max(now, self.free_at)
        self.free_at = done_at = start + tokens / self.tokens_per_s
        self.in_prefill += 1
        self.log.prefill(rid)
        self.log.prefill_started(rid, start)
        event = self.env.timeout(done_at - now)
        event.callbacks.append(lambda _e: self.done(driver, rid, first))

    def done(self, driver: FrontDriver, rid: int, first: bool) -> None:
        """The stage's KV is at the replica at once; the first token is the decode's, or the stage's own with
        `engine.prefill.first_token: prefill`."""
        self.in_prefill -= 1
        log, now = self.log, self.env.now
        log.kv_ready(rid, now, computed=True)
        if first and self.first_token:
            log.first_token(rid, now, counted=True)
            if log["output_tokens"][rid] <= 1:
                driver.finish(np.array([rid]))
                return
            first = False
        driver.receive(rid, first)


class PoolStage(PrefillFront):
    """A prefill pool in front of the decode replicas: its requests come back through `receive`."""

    def __init__(self, core: DecodeCore, log: RequestLog, pool: PrefillPool) -> None:
        super().__init__(core, log)
        self.pool = pool

    def submit(self, driver: FrontDriver, rid: int, blocks: Sequence[int] | None) -> None:
        """A request handed to this replica before its prompt is computed goes to the pool, as every arrival
        does (the simulation sends arrivals there itself, before the router picks a decode replica)."""
        self.pool.submit(rid, int(self.log["prompt_tokens"][rid]), None if blocks is None else list(map(int, blocks)),
                         first=True)

    def requeue(self, driver: FrontDriver, rid: int) -> None:
        log = self.log
        tokens = int(log["prompt_tokens"][rid] + log["generated_tokens"][rid])
        self.pool.submit(rid, tokens, None, first=self.awaits_first(rid))


def prefill_front(env: simpy.Environment, core: DecodeCore, log: RequestLog,
                  pool: PrefillPool | None) -> PrefillFront:
    """The front a replica's prefill mode runs: the pool when the cluster has one, else the engine's mode."""
    config = core.config
    if pool is not None:
        return PoolStage(core, log, pool)
    if config.chunked:
        return InEngine(core, log)
    assert config.prefill_tokens_per_s is not None  # disaggregated: the stage's rate
    return Stage(env, core, log, config.prefill_tokens_per_s, config.stage_first_token)
