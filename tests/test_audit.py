"""The token-level losslessness audit: the DSpark Appendix A counterexample and a batched Markov case."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specplan.policies.registry import POLICIES
from specplan.validation.audit import CASES, audit_policy, sample_rows

PARAMS = {"length-schedule": {"schedule": {"2": 2, "8": 1}}}


# P(first token = A) in Appendix A, by hand. Global: x1 = A (1/2) gets ℓ = 2 and is always
# accepted; x1 = B (1/2) gets ℓ = 0 and the bonus is A with 0.7: 0.5 + 0.5 · 0.7 = 0.85.
# Oracle: it never verifies a rejected B (0.4 of them), whose bonus is A with 0.7:
# 0.5 + 0.5 · 0.4 · 0.7 = 0.64. Every lossless policy keeps the target's 0.7.
EXPECTED_A = {"dspark-global": 0.85, "oracle": 0.64}


@pytest.mark.slow("a statistical check: long or many simulations")
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_appendix_a_output_distribution_of_every_policy(name):
    result = audit_policy(name, PARAMS.get(name), case="appendix-a", trials=2500)
    assert result.target == pytest.approx([0.7, 0.3])
    assert result.observed[0] == pytest.approx(EXPECTED_A.get(name, 0.7), abs=0.03)
    assert result.lossless == POLICIES[name].lossless


@pytest.mark.parametrize("name", ["dspark-global", "dspark-async", "oracle", "threshold"])
def test_markov_case_verdicts(name):
    result = audit_policy(name, case="markov", trials=2000)
    assert len(result.categories) == 16
    assert result.lossless == POLICIES[name].lossless


def test_the_target_joint_sums_to_one():
    for make in CASES.values():
        assert make().target_joint().sum() == pytest.approx(1.0)


def test_inverse_cdf_sampling_matches_its_distribution():
    probs = np.tile([0.2, 0.5, 0.3], (30000, 1))
    draws = sample_rows(probs, np.random.default_rng(1).random(30000))
    assert np.bincount(draws, minlength=3) / 30000 == pytest.approx([0.2, 0.5, 0.3], abs=0.01)


def test_cli_json(cli):
    status, out, _ = cli("audit", "dspark-global", "--trials", "1500", "--json")
    assert status == 0
    result = json.loads(out)
    assert {"policy", "target", "observed", "p_value", "lossless"} <= set(result)
    assert result["policy"] == "dspark-global" and result["lossless"] is False
    assert result["target"] == pytest.approx([0.7, 0.3])


def test_cli_text_and_params(cli):
    status, out, _ = cli("audit", "threshold", "--param", "threshold=0.85", "--trials", "500")
    assert status == 0
    assert "lossless" in out and "appendix-a" in out


@pytest.mark.parametrize(("args", "message"), [
    (("dspark-gloabl",), "did you mean 'dspark-global'"),
    (("threshold", "--param", "threshold=2"), "policy.params.threshold: must be <= 1"),
    (("length-schedule",), "policy.params.schedule: required key is missing"),
    (("static", "--param", "length"), "expected KEY=VALUE"),
    (("static", "--trials", "0"), "--trials must be at least 1"),
    (("static", "--case", "nope"), "invalid choice"),
])
def test_cli_bad_input_is_one_line(cli, args, message):
    status, _, err = cli("audit", *args)
    assert status == 2
    assert message in err and len(err.strip().splitlines()) == 1
