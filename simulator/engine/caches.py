"""The KV rule's two shapes: one KV cache per engine, or one per data-parallel attention rank.

Chosen once when the core is assembled (`kv_caches`), never a branch in the
step. The rule itself (specplan.simulator.engine.decode): a request reserves
its whole footprint (prompt + generated + the draft block γ) at admission;
decoding grows it by the tokens emitted; when a cache overflows after a
step, its youngest requests (by arrival) are preempted until it fits, its
oldest always staying.

    OneCache     admission FIFO while the engine's cache has room (`intake.admit_fifo`);
                 preemption over the whole batch
    RankCaches   admission to the rank with a free slot and the most free KV, within
                 the engine's totals too (`intake.admit_to_ranks`); preemption against
                 the engine's total, then within each rank against its own cache
                 (`engine.dp_attention.balance: most_free_kv`)
    RoutedRanks  the engine's own dispatch: a request is sent to one rank when it reaches the
                 engine (`RankRouter`: SGLang's round_robin or total_requests, vLLM's least
                 loaded), waits in that rank's queue and is admitted FIFO within it; a
                 preempted request goes back to its rank; preemption as RankCaches

    kv.enqueued(core, rid)          a request joined the engine's queue (RoutedRanks sends it to a rank)
    kv.admit(core, now, free) -> [(rid, generated, kv[, rank]), ...]   the admitted requests
    kv.preempt(core) -> ids                                             the requests evicted
    kv.fits_below                   Σ footprints up to this need no preemption check (−1: always check)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from specplan.simulator.engine.batch import ALL, RANK, Batch
from specplan.simulator.engine.config import EngineConfig, RankLimits, resolved
from specplan.simulator.engine.intake import Admission, admit_fifo, admit_to_ranks
from specplan.simulator.engine.ranks import RankRouter, rank_cumsum, rank_order
from specplan.simulator.engine.records import RequestLog

NONE = np.zeros(0, dtype=np.int64)


class Holder(Protocol):
    """What a KV rule reads and changes of the decode core that holds the caches."""

    queue: deque[int]
    log: RequestLog
    batch: Batch
    footprint: int

    def footprints(self, rows: Any) -> np.ndarray: ...

    def evict(self, index: np.ndarray) -> np.ndarray: ...


class KvCaches(Protocol):
    fits_below: int

    def enqueued(self, core: Holder, rid: int) -> None: ...

    def admit(self, core: Holder, now: float, free: int) -> Sequence[tuple[int, ...]]: ...

    def preempt(self, core: Holder) -> np.ndarray: ...


def kv_caches(config: EngineConfig) -> KvCaches:
    capacity = resolved(config.engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
    if config.dp is None:
        return OneCache(capacity, config.block_size)
    if config.dp.balance == "most_free_kv":
        return RankCaches(capacity, config.block_size, config.dp)
    return RoutedRanks(capacity, config.block_size, config.dp)


class OneCache:
    """One KV cache for the engine (see the module docstring)."""

    def __init__(self, capacity: int, block_size: int) -> None:
        self.capacity, self.block_size = capacity, block_size
        self.fits_below = capacity  # Σ footprints within the cache: nothing to preempt

    def enqueued(self, core: Holder, rid: int) -> None:
        pass

    def admit(self, core: Holder, now: float, free: int) -> Sequence[tuple[int, ...]]:
        return admit_fifo(core.queue, core.log, now, free, core.footprint, self.capacity, self.block_size)

    def preempt(self, core: Holder) -> np.ndarray:
        """Evict the youngest requests until Σ footprints fits the cache again."""
        if core.footprint <= self.capacity:
            return NONE
        keep = np.cumsum(core.footprints(ALL)) <= self.capacity
        keep[0] = True  # the oldest request always stays (it fits on its own)
        return core.evict((~keep).nonzero()[0])


class RankCaches(OneCache):
    """One KV cache per attention rank, within the engine's total (see the module docstring)."""

    def __init__(self, capacity: int, block_size: int, dp: RankLimits) -> None:
        super().__init__(capacity, block_size)
        self.dp = dp
        self.fits_below = -1  # a rank may overflow while the total fits

    def admit(self, core: Holder, now: float, free: int) -> Sequence[tuple[int, ...]]:
        """FIFO admission to the rank with a free slot and the most free KV."""
        ranks = core.batch.ints[RANK]
        slots = np.bincount(ranks, minlength=self.dp.ranks)
        kv = np.bincount(ranks, weights=core.footprints(ALL), minlength=self.dp.ranks).astype(np.int64)
        return admit_to_ranks(core.queue, core.log, now, self.dp.requests - slots, self.dp.kv_tokens - kv,
                              self.block_size, free, self.capacity - core.footprint)

    def preempt(self, core: Holder) -> np.ndarray:
        """The engine's total first, then each rank's own cache: its youngest rows past it."""
        evicted = super().preempt(core)
        ranks = core.batch.ints[RANK]
        keep = rank_cumsum(core.footprints(ALL), ranks) <= self.dp.kv_tokens
        keep[rank_order(ranks) == 0] = True  # each rank's oldest request stays (it fits on its own)
        if keep.all():
            return evicted
        more = core.evict((~keep).nonzero()[0])
        return np.concatenate([evicted, more]) if evicted.size else more


