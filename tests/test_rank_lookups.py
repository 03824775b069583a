"""The per-rank price's lookups at once equal their one-at-a-time forms, bit for bit (issue 46: a step under DP
attention reads every rank's own part in one lookup, and the rank rules skip their sort where no rank reaches its
room; the results hash checks whole runs, these check the pieces on hand-made and shipped profiles)."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.dense import DenseCurve
from specplan.simulator.engine.cluster.ranks import rank_cumsum, ranks_within
from specplan.simulator.engine.price.rank_split import RankSplit
from tests.test_hwprofiles_prefill import two_row_profile

V4_DP4 = "builtin:b200-deepseek-v4-flash-dp4ep4-sglang"


@pytest.mark.parametrize("phase", ["prefill", None])
def test_around_each_is_around_at_every_context(phase: str | None) -> None:
    """Below, on, between, on the last row and past it (a prefill profile continues its slope there)."""
    curve = DenseCurve(two_row_profile(phase), 1000)
    contexts = np.array([-5.0, 0.0, 1.0, 2.5e5, 1e6, 3e6])
    low, high, weight = curve.around_each(contexts)
    for i, context in enumerate(contexts.tolist()):
        row_low, row_high, w = curve.around(context)
        assert np.array_equal(curve.rows[low[i]], row_low) and np.array_equal(curve.rows[high[i]], row_high)
        assert weight[i] == w
    assert weight[-1] == (3.0 if phase == "prefill" else 0.0)   # 3e6 over the 1e6 row: its slope continued
    assert curve.around_each(np.zeros(0))[0].size == 0


def test_own_at_each_is_own_at_row_by_row_on_a_shipped_dp4_profile() -> None:
    split = RankSplit(load_profile(V4_DP4), 4096)
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, 5000, size=(4, 9))
    contexts = np.array([0.0, 3.3e4, 2.1e5, 9.9e6])
    together = split.own_at_each(tokens, contexts)
    for r in range(4):
        assert np.array_equal(together[r], split.own_at(tokens[r], float(contexts[r])))


def test_ranks_within_answers_whether_rank_cumsum_stays_within_the_room() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        ranks = rng.integers(0, 4, size=int(rng.integers(0, 12)))
        values = rng.integers(0, 50, size=ranks.size)
        room = int(rng.integers(0, 150))
        assert ranks_within(values, ranks, room) == bool(np.all(rank_cumsum(values, ranks) <= room))
        per_rank = rng.integers(0, 150, size=4)
        assert ranks_within(values, ranks, per_rank) == bool(np.all(rank_cumsum(values, ranks) <= per_rank[ranks]))
