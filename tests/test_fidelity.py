"""`specplan fidelity`: the error arithmetic, the host-overhead fit, the report section, the command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from specplan.reports.fidelity import fidelity_blocks, fidelity_section
from specplan.validation.capture import context_axis
from specplan.validation.fidelity import error_summary, fit_host_overhead, relative_error
from specplan.validation.plot import save_fidelity_plot
from tests.conftest import REPO

POINT_KEYS = {"policy", "load", "measured_throughput", "predicted_throughput", "measured_tps_p50",
              "predicted_tps_p50"}
MICRO_SHAPE = {"name": "micro", "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 512}


def row(policy: str, load: float, measured: float, predicted: float) -> dict:
    out = {"policy": policy, "load": load, "measured_throughput": measured, "predicted_throughput": predicted,
           "measured_tps_p50": measured / 10, "predicted_tps_p50": measured / 10}
    out["throughput_error"] = relative_error(predicted, measured)
    out["tps_p50_error"] = relative_error(out["predicted_tps_p50"], out["measured_tps_p50"])
    return out


def test_relative_error_is_signed_and_undefined_without_a_measurement() -> None:
    assert relative_error(110.0, 100.0) == pytest.approx(0.10)
    assert relative_error(90.0, 100.0) == pytest.approx(-0.10)
    assert math.isnan(relative_error(5.0, 0.0)) and math.isnan(relative_error(math.nan, 3.0))


def test_error_summary_runs_over_both_metrics_of_every_point() -> None:
    rows = [row("a", 1, 100, 104), row("a", 2, 100, 80), row("b", 1, 100, 100)]
    summary = error_summary(rows)
    # |errors|: 0.04, 0.20, 0.00 (throughput) and three zeros (p50)
    assert summary["errors_counted"] == 6
    assert summary["median_abs_error"] == pytest.approx(0.0)
    assert summary["max_abs_error"] == pytest.approx(0.20)
    assert summary["median_abs_error_by_metric"]["throughput_error"] == pytest.approx(0.04)


def test_host_overhead_fit_recovers_a_line_and_never_goes_negative() -> None:
    rng = np.random.default_rng(0)
    r = rng.integers(1, 13, 400)
    a, b = fit_host_overhead(r, 1.5 + 0.2 * r + rng.normal(0, 0.05, r.size))
    assert a == pytest.approx(1.5, abs=0.05) and b == pytest.approx(0.2, abs=0.01)
    falling = 3.0 - 0.1 * r
    a, b = fit_host_overhead(r, falling)
    assert b == 0.0 and a == pytest.approx(float(falling.mean()))
    assert fit_host_overhead(np.array([4, 4, 4]), np.array([1.0, 2.0, 3.0])) == (2.0, 0.0)
    a, b = fit_host_overhead(r, 0.3 * r - 0.5)
    assert a == 0.0 and b > 0
    assert fit_host_overhead(r, -1.0 - 0.1 * r) == (0.0, 0.0)
    assert fit_host_overhead(r, 0.1 * r - 5.0) == (0.0, 0.0)


def test_context_axis_starts_at_zero_and_reaches_the_largest_batch_context() -> None:
    assert context_axis(4000, 5) == (0, 500, 1000, 2000, 4000)
    assert context_axis(10, 2) == (0, 10)


def test_report_section_is_empty_without_a_result_and_complete_with_one(tmp_path) -> None:
    assert fidelity_blocks(tmp_path) == [] and fidelity_section(tmp_path) == ""
    rows = [row("mtp-1", 3, 200.0, 210.0), row("static-3", 3, 300.0, 290.0)]
    doc = {"points": rows, **error_summary(rows), "device": "CPU test", "profile_drift": {"ratio": 1.02, "worst": 0.9}}
    (tmp_path / "fidelity.json").write_text(json.dumps(doc))
    save_fidelity_plot(rows, tmp_path / "fidelity.png", doc)
    html = fidelity_section(tmp_path)
    assert "Sim-to-real fidelity" in html and "static-3" in html and "+5.0%" in html
    assert "data:image/png;base64," in html and "not met" not in html
    assert "Where the step time goes" not in html  # no step checks in this result


def test_report_section_shows_each_points_step_time_check(tmp_path) -> None:
    rows = [row("mtp-1", 3, 200.0, 210.0)]
    check = {"policy": "mtp-1", "load": 3, "steps": 412, "verify_ratio_decode_only": 1.0234,
             "verify_ratio_with_prefill": 0.9612, "draft_ratio": 1.1, "step_ratio": 1.01,
             "mean_measured_ms": {"step": 23.45}, "drift_ratio": float("nan")}
    doc = {"points": rows, **error_summary(rows), "step_time_checks": [check, {"steps": 0}]}
    (tmp_path / "fidelity.json").write_text(json.dumps(doc))
    html = fidelity_section(tmp_path)
    assert "Where the step time goes" in html
    assert all(text in html for text in ("412", "1.023", "0.961", "1.100", "23.4", "n/a"))


@pytest.mark.slow("the fidelity command: real torch forwards and simulations")
def test_fidelity_command_writes_its_json_on_a_tiny_configuration(tmp_path, cli) -> None:
    shape = tmp_path / "micro.yaml"
    shape.write_text(yaml.safe_dump(MICRO_SHAPE))
    out = tmp_path / "fid"
    status, stdout, err = cli(
        "fidelity", REPO / "scenarios" / "fidelity.yaml", "--out", out, "--json", "--model", shape,
        "--repeats", "1", "--rounds", "1", "--tokens", "1,8,32", "--calibration-s", "0.6",
        "--set", "horizon={duration_s: 1.2, warmup_s: 0.2}", "--set", "sweep.load.users=[2]",
        "--set", "engine.max_batch_requests=4", "--set", "engine.max_step_tokens=32",
        "--set", "workload.prompt_tokens={kind: fixed, value: 12}",
        "--set", "workload.output_tokens={kind: fixed, value: 16}")
    assert status == 0, err
    doc = json.loads(stdout)
    assert {"points", "median_abs_error", "max_abs_error"} <= set(doc)
    assert [p["policy"] for p in doc["points"]] == ["mtp-1", "static-3", "dspark-async"]
    for point in doc["points"]:
        assert set(point) >= POINT_KEYS and point["load"] == 2
        assert point["measured_throughput"] > 0 and point["predicted_throughput"] > 0
    assert doc["max_abs_error"] >= doc["median_abs_error"] >= 0
    assert set(doc["host_overhead_ms"]) == {"mtp-1", "static-3", "dspark-async"}
    for name in ("fidelity.json", "fidelity.png", "fidelity.svg"):
        assert (out / name).is_file()
    for folder in ("p00", "p01", "p02", "p03", "p04", "mtp-1-2", "static-3-2", "dspark-async-2"):
        assert (out / "profiles" / folder / "target.csv").is_file()
        assert (out / "profiles" / folder / "drafter.csv").is_file()
    checks = json.loads((out / "fidelity.json").read_text())["step_time_checks"]
    assert len(checks) == 3 and all(c["drift_ratio"] > 0 and c["steps"] > 0 for c in checks)
    assert json.loads((out / "fidelity.json").read_text())["points"] == doc["points"]


@pytest.mark.parametrize(("args", "message"), [
    (["--threads", "0"], "--threads"),
    (["--runs", "0"], "--runs"),
    (["--set", "cluster.replicas=2"], "replicas must be 1"),
    (["--model", "no-such-shape"], "unknown shape"),
])
def test_fidelity_command_refuses_bad_input_in_one_line(tmp_path, cli, args: list[str], message: str) -> None:
    status, _, err = cli("fidelity", REPO / "scenarios" / "fidelity.yaml", "--out", tmp_path / "x", *args)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_spread_over_runs_reports_each_run_and_the_range() -> None:
    from specplan.validation.fidelity import FidelityResult, spread

    runs = [FidelityResult([], {"median_abs_error": m, "max_abs_error": x}, Path("."))
            for m, x in ((0.017, 0.053), (0.069, 0.252), (0.03, 0.07))]
    doc = spread(runs)
    assert doc["runs"] == 3 and doc["median_abs_error"] == 0.03 and doc["median_abs_error_range"] == [0.017, 0.069]
    assert doc["max_abs_error"] == 0.07 and doc["max_abs_error_range"] == [0.053, 0.252]


TINY = ("--repeats", "1", "--rounds", "1", "--tokens", "1,8,32", "--calibration-s", "0.6",
        "--set", "horizon={duration_s: 1.2, warmup_s: 0.2}", "--set", "sweep.load.users=[2]",
        "--set", "engine.max_batch_requests=4", "--set", "engine.max_step_tokens=32",
        "--set", "workload.prompt_tokens={kind: fixed, value: 12}",
        "--set", "workload.output_tokens={kind: fixed, value: 16}",
        "--set", "sweep.variants=[{label: static-3, policy: {name: static, params: {length: 3}}}]")


@pytest.mark.slow("the fidelity command: real torch forwards and simulations")
def test_a_relative_out_works_and_profile_once_claims_no_drift(tmp_path, cli, monkeypatch, capsys) -> None:
    """Issue 39, item 9: the replication guide's `fidelity scenarios/fidelity.yaml --out results/fidelity` failed
    with any relative --out (the profile path doubled); `--profile-once` printed a machine drift of 1.000 that it
    never measured."""
    shape = tmp_path / "micro.yaml"
    shape.write_text(yaml.safe_dump(MICRO_SHAPE))
    monkeypatch.chdir(tmp_path)
    status, stdout, err = cli("fidelity", REPO / "scenarios" / "fidelity.yaml", "--out", "results/fidelity",
                              "--model", shape, "--profile-once", *TINY)
    assert status == 0, err
    doc = json.loads((tmp_path / "results" / "fidelity" / "fidelity.json").read_text())
    assert (tmp_path / "results" / "fidelity" / "profiles" / "p00" / "target.csv").is_file()
    assert not (tmp_path / "results" / "fidelity" / "results").exists()
    assert all(c["drift_ratio"] is None for c in doc["step_time_checks"]) and doc["profile_drift"] == {}
    assert "drift" not in stdout.replace("machine drift not measured (--profile-once)", ""), stdout


@pytest.mark.slow("the fidelity command: real torch forwards")
def test_a_failed_fidelity_run_leaves_nothing_behind(tmp_path, cli, monkeypatch) -> None:
    """A run that fails after profiling removes the profiles it wrote (it left OUT/profiles/ behind)."""
    from specplan.simulator.core.errors import SpecplanError
    from specplan.validation.fidelity import Fidelity

    def fail(*_args, **_kwargs):
        raise SpecplanError("a point failed")

    monkeypatch.setattr(Fidelity, "run_point", fail)
    shape = tmp_path / "micro.yaml"
    shape.write_text(yaml.safe_dump(MICRO_SHAPE))
    out = tmp_path / "fid"
    status, _, err = cli("fidelity", REPO / "scenarios" / "fidelity.yaml", "--out", out, "--model", shape, *TINY)
    assert status == 2 and "a point failed" in err
    assert not out.exists()
    kept = tmp_path / "kept"
    (kept / "profiles").mkdir(parents=True)
    (kept / "profiles" / "mine.txt").write_text("a user's file")
    status, _, _ = cli("fidelity", REPO / "scenarios" / "fidelity.yaml", "--out", kept, "--model", shape, *TINY)
    assert status == 2 and sorted(p.name for p in (kept / "profiles").iterdir()) == ["mine.txt"]
