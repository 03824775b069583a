"""The fit's outputs: the calibration file (specplan.simulator.scenario.calibration), fit_runs.csv and fit.md.

`calibration_of` turns a FitResult into the file's terms with their provenance: a fitted term names its runs,
a term the runs leave unconstrained keeps its shipped value and says why. `run_rows` is each run's published
against fitted figure, the residual and the leave-one-run-out error; `error_summary` their medians.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from specplan.simulator.scenario.calibration import SHIPPED, Calibration, Deployment, Term
from specplan.simulator.study.fit.fitting import FitResult
from specplan.simulator.study.fit.runs import FIT_METRICS, MeasuredRun

REPORTED = (*FIT_METRICS, "mean_ttft_ms")


def run_rows(runs: list[MeasuredRun], result: FitResult) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        for metric in REPORTED:
            if metric not in run.figures:
                continue
            published, fitted = run.figures[metric], result.fitted[run.name][metric]
            loo = result.loo[run.name].get(metric, math.nan)
            rows.append({"run": run.name, "client": run.client, "concurrency": run.concurrency, "metric": metric,
                         "published": published, "fitted": fitted, "residual": fitted / published - 1.0,
                         "loo_predicted": loo, "loo_error": loo / published - 1.0})
    return rows


def error_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median |residual| and median |leave-one-run-out error| over the fit figures (TTFT apart)."""
    fit = [r for r in rows if r["metric"] in FIT_METRICS]
    ttft = [r for r in rows if r["metric"] == "mean_ttft_ms"]
    loo = [abs(r["loo_error"]) for r in fit if math.isfinite(r["loo_error"])]
    out = {"median_abs_residual": median_abs([r["residual"] for r in fit]),
           "loo_median_abs_error": median_abs([r["loo_error"] for r in fit]),
           "loo_max_abs_error": max(loo) if loo else math.nan}
    if ttft:
        out["ttft_median_abs_residual"] = median_abs([r["residual"] for r in ttft])
    return out


def median_abs(values: list[float]) -> float:
    finite = [abs(v) for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def calibration_of(result: FitResult, runs: list[MeasuredRun], deployment: Deployment, host_shipped: float,
                   rows: list[dict[str, Any]]) -> Calibration:
    """The calibration file's content: the fitted terms, the shipped ones and why, the runs and the errors."""
    names = ", ".join(r.name for r in runs)
    concurrencies = sorted({r.concurrency for r in runs})
    fitted_on = f"fitted on {len(runs)} runs ({names}) at concurrency {', '.join(map(str, concurrencies))}"
    if result.fitted_host:
        host = Term(round(result.point.host_ms, 4), rounded(result.host_interval), fitted_on)
    else:
        host = Term(host_shipped, None, f"{SHIPPED} (every run at one concurrency and length: host time and the "
                    "kernels' level move its figures alike; the scenario's own engine.host_overhead_ms kept)")
    terms = {"host_cycle_ms": host,
             "verify_scale": Term(round(result.point.scale, 5), rounded(result.scale_interval), fitted_on),
             "dp_sync_ms": Term(None, None, f"{SHIPPED} (within one layout a per-step DP sync is per-step host "
                                f"time: the host cycle {'of this dp-attention fit includes it' if deployment.layout != 'tp' else 'holds none'})"),
             "eager_surcharge_ms": Term(None, None, f"{SHIPPED} (the runs do not separate eager steps from graph "
                                       "steps; the engine's own rule prices them)"),
             "extend_op_us": Term(None, None, f"{SHIPPED} (not fitted by specplan fit: the runs were simulated at "
                                  "the engine's own host cost per kernel of a step carrying prompt tokens, which the "
                                  "file keeps)")}
    if result.ttft_gap_ms is not None:
        gaps = [r["published"] - r["fitted"] for r in rows if r["metric"] == "mean_ttft_ms"]
        terms["ttft_per_request_ms"] = Term(round(max(0.0, result.ttft_gap_ms), 3),
                                            (round(max(0.0, min(gaps)), 3), round(max(0.0, max(gaps)), 3)),
                                            f"median of published - fitted mean TTFT over {len(gaps)} runs "
                                            f"({result.ttft_gap_ms:+.2f} ms before the floor at 0); reported, "
                                            "not applied: no engine key prices it")
    run_list = [{"run": r.name, "client": r.client, "concurrency": r.concurrency, "num_prompts": r.num_prompts,
                 "input_tokens": r.input_tokens, "output_tokens": r.output_tokens} for r in runs]
    fit = {**{k: round(v, 5) for k, v in error_summary(rows).items()}, "simulations": result.simulations}
    return Calibration(deployment, terms, run_list, fit)


def rounded(interval: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if interval is None else (round(interval[0], 5), round(interval[1], 5))


def report_text(calibration: Calibration, rows: list[dict[str, Any]], scenario: str) -> str:
    """fit.md: the deployment, the terms, each run's published vs fitted figure, and the errors."""
    fit = calibration.fit
    lines = [f"# specplan fit: {calibration.deployment.describe()}", "", f"Deployment: `{scenario}`.", "",
             "| term | value | interval | source |", "| --- | --- | --- | --- |"]
    for name, term in calibration.terms.items():
        interval = "-" if term.interval is None else f"{term.interval[0]:.4g} - {term.interval[1]:.4g}"
        value = "-" if term.value is None else f"{term.value:.4g}"
        lines.append(f"| {name} | {value} | {interval} | {term.source} |")
    lines += ["", "| run | metric | published | fitted | residual | leave-one-out |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['run']} | {r['metric']} | {r['published']:.4g} | {r['fitted']:.4g} | {r['residual']:+.1%} | "
              f"{r['loo_error']:+.1%} |" for r in rows]
    lines += ["", f"Median |residual| {fit['median_abs_residual']:.1%} (calibrated: fitted on these runs); "
              f"leave-one-run-out median |error| {fit['loo_median_abs_error']:.1%}, largest "
              f"{fit['loo_max_abs_error']:.1%} (each run predicted by the terms fitted on the others).", ""]
    return "\n".join(lines)


def write_rows(rows: list[dict[str, Any]], path: Path) -> None:
    # pandas for the CSV: imported where the table is written
    import pandas as pd

    pd.DataFrame(rows).to_csv(path, index=False)
