"""dspark-async's capacity plan, written into a buffer kept between steps, against the plan rebuilt every step.

The policy writes the lagged survival rows straight into one sort buffer per batch shape, reused from step to
step, and compares request ids as bytes. Over episodes of hand-made steps (requests joining and leaving, rows
not drafting, a step capacity that cuts the ranking, a price that narrows drafting, both draft-width modes)
every Decision, every snapshot and every plan read must be exactly those of the plan rebuilt from scratch:
each request's row looked up by id into a fresh array, then `rank_candidates`, `global_best` and
`theta_choice`.
"""

from __future__ import annotations

import numpy as np
import pytest

from specplan.policies.admission import global_best, rank_candidates, theta_choice
from specplan.policies.base import SpsTable, StepView, ThetaChoice
from specplan.policies.dspark import DSparkAsync, DSparkAsyncParams, same_requests

GAMMA = 4
SAWTOOTH = 1000.0 / (8.0 + 4.0 * (np.arange(400) // 24) + 0.01 * np.arange(400))  # a cliff every 24 tokens


class Narrowing(SpsTable):
    """A steps/s table whose step gets faster when fewer positions are drafted (the policy narrows drafting)."""

    redrafts = True

    def redraft(self, widest, positions=None):
        return SpsTable(self.sps * (1.0 + 0.01 * (GAMMA - widest)))


class Rebuilt(DSparkAsync):
    """dspark-async with its capacity plan rebuilt every step: fresh rows, a fresh ranking."""

    def lagged_capacity(self, view, drafted, all_drafted):
        past = self.lagged(view.step_index)
        self.planned = None
        if past is None or past.request_ids.size == 0:
            return self.cold_length * int(np.count_nonzero(drafted)), None
        planned = rows_by_id(past, view.request_ids, drafted)
        ranked = rank_candidates(view, planned)
        k = global_best(ranked.theta)
        self.planned = planned
        return k, theta_choice(view, ranked, k)


def rows_by_id(past, request_ids, drafted):
    """The plan's rows by definition, one request at a time: its row two steps back, else that step's mean row;
    a zero row where it does not draft now."""
    mean = past.survivals.sum(axis=0) / past.survivals.shape[0]
    index = {int(i): row for i, row in zip(past.request_ids, past.survivals, strict=True)}
    rows = [index.get(int(i), mean) if d else np.zeros(GAMMA) for i, d in zip(request_ids, drafted, strict=True)]
    return np.array(rows, dtype=float).reshape(len(rows), GAMMA)


def episode(seed: int, steps: int, narrowing: bool, dtype: type = np.float64) -> list[StepView]:
    """Steps of one replica: ids ascending, some leave and some join each step, some rows skip drafting."""
    rng = np.random.default_rng(seed)
    running, next_id, views = list(range(6)), 6, []
    for step in range(steps):
        running = [i for i in running if rng.random() > 0.15] or [next_id - 1]
        joining = int(rng.integers(0, 3)) if len(running) < 14 else 0
        running, next_id = running + list(range(next_id, next_id + joining)), next_id + joining
        r = len(running)
        c = rng.uniform(0.3, 1.0, (r, GAMMA))
        c[rng.random((r, GAMMA)) < 0.05] = 0.0  # a zero confidence: no survival past it
        drafted = rng.random(r) > 0.2 if rng.random() < 0.3 else np.ones(r, dtype=bool)
        c[~drafted] = 0.0
        price = (Narrowing if narrowing else SpsTable)(SAWTOOTH)
        max_tokens = r + int(rng.integers(0, r * GAMMA + 8))  # a capacity that sometimes cuts the ranking
        views.append(StepView(c.astype(dtype), np.asarray(running, dtype=np.int64), price, max_tokens, int(rng.integers(0, 4)),
                              16, GAMMA, step, 0.01 * step, drafted, int(np.count_nonzero(drafted))))
    return views


@pytest.mark.parametrize("widths", ["capacity", "plan"])
@pytest.mark.parametrize("narrowing", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_kept_buffer_plans_exactly_as_the_rebuilt_plan(seed, narrowing, widths):
    params = DSparkAsyncParams(cold_length=2, draft_widths=widths)
    kept, rebuilt = DSparkAsync(params, GAMMA), Rebuilt(params, GAMMA)
    decisions, reference, plans = [], [], []
    for view in episode(seed, 120, narrowing):
        decisions.append(kept.decide(view))
        reference.append(rebuilt.decide(view))
        plans.append((kept.planned, rebuilt.planned))
        np.testing.assert_array_equal(kept.snapshots[-1].request_ids, rebuilt.snapshots[-1].request_ids)
        np.testing.assert_array_equal(kept.snapshots[-1].survivals, rebuilt.snapshots[-1].survivals)
    planned = [d for d in reference if isinstance(d.theta, ThetaChoice)]
    assert len(planned) > 100 and len({d.theta.verify_tokens - d.theta.expected_tokens for d in planned}) > 50
    for got, want in zip(decisions, reference, strict=True):  # compared after the run: no buffer reuse moved them
        assert got.theta == want.theta and got.draft_width == want.draft_width
        np.testing.assert_array_equal(np.asarray(got.lengths), np.asarray(want.lengths))
        assert type(got.lengths) is type(want.lengths)
    for got, want in plans:
        if widths == "plan":
            np.testing.assert_array_equal(got, want)
        else:
            assert got is None  # nothing reads the plan's rows in capacity mode: none kept


def test_single_precision_confidences_plan_as_rebuilt():
    params = DSparkAsyncParams(cold_length=2)
    kept, rebuilt = DSparkAsync(params, GAMMA), Rebuilt(params, GAMMA)
    for view in episode(4, 60, False, np.float32):
        got, want = kept.decide(view), rebuilt.decide(view)
        assert got.theta == want.theta
        np.testing.assert_array_equal(np.asarray(got.lengths), np.asarray(want.lengths))


def test_same_requests_by_value_whatever_the_dtype():
    ids = np.array([3, 7, 9], dtype=np.int64)
    assert same_requests(ids, ids)
    assert same_requests(ids, ids.copy())
    assert same_requests(ids, ids.astype(np.int32))
    assert not same_requests(ids, np.array([3, 7, 10]))
    assert not same_requests(ids, ids[:2])
