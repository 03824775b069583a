"""Sim-to-real fidelity: specplan's predictions against the reference engine, point by point.

    result = run_fidelity("scenarios/fidelity.yaml", FidelitySettings(), out_dir)

The scenario's `sweep:` block names the grid (variants = policies, `load` =
closed-loop users or Poisson rates), exactly as for `specplan sweep`. Then:

1. profile  the engine's own target and drafter on this machine with the
            harness (specplan.validation.capture): profiles/p00/{target,drafter}.csv
2. host     calibrate, per policy, the host time of a step (everything in
            it that is neither forward: admission, drafting models, the
            policy, layouts, cache bookkeeping, the event loop), measured by
            the engine on runs that are not fidelity points: their own
            seeds, the lowest and the highest load; least squares
            a + b·requests over both (one load's batch sizes barely vary,
            so its slope b was an extrapolation to the other loads)
3. points   for every variant × load: profile, run the real engine
            (`ReferenceEngine.run()` measures), profile again; then one
            scenario priced with the mean of the two bracketing profiles
            (hardware.profile = target.csv, drafter.latency = {kind: profile,
            path: drafter.csv}, engine.host_overhead_ms / _per_request_ms)
            and the same seed and workload: `simulate()` predicts. A shared
            machine's speed drifts over minutes; bracketing each run between
            two captures follows it (exactly, if the drift is linear)
4. drift    each point records after / before, how far the machine moved
            during its run

Relative error = (predicted − measured) / measured, for throughput and p50
tokens/s/user; the summary's median and maximum run over both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.modelshape import load_shape
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import Scenario, resolved_mapping, scenario_from_mapping
from specplan.simulator.study.points import Point, SweepDesign, design_sweep
from specplan.validation.capture import (
    CaptureSettings,
    bracket,
    capture_profiles,
    drift_ratio,
    longest_request_tokens,
)
from specplan.validation.diagnose import step_time_check

Progress = Callable[[str], None]
DEFAULT_SHAPE = Path(__file__).resolve().parent / "shapes" / "small-cpu.yaml"


@dataclass(frozen=True)
class FidelitySettings:
    """What to measure with: the engine's model shape, torch threads, harness effort."""

    model: str = str(DEFAULT_SHAPE)
    threads: int = 1
    drafter_layers: int = 1
    repeats: int = 8
    warmup: int = 2
    context_rows: int = 3
    tokens_per_request: int = 3
    calibration_s: float = 10.0
    seed_offset: int = 1000
    profile_each_point: bool = True
    tokens: tuple[int, ...] = ()
    rounds: int = 2


@dataclass
class FidelityResult:
    points: list[dict[str, Any]]
    summary: dict[str, Any]
    out_dir: Path
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The `--json` document: points, median_abs_error, max_abs_error (+ context)."""
        return clean({"points": self.points, **self.summary})


def relative_error(predicted: float, measured: float) -> float:
    if not (math.isfinite(predicted) and math.isfinite(measured)) or measured == 0:
        return math.nan
    return (predicted - measured) / measured


def point_row(point: Point, measured: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    """One row of the result: the issue's six keys, their errors, and what explains them."""
    row = {
        "policy": point.label,
        "load": point.load,
        "measured_throughput": measured["throughput_tokens_per_s"],
        "predicted_throughput": predicted["throughput_tokens_per_s"],
        "measured_tps_p50": measured["tps_user_p50"],
        "predicted_tps_p50": predicted["tps_user_p50"],
    }
    row["throughput_error"] = relative_error(row["predicted_throughput"], row["measured_throughput"])
    row["tps_p50_error"] = relative_error(row["predicted_tps_p50"], row["measured_tps_p50"])
    row["load_kind"] = point.load_kind
    row["policy_name"] = point.scenario.policy.name
    for key in ("mean_step_ms", "mean_batch_requests", "mean_accepted_per_step",
                "mean_verify_tokens_per_request_step", "requests_completed_in_window"):
        row[f"measured_{key}"] = measured.get(key)
        row[f"predicted_{key}"] = predicted.get(key)
    return row


