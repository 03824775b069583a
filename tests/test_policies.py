"""Verification policies on hand-built step views: each test is a small story checkable by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplan.policies.admission import early_stop, global_best, rank_candidates, top_k_lengths
from specplan.policies.base import (
    Decision,
    OracleView,
    SpsTable,
    StepOutcome,
    StepView,
    ThetaChoice,
    water_fill,
)
from specplan.policies.registry import POLICIES, make_policy
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.scenario import PolicySpec
from specplan.simulator.scenario.policy import check_verify_lengths, policy_params


def view(confidences, steps_per_s, *, ids=None, reserved=0, step=0, drafted=None, accepted=None, max_tokens=None):
    c = np.asarray(confidences, dtype=float)
    r, gamma = c.shape
    sps = np.asarray(steps_per_s, dtype=float)
    fields = dict(
        confidences=c, request_ids=np.arange(r) if ids is None else np.asarray(ids),
        price=SpsTable(sps), max_step_tokens=sps.size - 1 if max_tokens is None else max_tokens,
        reserved_tokens=reserved, max_batch_requests=max(r, 1), block_size=gamma, step_index=step,
        now_s=0.0, drafted=np.ones(r, dtype=bool) if drafted is None else np.asarray(drafted),
    )
    fields["drafting"] = int(np.count_nonzero(fields["drafted"]))
    if accepted is not None:
        return OracleView(**fields, accepted_prefix=np.asarray(accepted))
    return StepView(**fields)


def policy(name, block_size, **params):
    """The policy as a scenario builds it: params checked, verification lengths within the block."""
    values = policy_params(PolicySpec(name, params))
    check_verify_lengths(values, block_size, "policy.params")
    return make_policy(name, values, block_size)


def decided(p, v):
    """ℓ per request of the policy's Decision for the view (whichever form it returned)."""
    decision = p.decide(v)
    assert isinstance(decision, Decision)
    return decision.per_request(v.batch_requests)


# ---- DSpark Appendix A, by hand --------------------------------------------------------------
APPENDIX_SPS = [1.0, 1.0, 0.5, 0.45]  # SPS(B) for B = 0..3 (B = 0 unused)


def test_appendix_a_throughput_curve_by_hand():
    ranked = rank_candidates(view([[0.8, 0.9]], APPENDIX_SPS))
    # Θ_0 = 1·1.0; Θ_1 = (1 + 0.8)·0.5 = 0.9; Θ_2 = (1 + 0.8 + 0.72)·0.45 = 1.134
    assert ranked.theta == pytest.approx([1.0, 0.9, 1.134])
    assert early_stop(ranked.theta) == 0
    assert global_best(ranked.theta) == 2


@pytest.mark.parametrize(("c2", "greedy", "global_"), [(0.9, 0, 2), (0.0, 0, 0)])
def test_appendix_a_choices(c2, greedy, global_):
    v = view([[0.8, c2]], APPENDIX_SPS)
    assert decided(policy("dspark-greedy", 2), v).tolist() == [greedy]
    assert decided(policy("dspark-global", 2), v).tolist() == [global_]


def test_async_capacity_comes_from_two_steps_earlier():
    p = policy("dspark-async", 2, cold_length=2)
    rows = [[0.8, 0.9], [0.8, 0.0], [0.8, 0.9], [0.8, 0.0], [0.8, 0.0]]
    got = [int(decided(p, view([c], APPENDIX_SPS, step=i))[0]) for i, c in enumerate(rows)]
    # steps 0, 1: no history, cold_length 2 (a_2 = 0 at step 1 adds nothing: ℓ = 1); step 2: K = 2
    # planned from step 0's row; step 3: K = 0 from step 1's row; step 4: K = 2 from step 2, but a_2 = 0 now.
    assert got == [2, 1, 2, 0, 1]


class DraftedTable(SpsTable):
    """A steps/s table whose step gets 5% faster when fewer positions are drafted (a priced drafter)."""

    redrafts = True

    def redraft(self, widest, positions=None):
        return SpsTable(self.sps * 1.05)


