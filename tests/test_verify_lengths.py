"""A verification length is what was configured, or a counter says why not (issue 32, items 1 and 11).

The stories: a static length or a schedule entry beyond the drafter's block
is refused at load, in one line with exit status 2, and leaves no results
folder (it used to run at γ while scenario.resolved.yaml kept the length
asked for). The property, for every registered policy over small random
engines (token budgets that defer or truncate, data-parallel attention
ranks): a request-step never verifies more than its block, and a policy
that fixes its lengths before drafting verifies exactly 1 + ℓ per decoding
request-step, less exactly the drafts summary.json counts as
`draft_tokens_truncated`.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from specplan.policies.registry import POLICIES, make_policy
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario.policy import policy_params
from tests.conftest import REPO, make_scenario

GAMMA = 3


@pytest.mark.parametrize(("policy", "where"), [
    ({"name": "static", "params": {"length": 12}}, "policy.params.length"),
    ({"name": "length-schedule", "params": {"schedule": {4: 2, 16: 5}}}, "policy.params.schedule.16"),
    ({"name": "dspark-async", "params": {"cold_length": 4}}, "policy.params.cold_length"),
])
def test_a_length_beyond_the_block_is_refused_at_load(policy, where):
    with pytest.raises(ScenarioError, match=rf"{where}: must lie in 0..{GAMMA} .* got"):
        make_scenario(policy=policy)


def test_the_command_refuses_it_in_one_line_and_writes_nothing(cli, tmp_path):
    out = tmp_path / "run"
    status, _, err = cli("run", REPO / "scenarios/default.yaml", "--set",
                         "policy={name: static, params: {length: 12}}", "--out", out)
    assert status == 2 and err.count("\n") == 1
    assert "policy.params.length: must lie in 0..7" in err and "got 12" in err
    assert not out.exists()


def test_the_length_that_runs_is_the_length_recorded():
    scenario = make_scenario(policy={"name": "static", "params": {"length": 2}})
    policy = make_policy("static", policy_params(scenario.policy), scenario.drafter.block_size)
    assert scenario.policy.params["length"] == policy.planned_length(1) == 2


def policy_block(name: str) -> dict:
    params = {"static": {"length": 2}, "length-schedule": {"schedule": {2: 3, 4: 1}},
              "threshold": {"threshold": 0.5}, "dspark-greedy": {"bypass": {"min_trials": 2}}}
    return {"name": name, "params": params.get(name, {})}


@st.composite
def engines(draw):
    return {"max_batch_requests": draw(st.integers(2, 8)), "kv_capacity_tokens": 100_000,
            "max_step_tokens": draw(st.sampled_from([9, 13, 64])),
            "budget": draw(st.sampled_from(["defer", "truncate"])),
            "dp_attention": draw(st.sampled_from([None, {"ranks": 2}]))}


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine=engines(), seed=st.integers(0, 1000))
@example(engine={"max_batch_requests": 8, "kv_capacity_tokens": 100_000, "max_step_tokens": 13,
                 "budget": "truncate", "dp_attention": None}, seed=1)  # a 5th request keeps its anchor only
def test_verified_lengths_differ_from_the_configured_ones_only_by_a_counted_cut(name, engine, seed):
    scenario = make_scenario(seed=seed, horizon={"duration_s": 4.0, "warmup_s": 0.5}, engine=engine,
                             policy=policy_block(name),
                             workload={"arrivals": {"kind": "poisson", "rate_per_s": 30.0}})
    result = simulate(scenario)
    steps = result.steps[result.steps["end_s"] > scenario.horizon.warmup_s]
    decoding = steps["decode_requests"].to_numpy()
    verified = (steps["verify_tokens"] - steps["prefill_tokens"]).to_numpy()
    assert np.all(verified <= decoding * (1 + GAMMA))  # never beyond the block
    policy = make_policy(name, policy_params(scenario.policy), GAMMA)
    if policy.length_setting != "fixed":
        return
    asked = (steps["decode_requests"] + steps["deferred_requests"]).to_numpy()  # R the plan was made for
    configured = decoding * (1 + np.array([policy.planned_length(int(r)) for r in asked], dtype=np.int64))
    assert int(configured.sum() - verified.sum()) == result.summary["draft_tokens_truncated"]
    if result.summary["draft_tokens_truncated"] == 0:
        assert np.array_equal(verified, configured)