def error_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errors = np.array([r[k] for r in rows for k in ("throughput_error", "tps_p50_error")], dtype=float)
    errors = np.abs(errors[np.isfinite(errors)])
    by_metric = {k: float(np.median(np.abs([r[k] for r in rows]))) for k in ("throughput_error", "tps_p50_error")}
    return {
        "median_abs_error": float(np.median(errors)) if errors.size else math.nan,
        "max_abs_error": float(errors.max()) if errors.size else math.nan,
        "median_abs_error_by_metric": by_metric,
        "errors_counted": int(errors.size),
    }


class Fidelity:
    """One fidelity study: design its points, measure the machine, run every point on both sides."""

    def __init__(self, source: str | Path, overrides: list[str], settings: FidelitySettings,
                 out_dir: Path, progress: Progress | None = None) -> None:
        # absolute: profile paths written into each point's scenario resolve against it (a relative --out doubled)
        self.settings, self.out_dir = settings, Path(out_dir).resolve()
        self.progress = progress or (lambda _msg: None)
        self.design: SweepDesign = design_sweep(source, overrides)
        # the reference engine imports torch
        from specplan.validation.engine import check_engine_scenario

        self.shape = load_shape(settings.model)
        for point in self.design.points:
            check_engine_scenario(point.scenario)
        if len(self.design.points) < 1:
            raise SpecplanError("fidelity: the scenario's sweep has no points")

    def run(self) -> FidelityResult:
        # torch: the reference engine's forwards
        import torch

        torch.set_num_threads(self.settings.threads)
        started = time.perf_counter()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        host, before = self.calibrate_host(self.capture(self.out_dir / "profiles" / "p00"))
        rows, checks = [], []
        for i, point in enumerate(self.design.points, start=1):
            row, check, before = self.run_point(point, before, host[point.label], i)
            rows.append(row)
            checks.append(check)
        drift = drift_summary(checks)
        summary = {**error_summary(rows), **self.context(host, drift, time.perf_counter() - started)}
        return FidelityResult(rows, summary, self.out_dir, {"step_time_checks": checks})

    def run_point(self, point: Point, before: tuple[Path, Path], host: tuple[float, float],
                  index: int) -> tuple[dict, dict, tuple[Path, Path]]:
        """Measure one point, profile again, predict it with the mean of the two profiles.

        The engine runs with the profile taken before it (its policy reads the
        steps/s table); the simulator prices the run with the bracketing mean.
        Returns the row, the step-time check and the profile taken after (the
        next point's "before").
        """
        measured, steps = self.engine_run(self.measured_scenario(point.scenario, *before, host))
        each = self.settings.profile_each_point
        after = self.capture(self.out_dir / "profiles" / f"p{index + 1:02d}") if each else before
        target_csv, drafter_csv = bracket(before, after, self.out_dir / "profiles" / point_slug(point))
        scenario = self.measured_scenario(point.scenario, target_csv, drafter_csv, host)

        row = point_row(point, measured, simulate(scenario).summary)
        drift = drift_ratio(before[0], after[0]) if each else None  # one profile for every point: not measured
        check = {"policy": point.label, "load": point.load, "drift_ratio": drift,
                 **step_time_check(steps, target_csv, drafter_csv, host, scenario.drafter.block_size)}
        drift_text = (f"machine drift over the run {drift:.3f}" if drift is not None
                      else "machine drift not measured (--profile-once)")
        self.progress(f"{point.label:>14} load {point.load:g}: throughput measured "
                      f"{row['measured_throughput']:.1f} predicted {row['predicted_throughput']:.1f} "
                      f"({row['throughput_error']:+.1%}); p50 tok/s/user {row['measured_tps_p50']:.1f} "
                      f"vs {row['predicted_tps_p50']:.1f} ({row['tps_p50_error']:+.1%}); {drift_text}")
        return row, check, after

    # ---- measurements of the machine ----------------------------------------------
    def capture(self, folder: Path) -> tuple[Path, Path]:
        self.progress(f"profiling {self.shape.name} and its drafter with the harness -> {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        return capture_profiles([pt.scenario for pt in self.design.points], self.capture_settings(), folder)

    def capture_settings(self) -> CaptureSettings:
        s = self.settings
        return CaptureSettings(self.shape, s.drafter_layers, s.repeats, s.warmup, s.context_rows,
                               s.tokens_per_request, s.tokens, s.rounds)

    def calibrate_host(self, before: tuple[Path, Path]) -> tuple[dict[str, tuple[float, float]], tuple[Path, Path]]:
        """Per label: host ms per step = a + b·requests, fitted to the host time the engine
        measures (step time outside its two forwards: admission, drafting models, the
        policy, layouts, cache bookkeeping, the event loop) on runs that are not fidelity
        points (their own seed, `calibration_s` long each) at the label's lowest and highest
        loads, so that the per-request slope b is measured across the batch sizes the points
        span rather than extrapolated from one load's narrow range of batch sizes.

        Host time is measured directly, so the fit does not depend on the profiles.
        The forwards' own slowdown inside the serving loop against the harness's
        back-to-back timing is left out: `step_time_check` reports it per point.
        Returns the fits and a profile taken after the runs (the first point's "before").
        """
        host: dict[str, tuple[float, float]] = {}
        for label in self.design.variant_scenarios:
            runs = [self.engine_run(s)[1] for s in self.calibration_scenarios(label, before)]
            requests = np.concatenate([steps["batch_requests"].to_numpy() for steps in runs])
            overhead = np.concatenate([steps["overhead_ms"].to_numpy() for steps in runs])
            host[label] = fit_host_overhead(requests, overhead)
            self.progress(f"host time per step of {label}: {host[label][0]:.3f} ms + {host[label][1]:.4f} ms/request")
        after = self.capture(self.out_dir / "profiles" / "p01") if self.settings.profile_each_point else before
        return host, after

    def calibration_scenarios(self, label: str, profiles: tuple[Path, Path]) -> list[Scenario]:
        """The label's lowest and highest loads, each with its own seed and a `calibration_s` horizon."""
        loads = [p.scenario for p in self.design.points if p.label == label]
        ends = [loads[0]] if len(loads) == 1 else [loads[0], loads[-1]]
        return [self.calibration_scenario(s, profiles, i) for i, s in enumerate(ends)]

    def calibration_scenario(self, point: Scenario, profiles: tuple[Path, Path], index: int = 0) -> Scenario:
        horizon = dataclasses.replace(point.horizon, duration_s=self.settings.calibration_s,
                                      warmup_s=min(point.horizon.warmup_s, self.settings.calibration_s / 2))
        calib = dataclasses.replace(point, seed=point.seed + self.settings.seed_offset + index, horizon=horizon)
        return self.measured_scenario(calib, *profiles, (0.0, 0.0))

    # ---- the two sides ------------------------------------------------------------
    def measured_scenario(self, scenario: Scenario, target_csv: Path, drafter_csv: Path,
                          host: tuple[float, float]) -> Scenario:
        """The point's scenario priced with this machine's measurements."""
        raw = resolved_mapping(scenario)
        raw.pop("sweep", None)
        raw["hardware"]["profile"] = str(target_csv)
        raw["drafter"]["latency"] = {"kind": "profile", "path": str(drafter_csv)}
        raw["engine"]["host_overhead_ms"] = host[0]
        raw["engine"]["host_overhead_per_request_ms"] = host[1]
        if raw["engine"].get("attention") == "padded":  # the harness measured attention at this many queries per request
            raw["engine"]["attention_profiled_queries"] = self.settings.tokens_per_request
        return scenario_from_mapping(raw, self.out_dir, source=scenario.source)

    def engine_run(self, scenario: Scenario) -> tuple[dict[str, Any], Any]:
        # the reference engine and its runner import torch
        from specplan.validation.engine import ReferenceEngine
        from specplan.validation.runner import TorchRunner

        block_size = scenario.drafter.block_size if scenario.drafter.speculates else 0
        runner = TorchRunner(self.shape, scenario.engine.max_batch_requests,
                             longest_request_tokens(scenario, block_size), self.settings.drafter_layers,
                             block_size, seed=scenario.seed, threads=self.settings.threads)
        result = ReferenceEngine(scenario, runner, load_profile(scenario.hardware.profile)).run()
        return result.summary, result.steps

    def context(self, host: dict[str, tuple[float, float]], drift: dict[str, Any], wall_s: float) -> dict[str, Any]:
        # torch, and the harness that imports it: the device the run measured
        import torch

        from specplan.hwprofiles.harness import device_name

        return {
            "scenario": self.design.source,
            "device": device_name(torch.device("cpu")),
            "model": self.shape.describe(),
            "torch": torch.__version__,
            "settings": dataclasses.asdict(self.settings),
            "host_overhead_ms": {k: {"per_step": a, "per_request": b} for k, (a, b) in host.items()},
            "profile_drift": drift,
            "load_average": list(os.getloadavg()),
            "wall_s": wall_s,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }


def point_slug(point: Point) -> str:
    """A folder name for a point's profiles: label and load, filesystem-safe."""
    text = f"{point.label}-{point.load:g}" if point.load is not None else point.label
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)


