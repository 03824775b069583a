"""Measured DeepSeek-V4 acceptance presets reproduce the published accepted lengths AL(k).

The figures are written out from SemiAnalysis InferenceX's golden accepted
lengths as issue 22 quotes them (bonus included, k drafted tokens), never
imported from the module under test. The curves are derived (S_k = AL(k) −
AL(k−1), p_k = S_k / S_{k−1}), so τ of the first k positions is AL(k)
exactly; served whole requests with request and token spread, the pooled τ's
99% confidence interval lies within ±1.5% of AL(k).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.drafters.curves import expected_tau
from specplan.simulator.drafters.presets import (
    PRESET_FAMILIES,
    PRESET_INFO,
    fitted_max_block,
    preset_curves,
)
from tests.conftest import make_scenario
from tests.drive import drive

PRO_DSPARK = {1: 1.84, 2: 2.51, 3: 3.01, 4: 3.36, 5: 3.61, 6: 3.77}
PRO_MTP_THINKING = {1: 1.79, 2: 2.27, 3: 2.49, 4: 2.54, 5: 2.55}
PRO_MTP_NOTHINK = {1: 1.92, 3: 2.97, 5: 3.10}
MEASURED = [("deepseek-v4-pro", "dspark", PRO_DSPARK), ("deepseek-v4-pro", "mtp", PRO_MTP_THINKING),
            ("deepseek-v4-pro-nothink", "mtp", PRO_MTP_NOTHINK), ("deepseek-v4.1-flash", "dspark", {5: 3.51})]


@pytest.mark.parametrize(("preset", "family", "al"), MEASURED)
def test_every_measured_accepted_length_is_reproduced_at_its_k(preset, family, al):
    for k, length in al.items():
        for d in DOMAINS:
            assert expected_tau(preset_curves(preset, family, k)[d]) == pytest.approx(length, abs=1e-9), (k, d)


def test_per_position_rates_are_the_survival_ratios_of_the_measured_lengths():
    """Worked by hand: S = AL(k) − AL(k−1), p_k = S_k / S_{k−1}."""
    survival = np.diff([1.0, *PRO_DSPARK.values()])
    np.testing.assert_allclose(survival, [0.84, 0.67, 0.50, 0.35, 0.25, 0.16], atol=1e-12)
    expected = survival / np.r_[1.0, survival[:-1]]
    np.testing.assert_allclose(preset_curves("deepseek-v4-pro", "dspark", 6)["code"], expected, rtol=1e-12)
    mtp = preset_curves("deepseek-v4-pro", "mtp", 5)["math"]
    np.testing.assert_allclose(mtp, [0.79, 0.48 / 0.79, 0.22 / 0.48, 0.05 / 0.22, 0.01 / 0.05], rtol=1e-9)


def test_unmeasured_positions_between_measured_k_share_one_conditional_rate():
    """Thinking off measures k = 1, 3, 5: p2 = p3 and p4 = p5, each solved to the two ends."""
    p = preset_curves("deepseek-v4-pro-nothink", "mtp", 5)["chat"]
    assert p[0] == pytest.approx(0.92)
    assert p[1] == pytest.approx(p[2]) and p[3] == pytest.approx(p[4])
    r = (-1 + np.sqrt(1 + 4 * 1.05 / 0.92)) / 2          # 0.92 (r + r²) = 2.97 − 1.92
    assert p[1] == pytest.approx(r, rel=1e-9)
    assert np.all((p > 0) & (p < 1))


def test_measured_mtp_decays_faster_than_the_assumed_rule():
    """V4-Pro MTP-3/5 measured 2.49 / 2.55, where the assumed logit decay from 0.79 would give more."""
    measured = preset_curves("deepseek-v4-pro", "mtp", 5)["code"]
    assumed = 1 / (1 + np.exp(-(np.log(0.79 / 0.21) - 0.5 * np.arange(5))))
    assert expected_tau(measured) < expected_tau(assumed) - 0.25      # 2.55 against 2.85


def test_fitted_range_is_data_and_labels_what_lies_beyond():
    assert fitted_max_block("deepseek-v4-pro", "dspark") == 6
    assert fitted_max_block("deepseek-v4-pro", "mtp") == 5
    assert fitted_max_block("deepseek-v4-pro-nothink", "mtp") == 5
    assert fitted_max_block("deepseek-v4.1-flash", "dspark") == 5
    assert fitted_max_block("deepseek-v3", "mtp") == 1
    assert fitted_max_block("qwen3-8b", "dflash") == 7
    for preset, families in PRESET_FAMILIES.items():
        for family in families:
            info = PRESET_INFO[(preset, family)]
            assert info.source and info.beyond.startswith("assumed"), (preset, family)
    assert "assumed" in PRESET_INFO[("deepseek-v3", "mtp")].basis
    assert PRESET_INFO[("deepseek-v4-pro-nothink", "mtp")].basis.startswith("derived, interpolated")
    long = preset_curves("deepseek-v4-pro", "dspark", 9)["math"]
    np.testing.assert_array_equal(long[:6], preset_curves("deepseek-v4-pro", "dspark", 6)["math"])
    assert long.size == 9 and np.all(np.diff(long[5:]) < 0)


def pooled_tau(preset: str, family: str, k: int, seed: int) -> float:
    requests = 2000
    scenario = make_scenario(
        seed=seed, hardware={"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.0}},
        engine={"max_batch_requests": requests, "kv_capacity_tokens": 10**9},
        drafter={"family": family, "block_size": k, "latency": {"kind": "fixed", "ms": 0.0},
                 "acceptance": {"preset": preset, "domains": {"code": 1.0},
                                "request_sigma": 0.5, "token_sigma": 0.5}},
        policy={"name": "static", "params": {"length": k}})
    return drive(scenario, np.full(requests, 8), np.full(requests, 129)).pooled_tau()


@pytest.mark.parametrize(("preset", "family", "k", "al"),
                         [("deepseek-v4-pro", "dspark", 6, 3.77), ("deepseek-v4-pro", "mtp", 3, 2.49),
                          ("deepseek-v4-pro-nothink", "mtp", 5, 3.10)])
def test_served_with_spread_the_pooled_accepted_length_is_the_measured_one(preset, family, k, al):
    taus = np.array([pooled_tau(preset, family, k, 500 + rep) for rep in range(6)])
    half = stats.t.ppf(0.995, taus.size - 1) * taus.std(ddof=1) / np.sqrt(taus.size)
    assert 0.985 * al < taus.mean() - half and taus.mean() + half < 1.015 * al, (taus.mean(), half)
