"""The KV rule's two shapes: one KV cache per engine, or one per data-parallel attention rank.

Chosen once when the core is assembled (`kv_caches`), never a branch in the
step. The rule itself (docs/model/index.md, "The KV rule"): a request
reserves its whole footprint (prompt + generated + the draft block γ) at
admission; decoding grows it by the tokens emitted; when a cache overflows
after a step, its youngest requests (by arrival) are preempted until it
fits, its oldest always staying.

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

A rule reads the engine's state (specplan.simulator.engine.core.state.BatchState)
and answers; it never changes the batch (the core does, as vLLM's cache
manager answers `allocate_slots` and the scheduler acts):

    kv.enqueued(state, rid)                     a request joined the queue (RoutedRanks sends it to a rank)
    kv.admit(state, log, free) -> [(rid, generated, kv[, rank]), ...]   the admitted requests, in admission
                                                order (popped from the queue; the log only read: the core
                                                marks their rows admitted)
    kv.preempt(state) -> rows                   the rows to evict, in eviction order (none: empty)
    kv.fits_below                               Σ footprints up to this need no preemption check (−1: always)
    kv.pin(rid, rank)                           a sticky router sent the request to this rank (RoutedRanks keeps
                                                it; one cache has no ranks; most_free_kv chooses at admission)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from specplan.simulator.engine.batch import RANK
from specplan.simulator.engine.cluster.ranks import (
    RankRouter,
    rank_cumsum,
    rank_order,
    ranks_within,
)
from specplan.simulator.engine.config import EngineConfig, RankLimits, resolved
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.state import BatchState
from specplan.simulator.engine.intake import Admission, admit_fifo, admit_to_ranks

NONE = np.zeros(0, dtype=np.int64)


class KvCaches(Protocol):
    fits_below: int

    def enqueued(self, state: BatchState, rid: int) -> None: ...

    def admit(self, state: BatchState, log: RequestLog, free: int) -> Sequence[tuple[int, ...]]: ...

    def preempt(self, state: BatchState) -> np.ndarray: ...

    def pin(self, rid: int, rank: int) -> None: ...


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

    def enqueued(self, state: BatchState, rid: int) -> None:
        pass

    def pin(self, rid: int, rank: int) -> None:
        pass

    def admit(self, state: BatchState, log: RequestLog, free: int) -> Sequence[tuple[int, ...]]:
        return admit_fifo(state.queue, log, free, state.footprint, self.capacity, self.block_size)

    def preempt(self, state: BatchState) -> np.ndarray:
        """The youngest rows past the cache, until Σ footprints fits it again."""
        if state.footprint <= self.capacity:
            return NONE
        return (~self.total_fits(state.footprints())).nonzero()[0]

    def total_fits(self, footprints: np.ndarray) -> np.ndarray:
        """Which rows fit the engine's cache, oldest first (the oldest always stays: it fits on its own)."""
        keep = np.cumsum(footprints) <= self.capacity
        keep[0] = True
        return keep


class RankCaches(OneCache):
    """One KV cache per attention rank, within the engine's total (see the module docstring)."""

    def __init__(self, capacity: int, block_size: int, dp: RankLimits) -> None:
        super().__init__(capacity, block_size)
        self.dp = dp
        self.fits_below = -1  # a rank may overflow while the total fits

    def admit(self, state: BatchState, log: RequestLog, free: int) -> Sequence[tuple[int, ...]]:
        """FIFO admission to the rank with a free slot and the most free KV."""
        slots, kv = self.rank_room(state)
        return admit_to_ranks(state.queue, log, slots, kv, self.block_size, free,
                              self.capacity - state.footprint)

    def rank_room(self, state: BatchState) -> tuple[np.ndarray, np.ndarray]:
        """Each rank's free request slots and free KV tokens."""
        ranks = state.batch.ints[RANK]
        slots = self.dp.requests - np.bincount(ranks, minlength=self.dp.ranks)
        kv = np.bincount(ranks, weights=state.footprints(), minlength=self.dp.ranks).astype(np.int64)
        return slots, self.dp.kv_tokens - kv

    def preempt(self, state: BatchState) -> np.ndarray:
        """The engine's total first (the youngest rows past it), then each rank's own cache: the youngest of
        the rows left past their rank's."""
        footprints = state.footprints()
        total = np.ones(footprints.size, dtype=bool)
        if state.footprint > self.capacity:
            total = self.total_fits(footprints)
        left = total.nonzero()[0]
        ranks = state.batch.ints[RANK][left]
        if ranks_within(footprints[left], ranks, self.dp.kv_tokens):
            return (~total).nonzero()[0]
        keep = rank_cumsum(footprints[left], ranks) <= self.dp.kv_tokens
        keep[rank_order(ranks) == 0] = True  # each rank's oldest request stays (it fits on its own)
        return np.concatenate([(~total).nonzero()[0], left[~keep]])


class RoutedRanks(RankCaches):
    """Each request in its rank's queue, the rank chosen by the engine's dispatch (see the module docstring)."""

    def __init__(self, capacity: int, block_size: int, dp: RankLimits) -> None:
        super().__init__(capacity, block_size, dp)
        self.router = RankRouter(dp.balance, dp.ranks)

    def enqueued(self, state: BatchState, rid: int) -> None:
        self.router.send(rid, state.batch.ints[RANK])

    def pin(self, rid: int, rank: int) -> None:
        self.router.pin(rid, rank)

    def admit(self, state: BatchState, log: RequestLog, free: int) -> Sequence[tuple[int, ...]]:
        """FIFO within each rank's queue, while the rank has a free slot and KV room and the engine's totals allow."""
        slots, kv = self.rank_room(state)
        admitted = admit_routed(state.queue, log, self.router, slots, kv, self.block_size, free,
                                self.capacity - state.footprint)
        self.router.admitted([rank for *_, rank in admitted])
        return admitted


def admit_routed(queue: deque[int], log: RequestLog, router: RankRouter, free_slots: np.ndarray,
                 kv_free: np.ndarray, block_size: int, total_free: int,
                 total_kv_free: int) -> list[tuple[int, int, int, int]]:
    """Admit queued requests, FIFO within each one's rank: a rank whose head does not fit admits nothing more
    this step; the scan stops when every rank is blocked, the engine's slots are taken or its KV is full.
    Returns (rid, generated, kv, rank) in admission order."""
    admitted: list[tuple[int, int, int, int]] = []
    slots, room = free_slots.tolist(), kv_free.tolist()   # Python ints: the scan reads them per queued request
    blocked, open_ranks = [False] * len(slots), len(slots)
    rank_of, rows = router.rank_of, Admission(log)
    scanned = 0
    for rid in queue:
        if len(admitted) >= total_free or not open_ranks:
            break
        scanned += 1
        rank = int(rank_of[rid])
        if blocked[rank]:
            continue
        generated, kv = rows.footprint(rid)
        need = kv + block_size
        if slots[rank] <= 0 or need > room[rank] or need > total_kv_free:
            blocked[rank], open_ranks = True, open_ranks - 1
            continue
        slots[rank] -= 1
        room[rank] -= need
        total_kv_free -= need
        admitted.append((rid, generated, kv, rank))
    if admitted:   # the scanned head less the admitted, back in order; the rest of the queue is not touched
        taken = {rid for rid, *_ in admitted}
        head = [queue.popleft() for _ in range(scanned)]
        queue.extendleft(reversed([rid for rid in head if rid not in taken]))
    return admitted