class RoutedRanks(RankCaches):
    """Each request in its rank's queue, the rank chosen by the engine's dispatch (see the module docstring)."""

    def __init__(self, capacity: int, block_size: int, dp: RankLimits) -> None:
        super().__init__(capacity, block_size, dp)
        self.router = RankRouter(dp.balance, dp.ranks)

    def enqueued(self, core: Holder, rid: int) -> None:
        self.router.send(rid, core.batch.ints[RANK])

    def admit(self, core: Holder, now: float, free: int) -> Sequence[tuple[int, ...]]:
        """FIFO within each rank's queue, while the rank has a free slot and KV room and the engine's totals allow."""
        ranks = core.batch.ints[RANK]
        slots = self.dp.requests - np.bincount(ranks, minlength=self.dp.ranks)
        kv = np.bincount(ranks, weights=core.footprints(ALL), minlength=self.dp.ranks).astype(np.int64)
        admitted = admit_routed(core.queue, core.log, now, self.router, slots, self.dp.kv_tokens - kv,
                                self.block_size, free, self.capacity - core.footprint)
        self.router.admitted([rank for *_, rank in admitted])
        return admitted


def admit_routed(queue: deque[int], log: RequestLog, now: float, router: RankRouter, free_slots: np.ndarray,
                 kv_free: np.ndarray, block_size: int, total_free: int,
                 total_kv_free: int) -> list[tuple[int, int, int, int]]:
    """Admit queued requests, FIFO within each one's rank: a rank whose head does not fit admits nothing more
    this step; the scan stops when every rank is blocked, the engine's slots are taken or its KV is full.
    Returns (rid, generated, kv, rank)."""
    admitted: list[tuple[int, int, int, int]] = []
    blocked = np.zeros(free_slots.size, dtype=bool)
    rows = Admission(log, now)
    for rid in queue:
        if len(admitted) >= total_free or blocked.all():
            break
        rank = int(router.rank_of[rid])
        if blocked[rank]:
            continue
        generated, kv = rows.footprint(rid)
        if free_slots[rank] <= 0 or kv + block_size > kv_free[rank] or kv + block_size > total_kv_free:
            blocked[rank] = True
            continue
        free_slots[rank] -= 1
        kv_free[rank] -= kv + block_size
        total_kv_free -= kv + block_size
        rows.run(rid)
        admitted.append((rid, generated, kv, rank))
    if admitted:
        taken = {rid for rid, *_ in admitted}
        kept = [rid for rid in queue if rid not in taken]
        queue.clear()
        queue.extend(kept)
    return admitted
