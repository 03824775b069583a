"""Data-parallel attention's ranks: which rank a request goes to, and arithmetic over the running batch's rows.

`RankRouter` is the engine's dispatch of requests to attention ranks, as
each engine does it when a request reaches it (`engine.dp_attention.balance`):

    round_robin      SGLang's default (--load-balance-method auto → round_robin,
                     python/sglang/srt/managers/data_parallel_controller.py): ranks in turn
    fewest_requests  SGLang's total_requests (shortest_queue): the rank with the fewest
                     running + waiting requests (the lowest index on ties)
    least_loaded     vLLM's DP client (vllm/v1/engine/core_client.py, DPLBAsyncMPClient):
                     the rank with the least 4 × waiting + running (the lowest index on ties;
                     vLLM reads the counts its coordinator publishes every 100 ms, here exact)

A request keeps its rank until it completes (a preempted one goes back to
its rank's queue). Each row of the running batch carries the attention rank
that holds its KV (`batch.RANK`); the functions below read a per-row value
within each rank, in row order, without a loop over ranks: the KV rule's
per-rank preemption (specplan.simulator.engine.caches) and the per-rank
token caps (specplan.simulator.engine.budget) both use them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RankRouter:
    """Sends each request to a rank when it reaches the engine and counts each rank's waiting requests."""

    def __init__(self, balance: str, ranks: int) -> None:
        if balance not in ("round_robin", "fewest_requests", "least_loaded"):
            raise ValueError(f"unknown rank balance {balance!r}")
        self.balance, self.ranks = balance, ranks
        self.rank_of = np.full(1024, -1, dtype=np.int32)  # per request id: its rank (-1: not sent yet)
        self.waiting = np.zeros(ranks, dtype=np.int64)
        self.turn = 0

    def send(self, rid: int, running: np.ndarray) -> int:
        """The rank of request `rid` (chosen on its first arrival, unless pinned; `running`: the ranks of the
        running rows)."""
        self.grow(rid)
        rank = int(self.rank_of[rid])
        if rank < 0:
            rank = self.rank_of[rid] = self.choose(running)
        self.waiting[rank] += 1
        return rank

    def pin(self, rid: int, rank: int) -> None:
        """A sticky router chose the rank (session routing): the engine's own rule is not asked."""
        self.grow(rid)
        self.rank_of[rid] = rank

    def grow(self, rid: int) -> None:
        if rid >= self.rank_of.size:
            self.rank_of = np.concatenate([self.rank_of, np.full(max(rid + 1, self.rank_of.size), -1, np.int32)])

    def choose(self, running: np.ndarray) -> int:
        if self.balance == "round_robin":
            rank, self.turn = self.turn, (self.turn + 1) % self.ranks
            return rank
        busy = np.bincount(running, minlength=self.ranks)
        weight = 4 if self.balance == "least_loaded" else 1
        return int(np.argmin(weight * self.waiting + busy))

    def admitted(self, ranks: Sequence[int]) -> None:
        for rank in ranks:
            self.waiting[rank] -= 1


def ranks_within(values: np.ndarray, ranks: np.ndarray, room: np.ndarray | int) -> bool:
    """Whether each rank's total of non-negative integer `values` is at most its `room` (one for every rank, or
    one per rank): then every running sum within a rank is too, and a rule that cuts at the room cuts nothing (the
    rules below ask this first, one bincount where `rank_cumsum` sorts)."""
    if values.size == 0:
        return True
    if isinstance(room, int):
        return bool(np.bincount(ranks, weights=values).max() <= room)
    return bool((np.bincount(ranks, weights=values, minlength=room.size) <= room).all())


def rank_cumsum(values: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Running sum of `values` within each rank, in row order (inclusive)."""
    order = np.argsort(ranks, kind="stable")
    total = np.cumsum(values[order])
    sorted_ranks = ranks[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = sorted_ranks[1:] != sorted_ranks[:-1]
    start = np.maximum.accumulate(np.where(first, total - values[order], 0))
    out = np.empty_like(total)
    out[order] = total - start
    return out


def rank_order(ranks: np.ndarray) -> np.ndarray:
    """Each row's position among its rank's rows (0 for the oldest)."""
    return rank_cumsum(np.ones(ranks.size, dtype=np.int64), ranks) - 1