def test_async_drafts_only_the_positions_its_capacity_can_verify():
    """K = 1 < γ = 2 (cold start): one position is drafted; the plan two steps on continues it geometrically."""
    p = policy("dspark-async", 2)

    def step(i):
        v = view([[0.8, 0.9]], APPENDIX_SPS, step=i)
        v.price = DraftedTable(v.price.sps)
        decision = p.decide(v)
        return decision.per_request(1).tolist(), decision.draft_width

    assert step(0) == ([1], (1, 1))
    np.testing.assert_allclose(p.snapshots[-1].survivals, [[0.8, 0.64]])  # a_2 = a_1 · 0.8, not the unseen 0.72
    step(1)
    assert step(2) == ([2], None)  # planned from [0.8, 0.64]: Θ_2 = 2.44 · 0.45 > 1.0, K = 2: the whole block
    plain = policy("dspark-async", 2)  # drafting that costs the same however much is drafted: the whole block
    decision = plain.decide(view([[0.8, 0.9]], APPENDIX_SPS, step=0))
    assert decision.per_request(1).tolist() == [1] and decision.draft_width is None


def test_async_with_plan_widths_drafts_each_request_its_planned_share_plus_one():
    p = policy("dspark-async", 4, draft_widths="plan")
    rows = [[0.95] * 4, [0.2] * 4]  # a confident request and a hopeless one
    sps = 1000.0 / (8.0 + 0.5 * np.arange(12))
    for i in range(3):
        v = view(rows, sps, step=i)
        v.price = DraftedTable(v.price.sps)
        decision = p.decide(v)
    lengths = decision.per_request(2)
    assert decision.draft_width is not None
    widest, total = decision.draft_width
    # the plan gives the hopeless request nothing: it drafts 1 position, the confident one more
    assert total < 8 and widest > 1 and lengths[1] <= 1 and lengths[0] <= widest


# ---- a sawtooth step-time table -------------------------------------------------------------
CLIFF_SPS = 1000.0 / np.where(np.arange(21) <= 8, 8.0, 12.0)  # 8 ms up to 8 tokens, 12 ms beyond


def cliff_view(step=0):
    return view(np.full((4, 4), 0.95), CLIFF_SPS, step=step)


def test_greedy_stops_at_the_first_cliff_global_crosses_it():
    # 4 requests: anchors take B = 4; one draft each reaches B = 8, the next candidate hits 12 ms.
    assert decided(policy("dspark-greedy", 4), cliff_view()).tolist() == [1, 1, 1, 1]
    assert decided(policy("dspark-global", 4), cliff_view()).tolist() == [4, 4, 4, 4]


def test_async_crosses_the_cliff_once_it_has_history():
    p = policy("dspark-async", 4)
    got = [decided(p, cliff_view(step)).tolist() for step in range(3)]
    assert got == [[1, 1, 1, 1], [1, 1, 1, 1], [4, 4, 4, 4]]


def test_async_plans_newcomers_with_the_mean_survival_row():
    p = policy("dspark-async", 4)
    for step in range(2):
        decided(p, view(np.full((2, 4), 0.95), CLIFF_SPS, ids=[10, 11], step=step))
    # Two newcomers (ids 12, 13) join: planned like the old rows, so the search still crosses the cliff.
    lengths = decided(p, view(np.full((4, 4), 0.95), CLIFF_SPS, ids=[10, 11, 12, 13], step=2))
    assert lengths.tolist() == [4, 4, 4, 4]


# ---- closed form on a linear profile --------------------------------------------------------
def uniform_optimum(p, r, gamma, base_ms, per_ms):
    """argmax_ℓ r·E[τ(ℓ)] / T(r(1+ℓ)), E[τ(ℓ)] = 1 + p(1 − p^ℓ)/(1 − p): the closed form."""
    lengths = np.arange(gamma + 1)
    tau = 1 + p * (1 - p**lengths) / (1 - p)
    theta = r * tau / (base_ms + per_ms * r * (1 + lengths))
    best = int(np.argmax(theta))
    runner_up = np.sort(theta)[-2] if gamma else -np.inf
    return best, theta[best] - runner_up


