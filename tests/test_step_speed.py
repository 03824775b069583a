"""The step's fast paths draw and count what the plain ones would (issue 46, item 3: a faster step, the same answers).

Outcome draws come a block at a time (`Drawn`), the speculative counters hold
the steps' arrays until they bin them, and the ledger sums with a row of ones:
each must give the numbers a call per step gives, in the same order.
"""

from __future__ import annotations

import numpy as np
import pytest

from specplan.simulator.engine.batch import ones
from specplan.simulator.engine.records.step_log import SpeculationCounters
from specplan.simulator.engine.speculator import Drawn


@pytest.mark.parametrize("block", [5, 64, 1 << 14])
def test_drawn_blocks_hand_out_the_per_step_draws_in_order(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Drawn, "BLOCK", block)
    shapes = [(3, 2), (7, 3), (1, 1), (64, 3), (2, 3), (0, 3), (40, 2), (9, 3)]
    plain = np.random.default_rng(7)
    drawn = Drawn(np.random.default_rng(7).random)
    for rows, length in shapes * 3:  # past several block edges, a step wider than a block included
        expected = plain.random((rows, length))
        got = drawn.take(rows, length)
        assert got.shape == (rows, length)
        np.testing.assert_array_equal(got, expected)


def test_speculative_counters_bin_every_step_across_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SpeculationCounters, "BUFFERED", 10)
    rng = np.random.default_rng(3)
    steps = [rng.integers(0, 4, size) for size in (4, 7, 1, 12, 3, 9, 0, 5)]
    counters = SpeculationCounters(3)
    for accepted in steps:
        counters.add(accepted, accepted.size, 3 * accepted.size)
    every = np.concatenate(steps)
    assert counters.accepted_tokens == int(every.sum())
    np.testing.assert_array_equal(counters.accepted_per_position, [(every >= k).sum() for k in (1, 2, 3)])
    assert counters.drafts == every.size and counters.draft_tokens == 3 * every.size


def test_ones_are_shared_and_read_only() -> None:
    row = ones(6)
    assert row is ones(6) and row.dtype == np.int64 and row.tolist() == [1] * 6
    with pytest.raises(ValueError):
        row[0] = 2
    accepted = np.array([0, 3, 2, 1, 3, 0])
    assert int(accepted.dot(ones(accepted.size))) == int(accepted.sum())
