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
from specplan.simulator.engine.intake import admit_fifo, admit_to_ranks
from specplan.simulator.engine.ranks import rank_cumsum, rank_order
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

    def admit(self, core: Holder, now: float, free: int) -> Sequence[tuple[int, ...]]: ...

    def preempt(self, core: Holder) -> np.ndarray: ...


def kv_caches(config: EngineConfig) -> KvCaches:
    capacity = resolved(config.engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
    if config.dp is None:
        return OneCache(capacity, config.block_size)
    return RankCaches(capacity, config.block_size, config.dp)


class OneCache:
    """One KV cache for the engine (see the module docstring)."""

    def __init__(self, capacity: int, block_size: int) -> None:
        self.capacity, self.block_size = capacity, block_size
        self.fits_below = capacity  # Σ footprints within the cache: nothing to preempt

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