@pytest.mark.parametrize(("p", "r", "gamma", "base_ms", "per_ms"), [
    (0.8, 8, 6, 10.0, 0.05), (0.8, 64, 6, 10.0, 0.05), (0.6, 32, 7, 8.0, 0.2),
    (0.9, 128, 5, 5.0, 0.05), (0.5, 4, 4, 10.0, 1.0), (0.95, 16, 7, 20.0, 0.01),
])
def test_global_choice_equals_the_closed_form_optimum(p, r, gamma, base_ms, per_ms):
    best, margin = uniform_optimum(p, r, gamma, base_ms, per_ms)
    assert margin > 1e-9
    sps = 1000.0 / (base_ms + per_ms * np.maximum(np.arange(r * (gamma + 1) + 1), 1))
    v = view(np.full((r, gamma), p), sps)
    assert decided(policy("dspark-global", gamma), v).tolist() == [best] * r
    # Θ is unimodal on a linear profile, so early stop finds the same optimum.
    assert decided(policy("dspark-greedy", gamma), v).tolist() == [best] * r


# ---- admission core -------------------------------------------------------------------------
def test_ties_at_the_cut_are_shared_level_by_level():
    a = np.array([[0.9, 0.5, 0.5], [0.9, 0.5, 0.1]])
    assert top_k_lengths(a, 3).tolist() == [2, 1]  # one tied 0.5 to give: the first row
    assert top_k_lengths(a, 4).tolist() == [2, 2]  # two: one per row before a second to anyone
    assert top_k_lengths(a, 5).tolist() == [3, 2]
    equal = np.ones((3, 4))  # every candidate tied
    assert top_k_lengths(equal, 7).tolist() == [3, 2, 2]


def test_whole_blocks_when_every_candidate_fits_are_one_length_for_every_row():
    a = np.array([[0.9, 0.5, 0.5], [0.9, 0.5, 0.1]])
    assert top_k_lengths(a, 6) == 3 and top_k_lengths(a * 0.5, 9) == 3  # one int, no array per step
    assert top_k_lengths(np.array([[0.9, 0.0], [0.5, 0.4]]), 4).tolist() == [1, 2]  # zero survival: not whole
    assert top_k_lengths(np.zeros((0, 3)), 5).tolist() == []


def test_a_decision_carries_its_lengths_and_its_theta_choice():
    greedy = policy("dspark-greedy", 4).decide(cliff_view())
    assert greedy.lengths.tolist() == [1, 1, 1, 1]
    assert greedy.theta == ThetaChoice(8, pytest.approx(4 + 4 * 0.95), pytest.approx((4 + 4 * 0.95) * 125.0))
    assert policy("static", 4, length=2).decide(cliff_view()) == Decision.uniform(2)  # fixed: no Θ choice
    assert Decision.uniform(3).per_request(2).tolist() == [3, 3]
    p = policy("dspark-async", 4)
    assert [p.decide(cliff_view(step)).theta is None for step in range(3)] == [True, True, False]
    assert p.decide(cliff_view(3)).lengths == 4  # every candidate fits: uniform, the whole block


def test_zero_survival_candidates_are_never_admitted():
    flat = np.full(11, 1000.0)  # a flat profile: every admission improves Θ unless it adds nothing
    v = view([[0.9, 0.0, 0.9], [1.0, 1.0, 1.0]], flat)
    assert decided(policy("dspark-greedy", 3), v).tolist() == [1, 3]
    assert decided(policy("dspark-global", 3), v).tolist() == [1, 3]


def test_water_fill_takes_from_the_longest_first():
    assert water_fill(np.array([5, 1, 3]), 6).tolist() == [3, 1, 2]
    assert water_fill(np.array([2, 2, 2]), 4).tolist() == [2, 1, 1]
    assert water_fill(np.array([3, 3]), 0).tolist() == [0, 0]


# ---- baselines ------------------------------------------------------------------------------
def test_threshold_on_confidence_and_on_survival():
    v = view([[0.9, 0.4, 0.9], [0.6, 0.6, 0.6]], np.full(13, 100.0))
    assert decided(policy("threshold", 3, threshold=0.5), v).tolist() == [1, 3]
    # survivals: [0.9, 0.36, 0.324] and [0.6, 0.36, 0.216]
    assert decided(policy("threshold", 3, threshold=0.33, on="survival"), v).tolist() == [2, 2]


def test_length_schedule_follows_the_tensorrt_llm_convention():
    p = policy("length-schedule", 3, schedule={4: 3, 8: 2, 32: 1})
    assert [p.planned_length(r) for r in (1, 4, 5, 8, 9, 32, 33)] == [3, 3, 2, 2, 1, 1, 0]
    v = view(np.full((6, 3), 0.9), np.full(25, 100.0))
    assert decided(p, v).tolist() == [2] * 6


