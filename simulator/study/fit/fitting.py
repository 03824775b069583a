"""Fitting a deployment's host time and verify scale to its runs, with intervals and a leave-one-run-out error.

Each run is simulated as its tool drove it (`run_scenario`: the deployment with a bench client at the run's
concurrency, prompt count and mean lengths). A run's figures are time-like in the two terms: a step costs
`verify_scale x kernels(B) + host_ms`, so TPOT and the time per output token (1 / throughput) are close to
affine in (host_ms, verify_scale) for the run's fixed batch. The fit:

1. linearise: each run simulated at the current point and at a step in each term (three simulations per
   run), giving each figure's value and slopes;
2. solve: the point minimising Σ log(simulated / published)² over every fit figure (`FIT_METRICS`) on the
   linear surrogate, by a dense grid (host 0..HOST_MAX_MS, scale SCALE_RANGE) refined around its best cell;
3. repeat 1-2 once from the solution (the surrogate re-centred where it is used), then simulate every run
   at the final point: those are the fitted figures and the residuals.

Intervals: the runs' own spread, a bootstrap over runs (resampled with replacement, each resample solved on
the final surrogate; the 2.5-97.5% range). Leave one run out: each run's figures simulated at the point
fitted on the others (on the final surrogate; host time kept at the scenario's own where the others sit at
one setting), so the error is out of sample for that run.

What the runs do not constrain keeps its shipped value: with every run at one concurrency and one length
the per-step host time and the kernels' level move every figure alike (one equation, two unknowns), so
only the scale is fitted and host time stays the scenario's own; the file says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.records.bench_metrics import metric_key
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.calibration import scaled_profile_overrides
from specplan.simulator.scenario.spec import Scenario
from specplan.simulator.study.fit.runs import FIT_METRICS, MeasuredRun

HOST_MAX_MS = 20.0
SCALE_RANGE = (0.2, 5.0)
STEP_HOST_MS, STEP_SCALE = 0.5, 0.1    # the linearisation's steps
BOOTSTRAPS = 200
HOST_RESOLUTION_MS, SCALE_RESOLUTION = 0.002, 0.0005   # the solver's last grid cell (four refinements of 41 points)
INTERVAL = (2.5, 97.5)


@dataclass(frozen=True)
class Point:
    """The terms a run is simulated at."""

    host_ms: float
    scale: float


@dataclass
class FitResult:
    """The fitted point, which terms the runs constrained, intervals, and every run's figures."""

    point: Point
    fitted_host: bool
    host_interval: tuple[float, float] | None
    scale_interval: tuple[float, float]
    fitted: dict[str, dict[str, float]]        # run -> metric -> simulated at the point
    loo: dict[str, dict[str, float]]           # run -> metric -> simulated at the point fitted without it
    ttft_gap_ms: float | None                  # median published - simulated mean TTFT (ms)
    simulations: int


class RunSimulator:
    """Simulates the runs on a deployment (the scenario file and its overrides), caching each point."""

    def __init__(self, scenario_path: str | Path, overrides: list[str], work: Path) -> None:
        self.path, self.overrides, self.work = str(scenario_path), list(overrides), work
        self.base = load_scenario(self.path, self.overrides)
        self.cache: dict[tuple[str, Point], dict[str, float]] = {}
        self.count = 0

    def figures(self, run: MeasuredRun, point: Point) -> dict[str, float]:
        key = (run.name, point)
        if key not in self.cache:
            self.cache[key] = run_figures(run, simulate(self.scenario(run, point)).summary)
            self.count += 1
        return self.cache[key]

    def scenario(self, run: MeasuredRun, point: Point) -> Scenario:
        return load_scenario(self.path, [*self.overrides, *run_overrides(run), *self.term_overrides(point)])

    def term_overrides(self, point: Point) -> list[str]:
        out = [f"engine.host_overhead_ms={point.host_ms!r}"]
        if point.scale != 1.0:
            out += scaled_profile_overrides(self.base, point.scale, self.work / "profiles")
        return out


def run_overrides(run: MeasuredRun) -> list[str]:
    """The deployment driven as the run's tool drove it (warm-ups left out: they are not in its figures)."""
    return [f"workload.arrivals={{kind: bench_client, num_prompts: {run.num_prompts}, max_concurrency: "
            f"{run.concurrency}, client: {run.bench_client}, warmup_requests: 0}}",
            f"workload.prompt_tokens={{kind: fixed, value: {run.input_tokens}}}",
            f"workload.output_tokens={{kind: fixed, value: {run.output_tokens}}}",
            f"horizon.requests={run.num_prompts}"]


def run_figures(run: MeasuredRun, summary: dict) -> dict[str, float]:
    """The simulated run's figures in the published run's names and units."""
    tpot = float(summary[metric_key(run.bench_client, "mean_tpot_ms")])
    return {"output_throughput": float(summary[metric_key(run.bench_client, "output_throughput_tok_s")]),
            "mean_tpot_ms": tpot, "mean_ttft_ms": float(summary[metric_key(run.bench_client, "mean_ttft_ms")]),
            "decode_tok_s": run.concurrency * 1000.0 / tpot if tpot > 0 else float("nan")}


def time_like(metric: str, value: float) -> float:
    """A figure as a time (throughputs inverted), so it is close to affine in the terms."""
    return 1.0 / value if metric in ("output_throughput", "decode_tok_s") else value