def drift_summary(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """How much the machine's speed moved between each point's profile and the end of its run."""
    ratios = np.array([c["drift_ratio"] for c in checks if c["drift_ratio"] is not None], dtype=float)
    if not ratios.size:
        return {}
    return {"ratio": float(np.median(ratios)), "worst": float(ratios[np.argmax(np.abs(ratios - 1))]),
            "per_point": ratios.round(3).tolist()}


def fit_host_overhead(requests: np.ndarray, overhead_ms: np.ndarray) -> tuple[float, float]:
    """Least squares overhead_ms ≈ a + b·requests over a run's steps (a, b ≥ 0)."""
    r, y = np.asarray(requests, dtype=float), np.asarray(overhead_ms, dtype=float)
    if r.size < 2 or np.ptp(r) == 0:
        return (float(np.median(y)) if y.size else 0.0, 0.0)
    b, a = np.polyfit(r, y, 1)
    if b < 0:
        return max(float(np.mean(y)), 0.0), 0.0
    if a < 0:
        return 0.0, max(float(np.sum(r * y) / np.sum(r * r)), 0.0)
    return float(a), float(b)


def write_result(result: FidelityResult, out_dir: Path) -> Path:
    """fidelity.json (points + summary + step-time checks) and fidelity.png (the scatter)."""
    # specplan.validation.plot imports matplotlib
    from specplan.validation.plot import save_fidelity_plot

    doc = {**result.as_json(), **clean(result.details)}
    path = out_dir / "fidelity.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    save_fidelity_plot(result.points, out_dir / "fidelity.png", result.summary)
    return path


def spread(results: list[FidelityResult]) -> dict[str, Any]:
    """The check's spread over repeated runs: each run's median and max |error|, their median and range."""
    medians = [r.summary["median_abs_error"] for r in results]
    maxima = [r.summary["max_abs_error"] for r in results]
    return {"runs": len(results), "median_abs_error_per_run": medians, "max_abs_error_per_run": maxima,
            "median_abs_error": float(np.median(medians)), "median_abs_error_range": [min(medians), max(medians)],
            "max_abs_error": float(np.median(maxima)), "max_abs_error_range": [min(maxima), max(maxima)]}


def run_fidelity_runs(source: str | Path, settings: FidelitySettings, out_dir: str | Path, runs: int,
                      overrides: list[str] | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """The whole check `runs` times (DIR/run-1 ...), each profiled and calibrated anew; writes
    DIR/fidelity-runs.json with the spread, so one lucky run cannot stand as the figure."""
    out = Path(out_dir)
    results = []
    with removed_on_failure(out):
        for i in range(1, runs + 1):
            if progress:
                progress(f"fidelity run {i} of {runs}")
            results.append(run_fidelity(source, settings, out / f"run-{i}", overrides, progress))
        doc = spread(results)
        out.mkdir(parents=True, exist_ok=True)
        (out / "fidelity-runs.json").write_text(json.dumps(clean(doc), indent=1) + "\n")
    return doc


def run_fidelity(source: str | Path, settings: FidelitySettings, out_dir: str | Path,
                 overrides: list[str] | None = None, progress: Progress | None = None) -> FidelityResult:
    """Profile, calibrate, run every point on both sides; write fidelity.json and fidelity.png.

    A run that fails or is interrupted removes what it wrote (the folder it created, or what it created inside
    an existing one): a half-profiled folder is no result and no cache.
    """
    out = Path(out_dir)
    study = Fidelity(source, list(overrides or []), settings, out, progress)
    with removed_on_failure(out):
        result = study.run()
        write_result(result, out)
    return result


@contextlib.contextmanager
def removed_on_failure(out: Path) -> Iterator[None]:
    """On any exception, remove `out` if this run created it, else every file and folder it created there."""
    existed = out.exists()
    before = set(out.rglob("*")) if existed else set()
    try:
        yield
    except BaseException:
        if not existed:
            shutil.rmtree(out, ignore_errors=True)
        else:
            new = set(out.rglob("*")) - before
            for path in (p for p in new if p.parent not in new):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        raise
