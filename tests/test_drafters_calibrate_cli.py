"""`specplan calibrate`: per-position calibration before/after STS, files and JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specplan.cli.commands.calibrate import table
from specplan.simulator.core.streams import seed_sequence
from specplan.simulator.drafters.drafter import build_drafter
from specplan.simulator.drafters.heads import evaluate_head
from tests.conftest import REPO, SHARED, make_scenario

MINIMAL = SHARED / "scenarios" / "contract-minimal.yaml"
SMALL = ("--set", "drafter.confidence.calibration_samples=4000", "--samples", "20000")


@pytest.mark.slow("draws and scores a large calibration sample")
def test_calibrate_writes_json_and_reliability_diagrams(cli, tmp_path):
    status, out, err = cli("calibrate", MINIMAL, "--out", tmp_path, "--json", *SMALL)
    assert status == 0, err
    result = json.loads(out)
    gamma = 5
    assert result["positions"] == list(range(1, gamma + 1))
    for key in ("ece_before", "ece_after", "auc", "temperatures", "auc_after", "brier_before", "brier_after"):
        assert len(result[key]) == gamma
    assert all(a < b for a, b in zip(result["ece_after"], result["ece_before"], strict=True))
    assert all(t > 1 for t in result["temperatures"])  # overconfidence 1.5: STS softens
    assert all(0.5 < a < 1 for a in result["auc"])
    assert json.loads((tmp_path / "calibration.json").read_text()) == result
    for name in ("reliability_before.png", "reliability_after.png", "scenario.resolved.yaml"):
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "reliability_before.png").read_bytes()[:4] == b"\x89PNG"
    lines = table(result).splitlines()
    assert "ECE raw" in lines[1] and len(lines) == 2 + gamma


def test_calibrate_without_a_drafter_is_a_one_line_error(cli, tmp_path):
    status, _, err = cli("calibrate", MINIMAL, "--out", tmp_path, "--set", "drafter.family=none",
                         "--set", "policy.name=none")
    assert status == 2
    assert "family is 'none'" in err and len(err.strip().splitlines()) == 1


def test_calibrate_reports_the_temperatures_the_simulation_uses():
    drafter = {"family": "dspark", "block_size": 4,
               "acceptance": {"preset": "qwen3-8b", "per_position": None, "domains": {"chat": 1.0},
                              "request_sigma": 0.5, "token_sigma": 1.0},
               "confidence": {"kind": "model", "calibration": "sts", "calibration_samples": 3000}}
    scenario = make_scenario(drafter=drafter)
    built = build_drafter(scenario.drafter, None, seed_sequence(scenario.seed, "calibration"))
    evaluation = evaluate_head(scenario.drafter, scenario.seed, eval_samples=2000)
    np.testing.assert_array_equal(evaluation.report.temperatures, built.confidence.temperatures)
    assert evaluation.sts_applied


@pytest.mark.slow("draws and scores a large calibration sample")
def test_the_default_scenarios_head_is_in_the_published_range(cli, tmp_path):
    """scenarios/default.yaml: raw ECE 3–8% and ROC-AUC 0.81–0.91 per position; STS ≈ 1% held out."""
    status, out, err = cli("calibrate", REPO / "scenarios" / "default.yaml", "--out", tmp_path, "--json")
    assert status == 0, err
    result = json.loads(out)
    assert all(0.03 <= e <= 0.08 for e in result["ece_before"])
    assert all(0.81 <= a <= 0.91 for a in result["auc"])
    assert all(e < 0.02 for e in result["ece_after"]) and np.mean(result["ece_after"]) < 0.0125
