"""Predictions against published measurements: run every case, compare, test the assumed acceptance, calibrate.

    result = replicate(source, None, RunOptions(out_dir=...))   predicted: no parameter looked at a figure
    result = replicate(source, ReplicationAsk(calibrate=True), options)   adds "calibrated" and "transferred" errors

`source` is a case folder, a folder of case folders (benchmarks/published)
or the cases themselves; with `options.out_dir` the entry point writes its
own files there: replication.csv (a row per figure), version_spread.csv and
replication.json (the statistics and goals, the fitted parameters); the
report (replication.md, .png) is the reports layer's.

Place in the data flow: the cases (specplan.simulator.study.replication.published) →
a row per figure with its status (`case_runner.availability`,
`figure_status`) → each runnable figure predicted with nothing fitted
(`CaseRunner.predict`) → the acceptance sensitivity → with `calibrate`, every
serving figure on the grid once (`calibrate.py`), the in-sample fit per engine
version and layout and the leave-one-GPU-out and leave-one-layout-out folds
over it (`transfer.py`), and with `table` the calibration table (`table.py`) →
`Replication` (its statistics from `stats.py`). Beside them, and in no
statistic, the version spread: each case's older published run paired with
its newest figures (`version_spread.py`).

**How the steps ran.** Each predicted figure's row says how its first arm
ran its steps (`eager_step_share`, `eager_time_share`, `main_mode_reason`:
the reason most steps ran the mode they ran, with its share), so an error
reads beside the execution modes that produced it.

**Attribution.** With `ask.attribute`, every serving figure off by more than
30% with nothing fitted gets the mode, cap or rule responsible for its miss
(`responsible`, `responsible_reason`: one ablation at a time,
attribution.py), and replication.json the ablations' errors.

**Acceptance sensitivity.** A case whose acceptance is not published says
in its source.yaml which preset stands in and the AL it implies
(`acceptance_assumption`), with override lists moving that AL by -10% and
+10% (`sensitivity.al_minus_10`, `al_plus_10`). Each of its figures is
predicted again under each list (nothing fitted): the rows gain
`al_minus_10_value` / `al_plus_10_value` (in the published unit) and
`al_minus_10_change` / `al_plus_10_change` (relative to the prediction).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.calibration import deployment_of
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.attribution import attribute
from specplan.simulator.study.replication.calibrate import (
    HOST_GRID_MS,
    SCALE_GRID,
    Grid,
    figure_key,
    read_grid,
    simulate_grid,
)
from specplan.simulator.study.replication.case_runner import (
    AS_RUN,
    NEAREST,
    CaseRunner,
    Params,
    availability,
    base_row,
    case_label,
    figure_status,
    in_unit,
    signed_error,
)
from specplan.simulator.study.replication.published import RATIO_METRICS, Case, Figure, read_case
from specplan.simulator.study.replication.stats import (
    goals,
    responsibility,
    statistics,
    step_coverage_goal,
    step_goal,
    step_statistics,
)
from specplan.simulator.study.replication.step_cases import StepRunner, is_step
from specplan.simulator.study.replication.table import write_table
from specplan.simulator.study.replication.transfer import (
    TRANSFER_MODES,
    Folds,
    Member,
    RowKey,
    fit_folds,
)
from specplan.simulator.study.replication.version_spread import spread_rows, spread_statistics

SENSITIVITIES = ("al_minus_10", "al_plus_10")


@dataclass
class Replication:
    """Every figure's prediction, and the fitted parameters per group."""

    rows: pd.DataFrame
    params: dict[str, dict[str, Params]] = field(default_factory=dict)  # mode -> fold (row, held out) -> params
    cases: dict[str, str] = field(default_factory=dict)  # case -> "runs" or why it cannot
    assumed_al: dict[str, str] = field(default_factory=dict)  # case -> the acceptance it assumes
    spread: pd.DataFrame = field(default_factory=pd.DataFrame)  # stale vs newest published figures, apart
    attribution: list[dict[str, Any]] = field(default_factory=list)  # per figure off > 30%: every ablation's error

    def not_predicted(self) -> dict[str, str]:
        """Each case with a figure out of the statistics (or no figure at all), and why: the suite never shrinks
        in silence (`missing_cases`)."""
        return missing_cases(self.cases, self.rows)

    def compared(self) -> int:
        """How many figures were predicted (status ok): none means there was nothing to compare."""
        return int((self.rows["status"] == "ok").sum()) if "status" in self.rows else 0


