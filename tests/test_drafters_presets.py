"""Acceptance presets reproduce the published accepted lengths and shapes (../shared/DESIGN.md §1, the development checkout's).

Every expected figure below is written out from the DSpark paper (Table 1,
the γ = 15 gains, Fig. 2's end points) or DESIGN.md, never imported from
the module under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.acceptance import acceptance_model
from specplan.simulator.drafters.curves import expected_tau
from specplan.simulator.drafters.presets import preset_curves, reference_curve
from tests.conftest import SHARED, make_scenario

# DSpark paper Table 1 (τ, bonus included, block 7): math (GSM8K, MATH, AIME25), code (MBPP, HumanEval,
# LCB), chat (MT-Bench, Alpaca, Arena-Hard)
TABLE1 = {
    "qwen3-4b": {"eagle3": (5.14, 4.62, 3.92, 3.69, 4.16, 3.77, 2.39, 2.26, 2.55),
                 "dflash": (5.40, 4.85, 4.15, 4.40, 4.74, 4.18, 3.07, 2.96, 2.83),
                 "dspark": (6.11, 5.70, 4.89, 5.13, 5.38, 4.86, 3.64, 3.54, 3.29)},
    "qwen3-8b": {"eagle3": (5.30, 4.77, 3.91, 3.96, 4.33, 4.17, 2.66, 2.54, 2.54),
                 "dflash": (5.33, 4.91, 4.07, 4.36, 4.64, 4.39, 3.11, 2.98, 2.81),
                 "dspark": (6.17, 5.78, 5.01, 5.16, 5.52, 5.17, 3.72, 3.58, 3.21)},
    "qwen3-14b": {"eagle3": (5.24, 4.60, 3.71, 3.81, 4.14, 4.01, 2.62, 2.47, 2.48),
                  "dflash": (5.41, 4.84, 3.98, 4.44, 4.59, 4.33, 3.10, 2.94, 2.72),
                  "dspark": (6.21, 5.74, 4.94, 5.26, 5.43, 5.02, 3.70, 3.58, 3.13)},
    "gemma4-12b": {"eagle3": (5.87, 5.46, 4.83, 4.72, 5.37, 4.16, 3.19, 3.06, 2.72),
                   "dflash": (5.45, 5.04, 4.22, 4.39, 4.95, 3.70, 2.98, 2.84, 2.59),
                   "dspark": (6.05, 5.78, 5.12, 5.11, 5.64, 4.51, 3.49, 3.35, 2.92)},
}
GAIN_AT_7 = {"math": 1.16, "code": 1.15, "chat": 1.18}   # DSpark over DFlash, Qwen3-4B
GAIN_AT_15 = {"math": 1.30, "code": 1.26, "chat": 1.22}


def published_tau(target: str, family: str) -> dict[str, float]:
    row = np.asarray(TABLE1[target][family]).reshape(3, 3)
    return dict(zip(DOMAINS, row.mean(axis=1).tolist(), strict=True))


CASES = [(t, f) for t in TABLE1 for f in TABLE1[t]]


def tau_ratio(target: str, block_size: int) -> dict[str, float]:
    dspark = preset_curves(target, "dspark", block_size)
    dflash = preset_curves(target, "dflash", block_size)
    return {d: expected_tau(dspark[d]) / expected_tau(dflash[d]) for d in DOMAINS}


@pytest.mark.parametrize(("target", "family"), CASES)
def test_curves_reproduce_the_published_domain_mean_tau(target, family):
    curves = preset_curves(target, family, 7)
    for domain, tau in published_tau(target, family).items():
        assert expected_tau(curves[domain]) == pytest.approx(tau, abs=1e-6)
        assert np.all((curves[domain] > 0) & (curves[domain] < 1))


@pytest.mark.parametrize("target", sorted(TABLE1))
def test_published_shapes(target):
    for d in DOMAINS:
        dflash = preset_curves(target, "dflash", 7)[d]
        eagle3 = preset_curves(target, "eagle3", 7)[d]
        dspark = preset_curves(target, "dspark", 7)[d]
        assert np.all(np.diff(dflash) < 0), "DFlash decays along the block"
        assert np.all(np.diff(eagle3) >= -1e-12), "Eagle3 is stable or rising"
        assert np.ptp(dspark[1:]) < 1e-9, "DSpark is flat after position 1"
        assert dspark[0] > eagle3[0] and dspark[0] >= dflash[0] - 0.01, "DSpark is high at position 1"
        assert np.all(dspark[1:] > dflash[1:]), "DSpark dominates DFlash after position 1"


def test_qwen3_4b_reference_curves_keep_the_published_end_points():
    """DESIGN.md's fits for Qwen3-4B (p1 → p7); DFlash code and chat keep the paper's end points."""
    design = {("dflash", "math"): (0.88, 0.76), ("dflash", "code"): (0.87, 0.78),
              ("dflash", "chat"): (0.72, 0.63), ("eagle3", "math"): (0.81, 0.88),
              ("eagle3", "code"): (0.775, 0.775), ("eagle3", "chat"): (0.53, 0.83),
              ("dspark", "code"): (0.867, 0.867), ("dspark", "chat"): (0.739, 0.739)}
    for (family, domain), (first, last) in design.items():
        curve = reference_curve(family, domain)
        assert curve[0] == pytest.approx(first, abs=0.006)
        assert curve[-1] == pytest.approx(last, abs=0.006)
    assert reference_curve("dspark", "math")[0] == pytest.approx(0.93)


@pytest.mark.parametrize("domain", ["code", "chat"])
def test_dflash_drops_early_then_flattens(domain):
    """Most of the decay from p1 to p7 happens in the first positions (convex, not a straight line)."""
    curve = reference_curve("dflash", domain)
    steps = -np.diff(curve)
    assert np.all(steps > 0) and np.all(np.diff(steps) < 0)
    assert curve[1] - curve[-1] < 0.5 * (curve[0] - curve[-1])


def test_dspark_gain_over_dflash_matches_published_at_7_and_15():
    at7, at15 = tau_ratio("qwen3-4b", 7), tau_ratio("qwen3-4b", 15)
    for d in DOMAINS:
        assert at7[d] == pytest.approx(GAIN_AT_7[d], abs=0.01)
        assert at15[d] == pytest.approx(GAIN_AT_15[d], abs=1e-6)


@pytest.mark.parametrize("target", sorted(TABLE1))
def test_dspark_gain_grows_with_block_size(target):
    gains = np.array([list(tau_ratio(target, g).values()) for g in range(7, 16)])
    assert np.all(np.diff(gains, axis=0) > 0)
    for i, d in enumerate(DOMAINS):  # γ = 15 gains are published for Qwen3-4B; others stay near them
        assert gains[-1, i] == pytest.approx(GAIN_AT_15[d], abs=0.06)


def test_short_blocks_truncate_and_long_blocks_decay():
    full = preset_curves("qwen3-8b", "dflash", 7)
    short = preset_curves("qwen3-8b", "dflash", 4)
    long = preset_curves("qwen3-8b", "eagle3", 20)
    for d in DOMAINS:
        np.testing.assert_array_equal(short[d], full[d][:4])
        assert long[d].size == 20
        assert np.all(np.diff(long[d][6:]) < 0)


def test_mtp_preset_second_token_acceptance_and_static_k():
    curves = preset_curves("deepseek-v3", "mtp", 5)
    for d in DOMAINS:
        assert 0.85 <= curves[d][0] <= 0.90
        assert curves[d].size == 5
        assert np.all(np.diff(curves[d]) < 0)
    assert preset_curves("deepseek-v3", "mtp", 1)["math"][0] == pytest.approx(0.90)


def test_weak_dspark_reproduces_public_prefix_survival():
    curve = preset_curves("weak-dspark", "dspark", 7)["chat"]
    published = [0.605, 0.341, 0.186, 0.099, 0.052, 0.027, 0.014]
    np.testing.assert_allclose(np.cumprod(curve), published, rtol=1e-12)
    assert expected_tau(curve) == pytest.approx(2.33, abs=0.01)


@pytest.mark.parametrize(
    ("preset", "family", "expected"),
    [("qwen3-9b", "dspark", "valid: qwen3-4b"), ("qwen3-8b", "mtp", "valid for mtp: deepseek-v3"),
     ("weak-dspark", "dflash", "valid for dflash: qwen3-4b"), ("deepseek-v3", "eagle3", "no data")],
)
def test_unknown_or_mismatched_preset_is_a_load_time_error(preset, family, expected):
    drafter = {"family": family, "block_size": 3, "acceptance": {"preset": preset, "per_position": None, "domains": {"chat": 1.0}}}
    with pytest.raises(SpecplanError, match=r"drafter\.acceptance\.preset") as err:
        make_scenario(drafter=drafter)
    assert expected in str(err.value)


def test_specplan_check_rejects_a_bad_preset_in_one_line(cli):
    scenario = SHARED / "scenarios" / "contract-minimal.yaml"
    status, _, err = cli("check", scenario, "--set", "drafter.acceptance.preset=llama-70b")
    assert status == 2
    assert "drafter.acceptance.preset" in err and "qwen3-8b" in err
    assert len(err.strip().splitlines()) == 1


def test_acceptance_model_uses_the_preset_at_the_scenario_block_size():
    drafter = {"family": "dspark", "block_size": 5,
               "acceptance": {"preset": "qwen3-14b", "per_position": None,
                              "domains": {"math": 0.5, "chat": 0.5}}}
    model = acceptance_model(make_scenario(drafter=drafter).drafter)
    assert set(model.domains) == {"math", "chat"}
    row = model.domains.index("math")
    np.testing.assert_array_equal(model.base_p[row], preset_curves("qwen3-14b", "dspark", 5)["math"])
