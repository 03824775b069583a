"""Issue 48: `specplan fit` from a deployment's own runs, the calibration file it writes, and that file applied.

The round trip needs no GPU: a deployment simulated with known terms (host time, verify scale) writes its runs
in sglang.bench_serving's and vllm bench serve's formats; `fit` reads them back and recovers the terms.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.calibration import (
    Calibration,
    CalibrationError,
    Deployment,
    Term,
    apply_calibration,
    deployment_of,
    read_calibration,
    write_calibration,
)
from specplan.simulator.study.fit.fitting import Point, RunSimulator
from specplan.simulator.study.fit.runs import MeasuredRun
from specplan.simulator.study.fit.writers import sglang_bench_serving_line, vllm_bench_serve_json
from tests.conftest import REPO

DEPLOYMENT = {"name": "llama-h200", "seed": 3, "horizon": {"requests": 40},
              "hardware": {"profile": "builtin:h200-llama3.1-8b-vllm"},
              "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 800_000},
              "workload": {"arrivals": {"kind": "bench_client", "num_prompts": 32, "max_concurrency": 8},
                           "prompt_tokens": {"kind": "fixed", "value": 512},
                           "output_tokens": {"kind": "fixed", "value": 128}}}
TRUTH = Point(host_ms=0.8, scale=1.3)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def deployment(tmp_path):
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(DEPLOYMENT))
    return path


def write_runs(deployment, folder, truth=TRUTH, concurrencies=(1, 4, 16, 32), distort=None):
    """The deployment at `truth`, driven by a bench client at each concurrency, written as the tools write."""
    sim = RunSimulator(deployment, [], folder)
    files = []
    for i, c in enumerate(concurrencies):
        client = "sglang" if i % 2 else "vllm"
        run = MeasuredRun(f"c{c}", f"{client}_bench", c, 4 * c, 512, 128)
        summary = dict(simulate(sim.scenario(run, truth)).summary)
        if distort is not None and c == distort[0]:
            for key in [k for k in summary if k.endswith("output_throughput_tok_s")]:
                summary[key] *= distort[1]
            for key in [k for k in summary if k.endswith("mean_tpot_ms")]:
                summary[key] /= distort[1]
        if client == "sglang":
            path = folder / f"c{c}.jsonl"
            path.write_text(sglang_bench_serving_line(summary, 512, 128))
        else:
            path = folder / f"c{c}.json"
            path.write_text(vllm_bench_serve_json(summary, "llama", 4 * c))
        files.append(path)
    return files


def test_the_round_trip_recovers_host_time_and_scale_within_their_intervals(deployment, tmp_path, cli):
    files = write_runs(deployment, tmp_path)
    status, out, err = cli("fit", *files, "--scenario", deployment, "--out", tmp_path / "fit")
    assert status == 0, err
    calibration = read_calibration(tmp_path / "fit" / "calibration.yaml")
    host, scale = calibration.term("host_cycle_ms"), calibration.term("verify_scale")
    assert abs(host.value / TRUTH.host_ms - 1) < 0.05 and abs(scale.value / TRUTH.scale - 1) < 0.05
    assert host.interval[0] <= TRUTH.host_ms <= host.interval[1]
    assert scale.interval[0] <= TRUTH.scale <= scale.interval[1]
    assert "fitted on 4 runs" in host.source and calibration.term("dp_sync_ms").source.startswith("shipped value")
    assert calibration.deployment == Deployment("vllm", "0.24", "H200", "meta-llama/Meta-Llama-3.1-8B", "tp")
    assert "leave-one-run-out median |error|" in out


def test_runs_at_one_concurrency_keep_the_shipped_host_time_and_say_so(deployment, tmp_path, cli):
    files = write_runs(deployment, tmp_path, concurrencies=(8,))
    status, _, err = cli("fit", *files, "--scenario", deployment, "--out", tmp_path / "fit", "--quiet")
    assert status == 0, err
    calibration = read_calibration(tmp_path / "fit" / "calibration.yaml")
    host = calibration.term("host_cycle_ms")
    assert host.value == 0.0 and host.interval is None and "every run at one concurrency" in host.source
    assert calibration.term("verify_scale").value > 1.0   # the level absorbs what host time added


def test_the_leave_one_run_out_error_is_out_of_sample(deployment, tmp_path, cli):
    """A run whose figures are 25% off the rest: fitted with them, its residual is shared out over the fit;
    left out, the others' terms predict it at the undistorted value, so its leave-one-out error is about the full
    -20% (1 / 1.25 - 1)."""
    files = write_runs(deployment, tmp_path, distort=(16, 1.25))
    status, _, err = cli("fit", *files, "--scenario", deployment, "--out", tmp_path / "fit", "--quiet")
    assert status == 0, err
    rows = pd.read_csv(tmp_path / "fit" / "fit_runs.csv")
    odd = rows[(rows.run == "c16.json") & (rows.metric == "output_throughput")].iloc[0]
    assert odd.loo_error == pytest.approx(1 / 1.25 - 1, abs=0.02)
    assert abs(odd.residual) < abs(odd.loo_error)
    others = rows[(rows.run != "c16.json") & (rows.metric == "output_throughput")]
    assert (others.residual.abs() > 0.005).any()   # fitted with the odd run, the others share its miss
    fit = yaml.safe_load((tmp_path / "fit" / "calibration.yaml").read_text())["fit"]
    assert fit["loo_max_abs_error"] == pytest.approx(0.25, abs=0.02)   # its TPOT, published / 1.25: +25% left out


def calibration_file(tmp_path, gpu="H200", version="0.24"):
    return write_calibration(Calibration(Deployment("vllm", version, gpu, "meta-llama/Meta-Llama-3.1-8B", "tp"), {
        "host_cycle_ms": Term(0.8, (0.7, 0.9), "fitted"), "verify_scale": Term(1.3, (1.2, 1.4), "fitted"),
        "ttft_per_request_ms": Term(3.0, (1.0, 5.0), "reported")}, [{"run": "a"}] * 3), tmp_path / f"{gpu}.yaml")


def test_run_applies_a_calibration_and_names_it(deployment, tmp_path, cli):
    path = calibration_file(tmp_path)
    status, out, err = cli("run", deployment, "--calibration", path, "--out", tmp_path / "run")
    assert status == 0, err
    assert f"calibration: calibrated on 3 runs of vllm 0.24, H200, meta-llama/Meta-Llama-3.1-8B, tp ({path})" in out
    assert "not applied: ttft_per_request_ms 3" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["calibration"] == str(path) and summary["calibration_transfer"] == "none"
    resolved = yaml.safe_load((tmp_path / "run" / "scenario.resolved.yaml").read_text())
    assert resolved["engine"]["host_overhead_ms"] == 0.8 and "scaled-x1.3" in resolved["hardware"]["profile"]
    plain = simulate(load_scenario(deployment)).summary["vllm_bench_serve.mean_tpot_ms"]
    assert summary["vllm_bench_serve.mean_tpot_ms"] > 1.25 * plain   # the scale and host time moved the step


def test_a_calibration_of_another_gpu_or_version_is_refused_unless_carried(deployment, tmp_path, cli):
    other = calibration_file(tmp_path, gpu="B200")
    status, _, err = cli("run", deployment, "--calibration", other, "--out", tmp_path / "run")
    assert status == 2 and err.count("\n") == 1
    assert "fitted for gpu B200 (this scenario: H200) (--calibration-transfer gpu carries it)" in err
    status, out, err = cli("run", deployment, "--calibration", other, "--calibration-transfer", "gpu",
                           "--out", tmp_path / "run")
    assert status == 0, err
    assert "transferred (--calibration-transfer; terms carried unchanged, error not checked): gpu B200 -> H200" in out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["calibration_transfer"] == "gpu B200 -> H200"
    old = calibration_file(tmp_path, version="0.20")
    with pytest.raises(CalibrationError, match=re.escape("engine_version 0.20 (this scenario: 0.24)")):
        apply_calibration(read_calibration(old), load_scenario(deployment), ("gpu",))
    status, _, err = cli("run", deployment, "--calibration", old, "--calibration-transfer", "vendor",
                         "--out", tmp_path / "run2")
    assert status == 2 and "cannot carry vendor" in err


def test_a_malformed_calibration_file_is_one_line(tmp_path, deployment, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: specplan-calibration/1\ndeployment: {engine: vllm}\nterms: {}\n")
    status, _, err = cli("run", deployment, "--calibration", bad, "--out", tmp_path / "run")
    assert status == 2 and err.count("\n") == 1 and "deployment must give" in err


def test_a_dp_attention_deployment_is_its_own_layout(deployment):
    scenario = load_scenario(deployment, ["engine.dp_attention={ranks: 2}"])
    assert deployment_of(scenario).layout == "dp-attention"


@pytest.mark.slow("runs a sweep")
def test_a_sweep_takes_the_calibration_and_records_it(tmp_path, cli):
    path = calibration_file(tmp_path)
    plan = REPO / "scenarios" / "own-runs" / "plan.yaml"
    status, out, err = cli("sweep", plan, "--calibration", path, "--out", tmp_path / "sweep", "--no-report",
                           "--workers", "1", "--set", "horizon.duration_s=4", "--set", "horizon.warmup_s=1",
                           "--set", "sweep.load={rate_per_s: [4]}")
    assert status == 0, err
    assert out.startswith("calibration: calibrated on 3 runs of vllm 0.24, H200")
    record = json.loads((tmp_path / "sweep" / "calibration.json").read_text())
    assert record["calibration"] == str(path) and "engine.host_overhead_ms=0.8" in record["overrides"]
    points = pd.read_csv(tmp_path / "sweep" / "points.csv")
    assert len(points) == 2


def test_a_server_log_alone_is_fitted_from_its_decode_levels(deployment, tmp_path, cli):
    """An SGLang log's 'Decode batch' lines at three running counts, written from the deployment at known terms
    (generation throughput = running x 1000 / TPOT), fit back to them."""
    sim = RunSimulator(deployment, [], tmp_path)
    lines = ["[2026-12-01 10:00:00 TP0] Prefill batch. #new-seq: 8, #new-token: 4096, #cached-token: 0, "
             "token usage: 0.01, #running-req: 0, #queue-req: 0,"]
    for c in (4, 16, 64):
        figures = sim.figures(MeasuredRun(f"log@{c}", "sglang_log", c, 4 * c, 512, 256), TRUTH)
        lines.append(f"[2026-12-01 10:00:0{c % 10} TP0] Decode batch. #running-req: {c}, #token: {c * 640}, token "
                     f"usage: 0.02, cuda graph: True, gen throughput (token/s): {figures['decode_tok_s']:.4f}, "
                     "#queue-req: 0,")
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    status, _, err = cli("fit", log, "--scenario", deployment, "--out", tmp_path / "fit", "--quiet")
    assert status == 0, err
    calibration = read_calibration(tmp_path / "fit" / "calibration.yaml")
    assert abs(calibration.term("host_cycle_ms").value / TRUTH.host_ms - 1) < 0.05
    assert abs(calibration.term("verify_scale").value / TRUTH.scale - 1) < 0.05


def test_metrics_scrapes_fit_the_drafters_acceptance_first(deployment, tmp_path, cli):
    files = write_runs(deployment, tmp_path, concurrencies=(4, 16))
    status, _, err = cli("fit", *files, "--scenario", deployment, "--metrics", REPO / "tests" / "data" /
                         "vllm_before.prom", REPO / "tests" / "data" / "vllm_after.prom", "--set", "drafter.family=eagle3",
                         "--set", "drafter.latency={kind: fixed, ms: 0.5}", "--set", "policy.name=static",
                         "--out", tmp_path / "fit", "--quiet")
    assert status == 0, err
    drafter = yaml.safe_load((tmp_path / "fit" / "drafter.yaml").read_text())["drafter"]
    assert drafter["block_size"] == 3 and drafter["acceptance"]["per_position"]["chat"] == [0.85, 0.7, 0.6]


def test_leaving_one_of_two_settings_out_fits_the_level_alone(deployment, tmp_path, monkeypatch):
    """With two runs, the run left out leaves one setting: host time and the level cannot both be fitted on it
    (one equation, two unknowns, any point of a valley fits), so the leave-one-out fit keeps the scenario's host
    time and fits the scale; the full fit, on both settings, fits both."""
    from specplan.simulator.study.fit import fitting
    from specplan.simulator.study.fit.readers import read_runs

    runs = [r for path in write_runs(deployment, tmp_path, concurrencies=(1, 32)) for r in read_runs(path)]
    calls = []
    real = fitting.solve

    def spy(sur, rows, fit_host, host_fixed):
        calls.append((len(set(np.asarray(sur.runs)[rows])), fit_host))
        return real(sur, rows, fit_host, host_fixed)

    monkeypatch.setattr(fitting, "solve", spy)
    result = fitting.fit_runs(fitting.RunSimulator(deployment, [], tmp_path), runs)
    assert calls[0] == (2, True) and calls[-2:] == [(1, False), (1, False)]
    assert result.loo[runs[0].name] != result.fitted[runs[0].name]


TUNE = {"name": "own-runs-tune", "seed": 11, "horizon": {"duration_s": 3, "warmup_s": 1},
        "hardware": {"profile": "builtin:h200-llama3.1-8b-vllm", "gpus_per_replica": 1},
        "engine": {"max_batch_requests": 8, "kv_capacity_tokens": 880_000},
        "drafter": {"family": "dspark", "block_size": 2, "acceptance": {"preset": "qwen3-8b", "domains": {"chat": 1.0}},
                    "latency": {"kind": "profile", "path": "builtin:h200-llama3.1-8b-vllm-drafter-2l"}},
        "policy": {"name": "static", "params": {"length": 2}},
        "workload": {"arrivals": {"kind": "closed_loop", "users": 2, "think_s": 0.0},
                     "prompt_tokens": {"kind": "fixed", "value": 200}, "output_tokens": {"kind": "fixed", "value": 40}},
        "sweep": {"load": {"users": [1, 4]}}}


def test_tune_takes_the_calibration_refuses_another_gpu_and_carries_it_when_told(tmp_path, cli):
    scenario = tmp_path / "tune.yaml"
    scenario.write_text(yaml.safe_dump(TUNE))
    other = calibration_file(tmp_path, gpu="B200")
    status, out, err = cli("tune", scenario, "--calibration", other, "--out", tmp_path / "refused", "--no-report")
    assert status == 2 and err.count("\n") == 1 and not out
    assert "fitted for gpu B200 (this scenario: H200) (--calibration-transfer gpu carries it)" in err
    args = ("--no-report", "--workers", "1", "--buckets", "1,4")
    status, out, err = cli("tune", scenario, "--calibration", other, "--calibration-transfer", "gpu",
                           "--out", tmp_path / "tune", *args)
    assert status == 0, err
    assert out.startswith(f"calibration: calibrated on 3 runs of vllm 0.24, B200, meta-llama/Meta-Llama-3.1-8B, tp "
                          f"({other})")
    assert "gpu B200 -> H200" in out and "tuned length schedule" in out
    record = json.loads((tmp_path / "tune" / "calibration.json").read_text())
    assert record["calibration"] == str(other) and record["calibration_transfer"] == "gpu B200 -> H200"
    resolved = yaml.safe_load((tmp_path / "tune" / "scenario.resolved.yaml").read_text())
    assert resolved["engine"]["host_overhead_ms"] == 0.8 and "scaled-x1.3" in resolved["hardware"]["profile"]
    status, _, err = cli("tune", scenario, "--uncalibrated", "--out", tmp_path / "plain", *args)
    assert status == 0, err
    calibrated, plain = (pd.read_csv(tmp_path / name / "points.csv") for name in ("tune", "plain"))
    assert calibrated["tpot_mean_ms"].min() > 1.2 * plain["tpot_mean_ms"].min()   # every tune point took it