Runner = CaseRunner | StepRunner
Entry = tuple[Case, Figure, Runner]


@dataclass(frozen=True)
class ReplicationAsk:
    """What a replication computes beyond the predictions: with `calibrate`, the calibrated and transferred errors
    (host time × level per engine version and layout, over these grids; transfer.py); `grid` reads an earlier
    run's calibration_grid.csv instead of simulating what it holds; `table` writes the calibration table there,
    with `command` as its provenance."""

    calibrate: bool = False
    host_grid: tuple[float, ...] = HOST_GRID_MS
    scale_grid: tuple[float, ...] = SCALE_GRID
    grid: Path | None = None
    table: Path | None = None
    command: str = ""
    attribute: bool = False


def replicate(source: str | Path | Iterable[Case], ask: ReplicationAsk | None = None,
              options: RunOptions | None = None) -> Replication:
    """Predict every figure of every case (see the module docstring); the calibration's grid points run on
    `options.workers` processes (default 1), progress lines go to stderr with `options.progress`."""
    ask, options = ask or ReplicationAsk(), options or RunOptions()
    cases = read_cases(Path(source)) if isinstance(source, str | Path) else list(source)
    out = options.out_path or Path(tempfile.mkdtemp(prefix="specplan-replicate-"))
    progress = (lambda m: print(m, file=sys.stderr)) if options.progress else (lambda _m: None)
    rows, runnable = statuses(cases, out, progress)
    for entry in runnable:
        row = rows[id(entry[1])]
        add_prediction(row, entry[1], entry[2].predict(entry[1], Params()), "predicted")
        row.update(entry[2].modes(entry[1], Params()))
        add_sensitivity(row, entry)
    params: dict[str, dict[str, Params]] = {}
    serving = [entry for entry in runnable if not is_step(entry[0])]  # a step case is predicted only
    attribution = attribute(((rows[id(figure)], figure, runner) for _c, figure, runner in serving
                             if isinstance(runner, CaseRunner)), progress) if ask.attribute else []
    if ask.calibrate and serving:
        params = calibrations(serving, rows, out, ask, progress, options.workers or 1)
    result = Replication(pd.DataFrame(list(rows.values())), params, {case.name: case_status(case) for case in cases},
                         {case.name: assumed_al(case) for case in cases if "acceptance_assumption" in case.source},
                         spread_rows(cases), attribution)
    if options.out_path is not None:
        write_records(result, options.out_path)
    return result


def read_cases(folder: Path) -> list[Case]:
    """One case folder (source.yaml, scenario.yaml, published.csv), or every case folder inside `folder`."""
    if not folder.is_dir():
        raise SpecplanError(f"{folder}: not a folder")
    if (folder / "source.yaml").exists():
        return [read_case(folder)]
    found = [read_case(sub) for sub in sorted(folder.iterdir()) if (sub / "source.yaml").exists()]
    if not found:
        raise SpecplanError(f"{folder}: no case folder (one with source.yaml and published.csv) inside")
    return found


def write_records(result: Replication, out: Path) -> None:
    """replication.csv, version_spread.csv and replication.json (statistics, goals, fitted parameters)."""
    out.mkdir(parents=True, exist_ok=True)
    result.rows.to_csv(out / "replication.csv", index=False)
    result.spread.to_csv(out / "version_spread.csv", index=False)
    stats = statistics(result.rows, (AS_RUN, NEAREST))
    params = {mode: {g: vars(p) for g, p in groups.items()} for mode, groups in result.params.items()}
    steps = step_statistics(result.rows)
    doc = {"cases": result.cases, "cases_not_predicted": result.not_predicted(), "statistics": stats,
           "goals": [*goals(stats), step_goal(steps), step_coverage_goal(steps)], "step_statistics": steps,
           "responsibility": responsibility(result.rows), "attribution": result.attribution, "params": params, "version_spread": spread_statistics(result.spread) if not result.spread.empty else {}}
    (out / "replication.json").write_text(json.dumps(doc, indent=1) + "\n")


