"""Data-parallel attention's arithmetic over the running batch's rows (rows in arrival order).

Each row carries the attention rank that holds its KV (`batch.RANK`); these
functions read a per-row value within each rank, in row order, without a
loop over ranks: the KV rule's per-rank preemption
(specplan.simulator.engine.caches) and the per-rank token caps
(specplan.simulator.engine.budget) both use them.
"""

from __future__ import annotations

import numpy as np


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
