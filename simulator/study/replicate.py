"""Predictions against published measurements: run every case, compare, test the assumed acceptance, calibrate.

    result = replicate(cases, out_dir)                  predicted: no parameter looked at a figure
    result = replicate(cases, out_dir, calibrate=True)  adds "calibrated" and "split" errors

Place in the data flow: the cases (specplan.simulator.study.published) →
a row per figure with its status (`case_runner.availability`,
`figure_status`) → each runnable figure predicted with nothing fitted
(`CaseRunner.predict`) → the acceptance sensitivity → with `calibrate`, the
fits of `calibration.py` → `Replication`, which reports/replication.py
writes (its statistics from `replication_stats.py`). Beside them, and in no
statistic, the version spread: each case's older published run paired with
its newest figures (`version_spread.py`).

**Acceptance sensitivity.** A case whose acceptance is not published says
in its source.yaml which preset stands in and the AL it implies
(`acceptance_assumption`), with override lists moving that AL by -10% and
+10% (`sensitivity.al_minus_10`, `al_plus_10`). Each of its figures is
predicted again under each list (nothing fitted): the rows gain
`al_minus_10_value` / `al_plus_10_value` (in the published unit) and
`al_minus_10_change` / `al_plus_10_change` (relative to the prediction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specplan.simulator.study.calibration import (
    FIT_MODES,
    HOST_GRID_MS,
    SCALE_GRID,
    Fit,
    fit_groups,
    split_params,
    value_at,
)
from specplan.simulator.study.case_runner import (
    CaseRunner,
    Params,
    availability,
    base_row,
    case_label,
    figure_status,
    in_unit,
    signed_error,
)
from specplan.simulator.study.published import RATIO_METRICS, Case, Figure
from specplan.simulator.study.version_spread import spread_rows

SENSITIVITIES = ("al_minus_10", "al_plus_10")


@dataclass
class Replication:
    """Every figure's prediction, and the fitted parameters per group."""

    rows: pd.DataFrame
    params: dict[str, dict[str, Params]] = field(default_factory=dict)  # mode -> group -> params
    cases: dict[str, str] = field(default_factory=dict)  # case -> "runs" or why it cannot
    assumed_al: dict[str, str] = field(default_factory=dict)  # case -> the acceptance it assumes
    spread: pd.DataFrame = field(default_factory=pd.DataFrame)  # stale vs newest published figures, apart


Entry = tuple[Case, Figure, CaseRunner]


def replicate(cases: Iterable[Case], out_dir: str | Path, calibrate: bool = False,
              host_grid: tuple[float, ...] = HOST_GRID_MS, scale_grid: tuple[float, ...] = SCALE_GRID,
              progress: Callable[[str], None] = lambda _m: None, workers: int = 1) -> Replication:
    """Predict every figure of every case (see the module docstring)."""
    out = Path(out_dir)
    cases = list(cases)
    rows, runnable = statuses(cases, out, progress)
    for entry in runnable:
        row = rows[id(entry[1])]
        add_prediction(row, entry[1], entry[2].predict(entry[1], Params()), "predicted")
        add_sensitivity(row, entry)
    params: dict[str, dict[str, Params]] = {}
    if calibrate and runnable:
        params = calibrations(runnable, rows, out, host_grid, scale_grid, progress, workers)
    return Replication(pd.DataFrame(list(rows.values())), params, {case.name: case_status(case) for case in cases},
                       {case.name: assumed_al(case) for case in cases if "acceptance_assumption" in case.source},
                       spread_rows(cases))


def case_status(case: Case) -> str:
    reason = availability(case)
    if reason:
        return reason
    label = case_label(case)
    return f"runs ({label})" if label else "runs"


def statuses(cases: list[Case], out: Path, progress: Callable[[str], None]) -> tuple[dict[int, dict], list[Entry]]:
    """A row per figure with its status; the figures that can run."""
    rows: dict[int, dict[str, Any]] = {}
    runnable: list[Entry] = []
    for case in cases:
        runner = CaseRunner(case, out)
        reason = availability(case)
        progress(f"{case.name}: {reason or 'runs'}")
        for figure in case.figures:
            status = reason or figure_status(runner, figure)
            rows[id(figure)] = {**base_row(case, figure), "status": status or "ok"}
            if status is None:
                runnable.append((case, figure, runner))
    return rows, runnable


def assumed_al(case: Case) -> str:
    entry = case.source["acceptance_assumption"]
    return f"AL {entry['implied_al']} assumed: the {entry['preset']} {entry['family']} preset at {entry['drafted_tokens']} drafts"


def add_prediction(row: dict[str, Any], figure: Figure, value: float, mode: str) -> None:
    row[f"{mode}_value"] = in_unit(figure, value) if figure.metric not in RATIO_METRICS else value
    row[f"{mode}_error"] = signed_error(figure, value)


def add_sensitivity(row: dict[str, Any], entry: Entry) -> None:
    """The figure predicted at AL -10% and +10% where the case assumes its acceptance (module docstring)."""
    case, figure, runner = entry
    lists = (case.source.get("acceptance_assumption") or {}).get("sensitivity") or {}
    for name in SENSITIVITIES:
        if name in lists and figure.metric != "speedup_sign":
            value = runner.predict(figure, Params(), tuple(map(str, lists[name])))
            row[f"{name}_value"] = in_unit(figure, value) if figure.metric not in RATIO_METRICS else value
            row[f"{name}_change"] = value / runner.predict(figure, Params()) - 1.0


def calibrations(runnable: list[Entry], rows: dict[int, dict], out: Path, host_grid: tuple[float, ...],
                 scale_grid: tuple[float, ...], progress: Callable[[str], None],
                 workers: int) -> dict[str, dict[str, Params]]:
    """Fit each group (calibration.py) and record every figure's calibrated and split prediction."""
    groups: dict[str, list[tuple[Case, Figure]]] = {}
    for case, figure, _runner in runnable:
        groups.setdefault(case.group, []).append((case, figure))
    fits = fit_groups(groups, out, host_grid, scale_grid, workers, progress)
    for group, members in groups.items():
        fit = fits[group]
        progress(f"{group}: calibrated {fit.params['calibrated']}")
        for case, figure in members:
            row = rows[id(figure)]
            record(row, fit, fit.params["calibrated"], case, figure, "calibrated")
            record(row, fit, split_params(fit, case, figure, members), case, figure, "split")
    return {mode: {group: fit.params[mode] for group, fit in fits.items()} for mode in FIT_MODES}


def record(row: dict[str, Any], fit: Fit, params: Params, case: Case, figure: Figure, mode: str) -> None:
    """The figure's value at `params` (a group with nothing to fit keeps its nothing-fitted prediction)."""
    value = value_at(fit, params, case, figure)
    if value is None:
        row[f"{mode}_value"], row[f"{mode}_error"] = row["predicted_value"], row["predicted_error"]
    else:
        add_prediction(row, figure, value, mode)