def missing_cases(cases: dict[str, str], rows: pd.DataFrame) -> dict[str, str]:
    """Case -> why it is (partly) not predicted: its own status where it cannot run, the distinct statuses of its
    figures that were left out (with how many of how many), "no published figure" where it has none."""
    out: dict[str, str] = {}
    for name, status in cases.items():
        part = rows[rows["source"] == name] if "source" in rows else pd.DataFrame(columns=["status"])
        left = part[part["status"] != "ok"]
        if not status.startswith("runs"):
            out[name] = status
        elif part.empty:
            out[name] = "no published figure"
        elif not left.empty:
            reasons = "; ".join(dict.fromkeys(left["status"].astype(str)))
            out[name] = f"{len(left)} of {len(part)} figures not predicted: {reasons}"
    return out


def missing_lines(result: Replication) -> list[str]:
    """'N of M cases not predicted' and a line per such case with its reason (first in every report)."""
    missing = result.not_predicted()
    return [f"{len(missing)} of {len(result.cases)} cases not predicted",
            *[f"  not predicted: {name}: {reason}" for name, reason in missing.items()]]


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
        runner = runner_for(case, out)
        reason = availability(case)
        progress(f"{case.name}: {reason.split(':')[0] if reason else 'runs'}")  # the reason whole in the report
        for figure in case.figures:
            status = reason or figure_status(runner, figure)
            rows[id(figure)] = {**base_row(case, figure), "status": status or "ok"}
            if status is None:
                runnable.append((case, figure, runner))
    return rows, runnable


def runner_for(case: Case, out: Path) -> Runner:
    """A serving case's simulator, or a step case's step price (step_cases.py)."""
    return StepRunner(case, out) if is_step(case) else CaseRunner(case, out)


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


def calibrations(runnable: list[Entry], rows: dict[int, dict], out: Path, ask: ReplicationAsk,
                 progress: Callable[[str], None], workers: int) -> dict[str, dict[str, Params]]:
    """Every serving figure simulated once on the grid (calibrate.py), every fold fitted over it (transfer.py),
    each figure's calibrated and transferred predictions recorded; the table written where asked (table.py)."""
    groups: dict[str, list[tuple[Case, Figure]]] = {}
    for case, figure, _runner in runnable:
        groups.setdefault(case.group, []).append((case, figure))
    everything = [pair for members in groups.values() for pair in members]
    cached = read_grid(ask.grid, everything) if ask.grid is not None else None
    grid = simulate_grid(groups, out, ask.host_grid, ask.scale_grid, workers, progress, cached)
    points = [Params(h, s) for h in ask.host_grid for s in ask.scale_grid]
    rowkeys = {case.name: row_key(case) for case, _f, _r in runnable}
    members = [Member(case, figure, rowkeys[case.name], gpu_of(case)) for case, figure in everything]
    folds = fit_folds(members, grid, points)
    for member in members:
        row = rows[id(member.figure)]
        for mode in TRANSFER_MODES:
            record(row, grid, folds.params(member, mode), member, mode)
    if ask.table is not None:
        progress(f"calibration table written: {write_table(ask.table, members, folds, grid, ask.command)}")
    return fold_params(folds)


def row_key(case: Case) -> RowKey:
    """The engine, the engine version its scenario runs as and the layout kind (the table's match)."""
    here = deployment_of(load_scenario(case.folder / "scenario.yaml"))
    return here.engine, here.engine_version, here.layout


def gpu_of(case: Case) -> str:
    return str((case.source.get("gpus") or {}).get("type", "?"))


def fold_params(folds: Folds) -> dict[str, dict[str, Params]]:
    """mode -> 'engine version layout' (calibrated), '... without GPU' (transferred) or '... from the other layouts'
    (transferred_layout) -> the choice."""
    out: dict[str, dict[str, Params]] = {mode: {} for mode in TRANSFER_MODES}
    tails = {"calibrated": "", "transferred": " without {}", "transferred_layout": " from the other layouts"}
    for (mode, row, held), params in folds.chosen.items():
        if params is not None:
            out[mode][" ".join(part for part in row if part) + tails[mode].format(held)] = params
    return out


def record(row: dict[str, Any], grid: Grid, params: Params | None, member: Member, mode: str) -> None:
    """The figure's value at the mode's choice; no value where the mode's fold has nothing to fit on."""
    if params is None:
        row[f"{mode}_value"], row[f"{mode}_error"] = float("nan"), float("nan")
    else:
        add_prediction(row, member.figure, grid[params][figure_key(member.case, member.figure)], mode)
