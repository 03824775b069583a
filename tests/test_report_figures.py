"""What the report's figures and tables show, not only that a file was written.

The acceptance and calibration figures read what the runs recorded (the
sweep's per-label draft records), never the scenario's model. A perfect
head (c = p) must lie on the diagonal of the calibration figure within each
bin's binomial interval; an over-confident raw head must lie off it, and
STS must bring it back (as `specplan calibrate` reports); without spread the
recorded acceptance by position must be the model's own. An SLA reading
taken at the largest simulated load is marked in the table, the terminal
text and on the frontier figure.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

from specplan.cli.commands.sweep import comparison_text
from specplan.reports.figures import (
    MIN_BIN_COUNT,
    acceptance_figure,
    calibration_figure,
    frontier_figure,
)
from specplan.reports.reliability_curves import reliability_curves
from specplan.reports.report import write_report
from specplan.simulator.drafters.acceptance import acceptance_model
from specplan.simulator.drafters.head_calibration import N_BINS
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.load import read_yaml
from specplan.simulator.scenario.merge import deep_merge, strip_study_blocks
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.sweep.run import run_sweep
from tests.conftest import REPO
from tests.test_sweep import tiny

Z = 4.0  # a bin's observed survival within 4 binomial standard errors of its mean prediction


def default_with(confidence: dict, **changes: object):
    raw = strip_study_blocks(read_yaml(REPO / "scenarios" / "default.yaml"))
    raw = copy.deepcopy(raw)
    raw["drafter"]["confidence"] = {**raw["drafter"].get("confidence", {}), **confidence}
    raw["horizon"] = {"duration_s": 12, "warmup_s": 1}
    raw["workload"]["arrivals"]["users"] = 64
    return scenario_from_mapping(deep_merge(raw, changes), REPO / "scenarios")


def recorded(scenario):
    """The draft record of one run of `scenario`."""
    drafts = simulate(scenario).drafts
    assert drafts is not None
    return drafts


def off_diagonal_bins(curve) -> int:
    """Bins (with at least MIN_BIN_COUNT blocks) whose observed survival is outside mean ± Z·se."""
    keep = curve.counts >= MIN_BIN_COUNT
    m, o, n = curve.mean_pred[keep], curve.observed[keep], curve.counts[keep]
    se = np.sqrt(np.maximum(m * (1 - m), 1e-4) / n)
    return int(np.sum(np.abs(o - m) > Z * se))


def test_a_perfect_heads_recorded_curve_lies_on_the_diagonal_within_binomial_intervals():
    (curve,) = reliability_curves(recorded(default_with({"kind": "perfect"})), "perfect")
    assert curve.counts.size == N_BINS and (curve.counts >= MIN_BIN_COUNT).sum() >= 10
    assert off_diagonal_bins(curve) == 0
    assert curve.ece < 0.02


def test_sts_brings_the_raw_head_back_to_the_diagonal_as_calibrate_reports():
    raw, seen = reliability_curves(recorded(default_with({"kind": "model", "calibration": "sts"})), "model")
    assert 0.03 < raw.ece < 0.10 and seen.ece < 0.025  # calibrate: raw 4.9–7.5%, STS 0.8–1.4% per position
    assert off_diagonal_bins(raw) >= 3
    assert seen.ece < raw.ece / 3


def figure_input(label: str, scenario, record) -> SimpleNamespace:
    return SimpleNamespace(design=SimpleNamespace(variant_scenarios={label: scenario}, labels=[label]),
                           drafts={label: record})


def test_the_calibration_figure_plots_the_recorded_curves():
    scenario = default_with({"kind": "perfect"})
    record = recorded(scenario)
    fig = calibration_figure(figure_input("perfect", scenario, record))
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    (name,) = [n for n in lines if n.startswith("perfect head")]
    x, y = (np.asarray(v, dtype=float) for v in lines[name].get_data())
    (curve,) = reliability_curves(record, "perfect")
    keep = curve.counts >= MIN_BIN_COUNT
    assert np.allclose(x, curve.mean_pred[keep]) and np.allclose(y, curve.observed[keep])
    assert f"ECE {100 * curve.ece:.1f}%" in name


def test_without_spread_the_recorded_acceptance_is_the_models_own_and_the_figure_shows_it():
    """Every draft verified, no spread: each position's recorded rate within 4 binomial errors of p_k."""
    scenario = default_with({"kind": "perfect"}, policy={"name": "static", "params": {"length": 7}},
                            drafter={"acceptance": {"request_sigma": 0.0, "token_sigma": 0.0}})
    record = recorded(scenario)
    assert record.seen is None                                  # a fixed-length policy reads no confidences
    model = acceptance_model(scenario.drafter)
    for d, domain in enumerate(record.domains):
        p, reached = model.curves[domain], record.reached[d]
        se = np.sqrt(p * (1 - p) / np.maximum(reached, 1))
        assert reached[-1] > 200 and (np.abs(record.acceptance[d] - p) <= Z * se).all(), domain
    fig = acceptance_figure(figure_input("static", scenario, record))
    (chat,) = [ax for ax in fig.axes if ax.get_title() == "chat requests"]
    (line,) = [ln for ln in chat.get_lines() if ln.get_label().startswith("static")]
    assert np.allclose(line.get_ydata(), record.acceptance[record.domains.index("chat")])
    assert calibration_figure(figure_input("static", scenario, record)) is None


@pytest.mark.slow("renders every report figure (matplotlib)")
def test_a_reading_at_the_largest_simulated_load_is_marked_in_table_and_figure(tmp_path):
    # a linear profile: throughput grows with users up to the largest simulated load (8), so an
    # SLA slower than every operating point reads the largest load's throughput, a lower bound
    raw = tiny()
    raw["sweep"]["seeds"] = [1]
    raw["sweep"]["variants"] = raw["sweep"]["variants"][:1]
    raw["sla"] = {"tps_user": [1.0], "statistic": "p50"}
    result = run_sweep(raw, None, RunOptions(out_dir=tmp_path, workers=1))
    (row,) = result.comparisons.itertuples()
    assert row.throughput_edge == "max load 8"
    write_report(result, tmp_path)
    assert "(at max load 8 users)" in (tmp_path / "report.md").read_text()
    assert "(at max load 8)" in comparison_text(result)
    (ax,) = frontier_figure(result).axes
    (marker,) = [ln for ln in ax.get_lines() if "largest simulated load" in str(ln.get_label())]
    assert [float(v) for v in marker.get_xdata()] == [1.0]
    assert float(marker.get_ydata()[0]) == row.throughput_per_gpu
