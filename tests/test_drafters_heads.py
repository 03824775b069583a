"""Confidence heads: calibration metrics on hand-made cases, STS, and the modelled head."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.simulator.core.streams import seed_sequence, stream
from specplan.simulator.drafters.acceptance import AcceptanceModel
from specplan.simulator.drafters.drafter import build_drafter
from specplan.simulator.drafters.head_calibration import (
    apply_temperatures,
    brier,
    calibration_report,
    ece,
    ece_many,
    fit_sts,
    reliability,
    roc_auc,
)
from specplan.simulator.drafters.heads import ModelHead, draw_sample, model_head
from specplan.simulator.drafters.presets import preset_curves
from specplan.simulator.drafters.spec import ConfidenceSpec
from tests.conftest import make_scenario

MIX = {"math": 0.3, "code": 0.3, "chat": 0.4}
# Token-level acceptance as dispersed as real drafters' (the schema's default spread).
REALISTIC = AcceptanceModel(preset_curves("qwen3-8b", "dspark", 7), MIX, 7, 0.7, 2.0)


def sample(head: ModelHead, n: int, seed: int, model: AcceptanceModel = REALISTIC):
    return draw_sample(model, head, n, stream(seed, "heads-test"))


# ---- metrics on hand-made cases ------------------------------------------------------------
def test_ece_by_hand():
    # bin 2 holds two 0.1 predictions, half right: |0.1 − 0.5| · 2/4; bin 18: |0.9 − 1| · 2/4
    assert ece(np.array([0.1, 0.1, 0.9, 0.9]), np.array([0, 1, 1, 1])) == pytest.approx(0.25)
    assert ece(np.array([1.0, 1.0]), np.array([1, 1])) == 0.0  # 1.0 falls in the last bin
    assert ece(np.array([0.3, 0.7]), np.array([0, 1])) == pytest.approx(0.3)


def test_ece_of_a_calibrated_sample_is_small_and_of_a_shifted_one_is_the_shift():
    rng = np.random.default_rng(0)
    pred = rng.uniform(0.2, 0.8, 200_000)
    label = rng.random(pred.size) < pred
    assert ece(pred, label) < 0.005
    assert ece(np.clip(pred + 0.1, 0, 1), label) == pytest.approx(0.1, abs=0.005)


def test_ece_many_matches_ece_row_by_row():
    rng = np.random.default_rng(1)
    preds = rng.random((5, 300))
    label = rng.random(300) < 0.5
    np.testing.assert_allclose(ece_many(preds, label), [ece(row, label) for row in preds])


def test_roc_auc_by_hand():
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    assert roc_auc(np.array([0.5, 0.5, 0.5]), np.array([0, 1, 1])) == pytest.approx(0.5)
    assert roc_auc(np.array([0.9, 0.1]), np.array([1, 0])) == 1.0
    assert np.isnan(roc_auc(np.array([0.2, 0.3]), np.array([1, 1])))


def test_brier_and_reliability_by_hand():
    assert brier(np.array([1.0, 0.0, 0.5]), np.array([1, 1, 0])) == pytest.approx((0 + 1 + 0.25) / 3)
    rel = reliability(np.array([0.12, 0.14, 0.96]), np.array([1, 0, 1]))
    assert rel.counts.sum() == 3 and rel.counts[2] == 2 and rel.counts[19] == 1
    assert rel.mean_pred[2] == pytest.approx(0.13) and rel.observed[2] == pytest.approx(0.5)
    assert np.isnan(rel.observed[10])


# ---- STS -------------------------------------------------------------------------------------
def test_sts_preserves_each_positions_order():
    s = sample(ModelHead(1.5, 0.4), 5_000, 1)
    scaled = apply_temperatures(s.raw, fit_sts(s.raw, s.accepted))
    for k in range(s.raw.shape[1]):
        order = np.argsort(s.raw[:, k], kind="stable")
        assert np.all(np.diff(scaled[order, k]) >= 0)


@pytest.mark.slow("draws and scores a large calibration sample")
@pytest.mark.parametrize(("overconfidence", "noise"), [(0.6, 0.0), (1.3, 0.0), (1.5, 0.4), (2.5, 1.0)])
def test_sts_never_raises_ece_in_sample(overconfidence, noise):
    s = sample(ModelHead(overconfidence, noise), 20_000, 2)
    report = calibration_report(s.raw, s.accepted, fit_sts(s.raw, s.accepted))
    assert np.all(report.ece_after <= report.ece_before + 1e-12)


@pytest.mark.slow("draws and scores a large calibration sample")
def test_sts_leaves_a_calibrated_head_calibrated():
    """c = p already: temperatures stay near 1 and ECE moves only within sampling noise."""
    s = sample(ModelHead(1.0, 0.0), 20_000, 7)
    temperatures = fit_sts(s.raw, s.accepted)
    assert temperatures[0] == pytest.approx(1.0, abs=0.05)
    np.testing.assert_allclose(temperatures, 1.0, atol=0.3)
    in_sample = calibration_report(s.raw, s.accepted, temperatures)
    assert np.all(in_sample.ece_after <= in_sample.ece_before + 0.001)
    held_out = sample(ModelHead(1.0, 0.0), 100_000, 8)
    assert np.all(calibration_report(held_out.raw, held_out.accepted, temperatures).ece_after < 0.01)


@pytest.mark.slow("draws and scores a large calibration sample")
def test_sts_direction_follows_the_heads_bias():
    over = sample(ModelHead(1.5, 0.0), 20_000, 3)
    under = sample(ModelHead(0.6, 0.0), 20_000, 3)
    assert np.all(fit_sts(over.raw, over.accepted) > 1.2)
    assert np.all(fit_sts(under.raw, under.accepted) < 0.8)


@pytest.mark.slow("draws and scores a large calibration sample")
def test_default_head_lands_in_the_published_range_and_sts_fixes_it():
    """Defaults on realistic spread: raw ECE 3–8%, AUC 0.81–0.91 per position; STS ≈ 1% held out."""
    spec = ConfidenceSpec(kind="model", calibration="sts")
    head = model_head(spec, REALISTIC, seed_sequence(5, "calibration"))
    held_out = sample(ModelHead(spec.overconfidence, spec.noise), 100_000, 6)
    report = calibration_report(held_out.raw, held_out.accepted, head.temperatures)
    assert np.all((report.ece_before > 0.03) & (report.ece_before < 0.08))
    assert np.all((report.auc_before > 0.81) & (report.auc_before < 0.91))
    assert np.all(report.ece_after < 0.02) and report.ece_after.mean() < 0.015
    assert report.auc_after[0] == pytest.approx(report.auc_before[0])
    np.testing.assert_allclose(report.auc_after, report.auc_before, atol=0.01)


# ---- the modelled head in the drafter ---------------------------------------------------------
@pytest.mark.slow("draws and scores a large calibration sample")
def test_noise_lowers_auc_and_overconfidence_raises_ece():
    def first_position(head: ModelHead) -> tuple[float, float]:
        s = sample(head, 50_000, 8)
        return roc_auc(s.raw[:, 0], s.accepted[:, 0]), ece(s.raw[:, 0], s.accepted[:, 0])

    auc_clean, ece_clean = first_position(ModelHead(1.0, 0.0))
    auc_noisy, _ = first_position(ModelHead(1.0, 1.5))
    _, ece_sharp = first_position(ModelHead(2.0, 0.0))
    assert auc_noisy < auc_clean - 0.03
    assert ece_sharp > ece_clean + 0.03


def test_model_head_is_deterministic_per_seed_and_calibrates_only_with_sts():
    spec = ConfidenceSpec(kind="model", calibration="sts", calibration_samples=5_000)
    a = model_head(spec, REALISTIC, seed_sequence(1, "calibration"))
    b = model_head(spec, REALISTIC, seed_sequence(1, "calibration"))
    c = model_head(spec, REALISTIC, seed_sequence(2, "calibration"))
    np.testing.assert_array_equal(a.temperatures, b.temperatures)
    assert not np.array_equal(a.temperatures, c.temperatures)
    assert model_head(ConfidenceSpec(kind="model"), REALISTIC, 1).temperatures is None


def test_observe_draws_a_batch_in_one_call():
    head = ModelHead(1.5, 0.4, temperatures=np.full(7, 1.5))
    rng = np.random.default_rng(0)
    rows = REALISTIC.row_logits(np.zeros(256, dtype=np.int64), np.zeros(256))
    x = REALISTIC.step_logits(rows, rng)
    c1, c2 = head.observe(x, rng), head.observe(x, rng)
    assert c1.shape == (256, 7) and np.all((c1 > 0) & (c1 < 1))
    assert not np.array_equal(c1, c2)
    p = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(ModelHead(1.5, 0.0, np.full(7, 1.5)).observe(x, rng), p, atol=1e-6)


def test_scenario_with_model_confidence_builds_a_calibrated_drafter():
    drafter_spec = {"family": "dspark", "block_size": 5,
                    "acceptance": {"preset": "qwen3-8b", "per_position": None, "domains": MIX,
                                   "request_sigma": 0.5, "token_sigma": 0.5},
                    "confidence": {"kind": "model", "overconfidence": 1.5, "noise": 0.4,
                                   "calibration": "sts", "calibration_samples": 5000}}
    scenario = make_scenario(drafter=drafter_spec, policy={"name": "static", "params": {"length": 3}})
    drafter = build_drafter(scenario.drafter, None, seed_sequence(scenario.seed, "calibration"))
    assert drafter.confidence.kind == "model"
    assert drafter.confidence.temperatures.shape == (5,)
    x = drafter.step_logits(drafter.row_logits(np.zeros(8, dtype=np.int64), np.zeros(8)), np.random.default_rng(0))
    c = drafter.confidences(x, np.random.default_rng(1))
    assert x.shape == c.shape == (8, 5)