@dataclass
class Surrogate:
    """Per fit figure: published time, simulated time at the centre, slopes in host and scale."""

    runs: list[str]
    published: np.ndarray
    centre: np.ndarray
    d_host: np.ndarray
    d_scale: np.ndarray
    at: Point

    def log_errors(self, hosts: np.ndarray, scales: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """log(simulated / published) of `rows` at each (host, scale) pair: shape (points, rows)."""
        sim = (self.centre[rows] + np.outer(hosts - self.at.host_ms, self.d_host[rows])
               + np.outer(scales - self.at.scale, self.d_scale[rows]))
        return np.log(np.maximum(sim, 1e-9) / self.published[rows])


def linearise(sim: RunSimulator, runs: list[MeasuredRun], at: Point) -> Surrogate:
    names, published, centre, d_host, d_scale = [], [], [], [], []
    host_step = Point(at.host_ms + STEP_HOST_MS, at.scale)
    scale_step = Point(at.host_ms, at.scale + STEP_SCALE)
    for run in runs:
        base, up_h, up_s = sim.figures(run, at), sim.figures(run, host_step), sim.figures(run, scale_step)
        for metric, value in run.figures.items():
            if metric not in FIT_METRICS:
                continue
            names.append(run.name)
            published.append(time_like(metric, value))
            c = time_like(metric, base[metric])
            centre.append(c)
            d_host.append((time_like(metric, up_h[metric]) - c) / STEP_HOST_MS)
            d_scale.append((time_like(metric, up_s[metric]) - c) / STEP_SCALE)
    arrays = [np.asarray(v, dtype=float) for v in (published, centre, d_host, d_scale)]
    return Surrogate(names, arrays[0], arrays[1], arrays[2], arrays[3], at)


def solve(sur: Surrogate, rows: np.ndarray, fit_host: bool, host_fixed: float) -> Point:
    """The point minimising the squared log errors of `rows` on the surrogate (grid, then a finer grid)."""
    h_lo, h_hi = (0.0, HOST_MAX_MS) if fit_host else (host_fixed, host_fixed)
    s_lo, s_hi = SCALE_RANGE
    best = Point(host_fixed, 1.0)
    for _ in range(4):
        hosts = np.linspace(h_lo, h_hi, 41 if fit_host else 1)
        scales = np.linspace(s_lo, s_hi, 41)
        hh, ss = (a.ravel() for a in np.meshgrid(hosts, scales, indexing="ij"))
        cost = np.sum(sur.log_errors(hh, ss, rows) ** 2, axis=1)
        i = int(np.argmin(cost))
        best = Point(float(hh[i]), float(ss[i]))
        dh, ds = (h_hi - h_lo) / 40 * 2, (s_hi - s_lo) / 40 * 2
        h_lo, h_hi = max(0.0, best.host_ms - dh), best.host_ms + dh if fit_host else best.host_ms
        s_lo, s_hi = max(SCALE_RANGE[0], best.scale - ds), min(SCALE_RANGE[1], best.scale + ds)
    return best


def constrains_host(runs: list[MeasuredRun]) -> bool:
    """Runs at two or more settings (concurrency or lengths) tell per-step host time from the kernels' level."""
    return len({(r.concurrency, r.input_tokens, r.output_tokens) for r in runs}) >= 2


def fit_runs(sim: RunSimulator, runs: list[MeasuredRun], progress: Callable[[str], None] = lambda _: None,
             seed: int = 0) -> FitResult:
    """Fit the deployment's host time and verify scale to `runs` (see the module docstring)."""
    fit_host = constrains_host(runs)
    host0 = sim.base.engine.host_overhead_ms
    point = Point(host0, 1.0)
    sur = linearise(sim, runs, point)
    everything = np.arange(len(sur.runs))
    for _ in range(2):
        point = solve(sur, everything, fit_host, host0)
        sur = linearise(sim, runs, point)
        progress(f"host {point.host_ms:.3f} ms, scale {point.scale:.4f} ({sim.count} simulations)")
    fitted = {run.name: sim.figures(run, point) for run in runs}
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    names = np.asarray(sur.runs)
    run_names = [r.name for r in runs]
    settings = {r.name: (r.concurrency, r.input_tokens, r.output_tokens) for r in runs}
    boots = []
    for _ in range(BOOTSTRAPS):
        chosen = rng.choice(run_names, size=len(run_names), replace=True)
        if fit_host and len({settings[n] for n in chosen}) < 2:
            continue  # a resample of one setting cannot tell host time from the level: it says nothing of either
        rows = np.concatenate([np.flatnonzero(names == n) for n in chosen])
        boots.append(solve(sur, rows, fit_host, host0))
    boots.append(point)
    hosts, scales = np.array([b.host_ms for b in boots]), np.array([b.scale for b in boots])
    loo = {}
    for run in runs:
        rows = np.flatnonzero(names != run.name)
        others = [r for r in runs if r.name != run.name]   # what the others constrain: host time too, or the level
        loo[run.name] = sim.figures(run, solve(sur, rows, constrains_host(others), host0)) if len(rows) else {}
    gaps = [run.figures["mean_ttft_ms"] - fitted[run.name]["mean_ttft_ms"] for run in runs
            if "mean_ttft_ms" in run.figures]
    return FitResult(point, fit_host, spread(hosts, HOST_RESOLUTION_MS, 0.0) if fit_host else None,
                     spread(scales, SCALE_RESOLUTION, SCALE_RANGE[0]), fitted, loo,
                     float(np.median(gaps)) if gaps else None, sim.count)


def spread(values: np.ndarray, resolution: float, floor: float) -> tuple[float, float]:
    """The bootstrap's 2.5-97.5% range, widened by the solver's resolution (its last grid cell)."""
    low, high = np.percentile(values, INTERVAL)
    return max(floor, float(low) - resolution), float(high) + resolution
