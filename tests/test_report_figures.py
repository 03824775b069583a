"""What the report's figures plot, not only that a file was written.

A perfect head (c = p) must lie on the diagonal of the calibration figure
within each bin's binomial interval; an over-confident raw head must lie
off it, and STS must bring it back (as `specplan calibrate` reports).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np

from specplan.reports.calibration import reliability_curves
from specplan.reports.figures import MIN_BIN_COUNT, calibration_figure
from specplan.simulator.drafters.calibration import N_BINS
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.load import read_yaml
from specplan.simulator.scenario.merge import strip_study_blocks
from tests.conftest import REPO

Z = 4.0  # a bin's observed survival within 4 binomial standard errors of its mean prediction


def default_with(confidence: dict):
    raw = strip_study_blocks(read_yaml(REPO / "scenarios" / "default.yaml"))
    raw = copy.deepcopy(raw)
    raw["drafter"]["confidence"] = {**raw["drafter"].get("confidence", {}), **confidence}
    return scenario_from_mapping(raw, REPO / "scenarios")


def off_diagonal_bins(curve) -> int:
    """Bins (with at least MIN_BIN_COUNT blocks) whose observed survival is outside mean ± Z·se."""
    keep = curve.counts >= MIN_BIN_COUNT
    m, o, n = curve.mean_pred[keep], curve.observed[keep], curve.counts[keep]
    se = np.sqrt(np.maximum(m * (1 - m), 1e-4) / n)
    return int(np.sum(np.abs(o - m) > Z * se))


def test_a_perfect_heads_curve_lies_on_the_diagonal_within_binomial_intervals():
    (curve,) = reliability_curves(default_with({"kind": "perfect"}), blocks=8000)
    assert curve.counts.size == N_BINS and (curve.counts >= MIN_BIN_COUNT).sum() >= 10
    assert off_diagonal_bins(curve) == 0
    assert curve.ece < 0.02


def test_sts_brings_the_raw_head_back_to_the_diagonal_as_calibrate_reports():
    raw, seen = reliability_curves(default_with({"kind": "model", "calibration": "sts"}), blocks=8000)
    assert 0.03 < raw.ece < 0.10 and seen.ece < 0.025  # calibrate: raw 4.9–7.5%, STS 0.8–1.4% per position
    assert off_diagonal_bins(raw) >= 3
    assert seen.ece < raw.ece / 3


def test_the_calibration_figure_plots_those_curves():
    scenario = default_with({"kind": "perfect"})
    result = SimpleNamespace(plan=SimpleNamespace(variant_scenarios={"perfect": scenario}))
    fig = calibration_figure(result, blocks=8000)
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    (name,) = [n for n in lines if n.startswith("perfect head")]
    x, y = (np.asarray(v, dtype=float) for v in lines[name].get_data())
    (curve,) = reliability_curves(scenario, blocks=8000)
    keep = curve.counts >= MIN_BIN_COUNT
    assert np.allclose(x, curve.mean_pred[keep]) and np.allclose(y, curve.observed[keep])
    assert f"ECE {100 * curve.ece:.1f}%" in name