def test_goodput_picks_one_length_and_learns_from_outcomes():
    p = policy("goodput", 4, prior_acceptance=0.9)
    sps = 1000.0 / (10.0 + 0.5 * np.maximum(np.arange(21), 1))
    v = view(np.full((4, 4), 0.5), sps, ids=[1, 2, 3, 4])
    first = decided(p, v)
    assert len(set(first.tolist())) == 1 and first[0] > 1
    for _ in range(20):  # every verified draft is rejected
        p.observe(StepOutcome(np.array([1, 2, 3, 4]), first, np.zeros(4, dtype=np.int64), 0.0))
    assert decided(p, v).tolist() == [0, 0, 0, 0]


def test_oracle_verifies_the_accepted_prefix_trimmed_at_a_cliff():
    o = policy("oracle", 4)
    flat = np.full(21, 100.0)
    assert decided(o, view(np.full((3, 4), 0.5), flat, accepted=[4, 0, 2])).tolist() == [4, 0, 2]
    cliff = 1000.0 / np.where(np.arange(21) <= 5, 8.0, 20.0)  # 6+ tokens cost 2.5x: not worth it
    assert decided(o, view(np.full((3, 4), 0.5), cliff, accepted=[4, 0, 2])).tolist() == [1, 0, 1]


# ---- every policy respects the block; budget-fitting ones the engine's capacity ----------------
PARAMS = {"threshold": {"threshold": 0.4}, "dspark-greedy": {"bypass": {"min_trials": 2, "skip_steps": 2}}}


def params_for(name, gamma):
    """A policy's parameters for a block of γ drafts (a length schedule's lengths within it)."""
    if name == "length-schedule":
        return {"schedule": {4: gamma, 16: 1}}
    return PARAMS.get(name, {})


@st.composite
def step(draw, gamma):
    r = draw(st.integers(1, 12))
    conf = draw(st.lists(st.floats(0.0, 1.0), min_size=r * gamma, max_size=r * gamma))
    reserved = draw(st.integers(0, 20))
    max_tokens = draw(st.integers(r + reserved, r * (gamma + 1) + reserved + 25))  # the engine defers anchors beyond
    step_ms = draw(st.lists(st.floats(1.0, 50.0), min_size=max_tokens + 1, max_size=max_tokens + 1))
    drafted = np.array(draw(st.lists(st.booleans(), min_size=r, max_size=r)))
    accepted = np.array(draw(st.lists(st.integers(0, gamma), min_size=r, max_size=r)))
    ids = np.array(draw(st.lists(st.integers(0, 30), min_size=r, max_size=r, unique=True)))
    return np.reshape(conf, (r, gamma)), reserved, 1000.0 / np.array(step_ms), drafted, accepted, ids


@st.composite
def episodes(draw):
    gamma = draw(st.integers(1, 6))
    return gamma, draw(st.lists(step(gamma), min_size=1, max_size=5))


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=30, deadline=None)
@given(episode=episodes())
def test_lengths_stay_within_the_block_and_the_step_capacity(name, episode):
    gamma, steps = episode
    p = policy(name, gamma, **params_for(name, gamma))
    for i, (conf, reserved, sps, drafted, accepted, ids) in enumerate(steps):
        accepted = np.where(drafted, accepted, 0)
        v = view(np.where(drafted[:, None], conf, 0.0), sps, ids=ids, reserved=reserved, step=i,
                 drafted=drafted, accepted=accepted if p.oracle else None)
        lengths = decided(p, v)
        assert lengths.shape == (conf.shape[0],) and lengths.dtype.kind == "i"
        assert lengths.min() >= 0 and lengths.max() <= gamma
        if p.fits_budget:
            assert lengths.sum() <= v.verify_capacity
        planned = p.planned_length(conf.shape[0])
        if planned is not None:  # fixed-length: exactly the planned length, never shortened
            assert lengths.tolist() == [planned] * conf.shape[0]
        if p.oracle:
            assert np.all(lengths <= accepted)
        p.observe(StepOutcome(ids, lengths, np.minimum(lengths, accepted), float(i)))


