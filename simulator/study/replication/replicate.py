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
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.engine.assembly import prices_extend_by_launches
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.calibration import deployment_of, model_name
from specplan.simulator.study.backends import map_calls
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.attribution import (
    Verdict,
    attribute_figure,
    needs_attribution,
    recorded,
)
from specplan.simulator.study.replication.calibrate import (
    EXTEND_GRID_US,
    GRID_FILE,
    HOST_GRID_MS,
    SCALE_GRID,
    Fit,
    Grid,
    Pair,
    canonical,
    figure_key,
    missing,
    read_grid,
    search_grid,
    simulate_pairs,
    write_grid,
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
    FoldKey,
    Folds,
    Member,
    RowKey,
    extend_training,
    fit_folds,
    fitted_on,
    training,
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
    (host time × level per engine version, layout and model, over these grids; transfer.py); `grid` reads an earlier
    run's calibration_grid.csv instead of simulating what it holds; `full_grid` simulates every grid point for
    every case (else the search of calibrate.py); `table` writes the calibration table there, with `command` as
    its provenance."""

    calibrate: bool = False
    host_grid: tuple[float, ...] = HOST_GRID_MS
    scale_grid: tuple[float, ...] = SCALE_GRID
    extend_grid: tuple[float | None, ...] = EXTEND_GRID_US
    grid: Path | None = None
    full_grid: bool = False
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
    predicted = predictions(runnable, rows, out, options.workers or 1)
    params: dict[str, dict[str, Params]] = {}
    serving = [entry for entry in runnable if not is_step(entry[0])]  # a step case is predicted only
    attribution = attributions(serving, rows, out, options.workers or 1, progress) if ask.attribute else []
    if ask.calibrate and serving:
        params = calibrations(serving, rows, out, ask, progress, options.workers or 1, predicted)
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


@dataclass
class Predicted:
    """A case's plain predictions: each figure's value (summary units), how its steps ran, its sensitivities; the
    case's own host time where every run of it has one (the grid point the predicted runs are), and the CPU
    seconds its predicted runs took (the calibration's tasks go costliest first); whether its engine prices an
    extend step by its launches (the calibration's extend axis moves it)."""

    values: list[float]
    modes: list[dict[str, Any]]
    sensitivity: list[dict[str, float]]
    host_ms: float | None
    cpu_s: float
    extend_priced: bool = False


def case_predictions(case: Case, figures: list[Figure], out: Path) -> Predicted:
    """Every figure of one case predicted with nothing fitted (a task of `predictions`)."""
    runner = runner_for(case, out)
    started = time.process_time()
    values = [runner.predict(figure, Params()) for figure in figures]
    cpu = time.process_time() - started
    modes = [runner.modes(figure, Params()) for figure in figures]
    lists = (case.source.get("acceptance_assumption") or {}).get("sensitivity") or {}
    sensitivity = [{name: runner.predict(figure, Params(), tuple(map(str, lists[name])))
                    for name in SENSITIVITIES if name in lists and figure.metric != "speedup_sign"}
                   for figure in figures]
    scenarios = [] if is_step(case) else [runner.scenario(figure, arm, Params()) for figure in figures
                                          for arm in figure.arms]   # each loaded once, read twice
    hosts = {scenario.engine.host_overhead_ms for scenario in scenarios}
    priced = bool(scenarios) and all(map(prices_extend_by_launches, scenarios))
    return Predicted(values, modes, sensitivity, hosts.pop() if len(hosts) == 1 else None, cpu, priced)


def predictions(runnable: list[Entry], rows: dict[int, dict], out: Path, workers: int) -> dict[str, Predicted]:
    """Every runnable figure predicted (a task per case on `workers` processes), its row filled in: the value,
    how its steps ran, the acceptance sensitivity (module docstring)."""
    by_case: dict[str, tuple[Case, list[Figure]]] = {}
    for case, figure, _runner in runnable:
        by_case.setdefault(case.name, (case, []))[1].append(figure)
    names = sorted(by_case, key=lambda n: -sum(f.concurrency * (f.num_prompts or 1) for f in by_case[n][1]))
    got: dict[str, Predicted] = {}

    def done(index: int, get: Callable[[], Predicted]) -> None:
        got[names[index]] = get()

    calls = [(case_predictions, (*by_case[name], out)) for name in names]
    map_calls(calls, done, workers, what="case", kept="nothing: the predictions are written at the end")
    for name, result in got.items():
        case, figures = by_case[name]
        for index, figure in enumerate(figures):
            row = rows[id(figure)]
            add_prediction(row, figure, result.values[index], "predicted")
            row.update(result.modes[index])
            for key, value in result.sensitivity[index].items():
                row[f"{key}_value"] = in_unit(figure, value) if figure.metric not in RATIO_METRICS else value
                row[f"{key}_change"] = value / result.values[index] - 1.0
    return got


def case_attributions(case: Case, figures: list[tuple[Figure, float]], out: Path) -> list[Verdict]:
    """Each (figure, its predicted signed error) of one case attributed (a task of `attributions`)."""
    runner = CaseRunner(case, out)
    return [attribute_figure(runner, figure, error) for figure, error in figures]


def attributions(serving: list[Entry], rows: dict[int, dict], out: Path, workers: int,
                 progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every serving figure off by more than attribution.ATTRIBUTE_AT attributed (a task per case on `workers`
    processes, costliest first), its row given `responsible` and `responsible_reason`; returns
    replication.json's attribution list."""
    by_case: dict[str, tuple[Case, list[Figure]]] = {}
    for case, figure, runner in serving:
        if isinstance(runner, CaseRunner) and needs_attribution(rows[id(figure)]):
            by_case.setdefault(case.name, (case, []))[1].append(figure)
    names = sorted(by_case, key=lambda n: -sum(f.concurrency * (f.num_prompts or 1) for f in by_case[n][1]))
    found: dict[str, list[Verdict]] = {}

    def done(index: int, get: Callable[[], list[Verdict]]) -> None:
        found[names[index]] = get()
        progress(f"{names[index]}: {len(found[names[index]])} figure(s) attributed")

    calls = [(case_attributions, (by_case[name][0], [(f, float(rows[id(f)]["predicted_error"]))
                                                     for f in by_case[name][1]], out)) for name in names]
    map_calls(calls, done, workers, what="case", kept="nothing: the attribution is written at the end")
    return [recorded(rows[id(figure)], verdict) for name in names if name in found
            for figure, verdict in zip(by_case[name][1], found[name], strict=True)]


def calibrations(runnable: list[Entry], rows: dict[int, dict], out: Path, ask: ReplicationAsk,
                 progress: Callable[[str], None], workers: int,
                 predicted: dict[str, Predicted]) -> dict[str, dict[str, Params]]:
    """The serving figures simulated at the grid points the fits need (calibrate.py's search, or every point with
    `full_grid`), every fold fitted among its own points (transfer.py), each figure's calibrated and transferred
    predictions recorded; the table written where asked (table.py)."""
    figures: dict[str, list[tuple[Case, Figure]]] = {}
    for case, figure, _runner in runnable:
        figures.setdefault(case.name, []).append((case, figure))
    everything = [pair for members in figures.values() for pair in members]
    grid: Grid = read_grid(ask.grid, everything) if ask.grid is not None else {}
    seed(grid, figures, predicted, ask)
    write_grid(out / GRID_FILE, everything, grid)
    rowkeys = {case.name: row_key(case) for case, _f, _r in runnable}
    members = [Member(case, figure, rowkeys[case.name], gpu_of(case)) for case, figure in everything]
    fits = fold_fits(members, ask.extend_grid)
    cost = {name: result.cpu_s for name, result in predicted.items()}
    priced = {name: result.extend_priced for name, result in predicted.items()}

    def simulate(pairs: list[Pair]) -> None:
        at = [(name, canonical(p, priced.get(name, False))) for name, p in pairs]
        simulate_pairs(missing(at, grid, figures), figures, grid, out, workers, cost, progress)
        for (name, p), (_name, point) in zip(pairs, at, strict=True):   # an unpriced case's extend points: one run
            if p != point:
                held = grid[point]
                grid.setdefault(p, {}).update({figure_key(c, f): held[figure_key(c, f)] for c, f in figures[name]})

    visited = search_grid(fits, figures, grid, simulate, ask.host_grid, ask.scale_grid, full=ask.full_grid)
    folds = fit_folds(members, grid, lambda key: [p for x in ask.extend_grid for p in visited[(key, x)]])
    for member in members:
        row = rows[id(member.figure)]
        for mode in TRANSFER_MODES:
            record(row, grid, folds.params(member, mode), member, mode)
    if ask.table is not None:
        on = {name for name, yes in priced.items() if yes}
        progress(f"calibration table written: {write_table(ask.table, members, folds, grid, ask.command, on, ask.extend_grid)}")
    return fold_params(folds)


def seed(grid: Grid, figures: dict[str, list[tuple[Case, Figure]]], predicted: dict[str, Predicted],
         ask: ReplicationAsk) -> None:
    """The plain predictions as the grid point they are (the case's own host time at scale 1, where that is a grid
    point): the same scenarios, so the same values, simulated once."""
    for name, members in figures.items():
        result = predicted[name]
        if result.host_ms is None or result.host_ms not in ask.host_grid or 1.0 not in ask.scale_grid:
            continue
        values = dict(zip(((c.name, f.line) for c, f in members), result.values, strict=True))
        grid.setdefault(Params(result.host_ms, 1.0), {}).update(values)


def fold_fits(members: list[Member], extends: tuple[float | None, ...] = (None,)) -> dict[tuple[FoldKey, float | None], Fit]:
    """Every fold of every mode (transfer.py) at every extend value, as the search sees it: its training figures,
    the cases simulated at its choice (those that read it, and those whose TTFT figures pick the fold's extend
    value where there is more than one) and its slice of the grid."""
    keys = Folds()
    readers: dict[FoldKey, set[str]] = {}
    for member in members:
        for mode in TRANSFER_MODES:
            readers.setdefault(keys.fold_of(member, mode), set()).add(member.case.name)
    out = {}
    for key, names in readers.items():
        train = tuple((m.case, m.figure) for m in fitted_on(training(members, key)))
        pickers = {m.case.name for m in extend_training(members, key)} if len(extends) > 1 else set()
        out.update({(key, x): Fit(train, frozenset(names | pickers), x) for x in extends})
    return out


def row_key(case: Case) -> RowKey:
    """The engine, the engine version its scenario runs as, the layout kind and the model its profile prices (the
    table's match)."""
    here = deployment_of(load_scenario(case.folder / "scenario.yaml"))
    return here.engine, here.engine_version, here.layout, model_name(here.model)


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