# ---- who may see the truth -------------------------------------------------------------------
def test_only_the_oracle_view_carries_the_truth():
    plain = {f.name for f in dataclasses.fields(StepView)}
    truth = {f.name for f in dataclasses.fields(OracleView)} - plain
    assert truth == {"accepted_prefix"}
    assert not any("accept" in name or name in {"p", "probabilities"} for name in plain)
    with pytest.raises(TypeError, match="OracleView"):
        decided(policy("oracle", 2), view([[0.5, 0.5]], APPENDIX_SPS))


def test_only_the_oracle_is_labelled_oracle_and_global_lossy():
    assert [n for n, cls in POLICIES.items() if cls.oracle] == ["oracle"]
    assert "oracle" in POLICIES["oracle"].label()
    assert "lossy" in POLICIES["dspark-global"].label()

def test_who_pays_the_scheduling_overhead():
    """Fixed lengths need no per-step decision; synchronous decisions pay; async hides it."""
    setting = {n: cls.length_setting for n, cls in POLICIES.items()}
    assert setting == {"none": "fixed", "mtp-1": "fixed", "static": "fixed", "length-schedule": "fixed",
                       "threshold": "per_step", "goodput": "per_step", "dspark-greedy": "per_step",
                       "dspark-global": "per_step", "dspark-async": "hidden", "oracle": "hidden"}
    assert {n: cls.scheduling_overhead() for n, cls in POLICIES.items()} == {
        n: {"fixed": "none", "per_step": "per-step"}.get(s, s) for n, s in setting.items()}
    assert [n for n, cls in POLICIES.items() if cls.pays_scheduling()] == [
        "threshold", "dspark-greedy", "dspark-global", "goodput"]


# ---- the drafting bypass --------------------------------------------------------------------
def test_bypass_skips_a_hard_request_then_probes_it_again():
    p = policy("dspark-greedy", 3, bypass={"acceptance_below": 0.4, "min_trials": 4, "skip_steps": 3,
                                           "scope": "request"})
    ids = np.array([7, 8])
    masks = []
    for _ in range(8):
        mask = p.drafting_mask(ids)
        masks.append(mask.tolist())
        # request 7 gets its first draft rejected every step; request 8 accepts all three;
        # a request that does not draft verifies nothing (the replica forces ℓ = 0)
        lengths = np.where(mask, 3, 0)
        p.observe(StepOutcome(ids, lengths, np.where(mask, [0, 3], 0), 0.0))
    # 7 reaches 4 trials after 4 steps, skips 3 steps, then drafts again with a clean slate
    assert [m[0] for m in masks] == [True] * 4 + [False] * 3 + [True]
    assert all(m[1] for m in masks)


def test_batch_scope_skips_only_when_every_request_is_hard():
    p = policy("dspark-async", 3, bypass={"min_trials": 2, "skip_steps": 5, "scope": "batch"})
    both, hard = np.array([7, 8]), np.array([7])
    for _ in range(2):  # request 7 rejects its first draft twice: judged hard
        p.drafting_mask(both)
        p.observe(StepOutcome(both, np.array([3, 3]), np.array([0, 3]), 0.0))
    assert p.drafting_mask(both).tolist() == [True, True]  # 8 drafts anyway: 7 rides along
    assert p.drafting_mask(hard).tolist() == [False]  # alone, 7 skips and the step saves drafting


# ---- parameters -----------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "params", "message"), [
    ("threshold", {"threshhold": 0.5}, "did you mean 'threshold'"),
    ("threshold", {"threshold": 1.5}, "must be <= 1"),
    ("threshold", {"on": "logits"}, "must be one of confidence, survival"),
    ("dspark-greedy", {"bypass": {"skip_step": 3}}, "did you mean 'skip_steps'"),
    ("dspark-async", {"cold_length": -1}, "must be >= 0"),
    ("length-schedule", {}, "schedule: required key is missing"),
    ("length-schedule", {"schedule": {"many": 2}}, "whole number"),
    ("goodput", {"prior_acceptance": 1.0}, "must be < 1"),
])
def test_bad_params_name_the_key(name, params, message):
    with pytest.raises(ScenarioError, match=message):
        policy_params(PolicySpec(name, params))


def test_unknown_policy_lists_the_closest_name():
    with pytest.raises(ScenarioError, match="did you mean 'dspark-async'"):
        policy_params(PolicySpec("dspark-asinc", {}))
