"""Sweeps: a scenario's `sweep:` block → points → frontier → SLA comparisons.

The notebook API (`specplan sweep` is a thin face over it):

    result = run_sweep("scenarios/default.yaml", None, RunOptions(out_dir="out", workers=2))
    result.points        one row per variant × load × seed: every summary key + label, load, seed
    result.frontier      per label: Pareto vertices + a monotone interpolation (specplan.simulator.study.frontier)
    result.comparisons   per SLA threshold: throughput/GPU per label, gains over the first label
    result.drafts        per label: what its drafts did in the runs (acceptance by position, the head's
                         reliability), pooled over its points: the report's figures read it
    result.lanes         over agent lanes (`sweep.load.lanes`): per lanes value and label, throughput per GPU,
                         a session's output tokens/s and their gains over the first label at equal lanes,
                         paired by seed (specplan.simulator.study.lane_gains); empty for other axes

With `out_dir`, each finished point is stored at once under
`out_dir/points/<key>.json` (specplan.simulator.study.points); a re-run reuses every
stored point and recomputes only the missing ones. Rows are ordered by
variant, load and seed, so results are identical whatever the backend or
the number of workers (only `wall_s`, the measured wall time of each
simulation, differs between runs that computed a point anew).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specplan.simulator.core.progress import Progress
from specplan.simulator.engine.records.draft_record import DraftRecord
from specplan.simulator.scenario import write_resolved
from specplan.simulator.scenario.study import tps_column
from specplan.simulator.study.backends import run_points
from specplan.simulator.study.frontier import comparisons, frontier_table, operating_points
from specplan.simulator.study.lane_gains import lane_gains
from specplan.simulator.study.options import RunOptions, Source
from specplan.simulator.study.points import (
    Point,
    SweepDesign,
    design_sweep,
    load_point,
    store_point,
)

__all__ = ["SweepDesign", "SweepResult", "design_sweep", "run_sweep", "sweep_frames"]


@dataclass
class SweepResult:
    """The frames of a finished sweep, how many points ran or were reused, and where files went."""

    design: SweepDesign
    points: pd.DataFrame
    operating: pd.DataFrame
    frontier: pd.DataFrame
    comparisons: pd.DataFrame
    statistic: str
    computed: int
    reused: int
    out_dir: Path | None = None
    drafts: dict[str, DraftRecord] = field(default_factory=dict)  # per label: what its drafts did, as run
    lanes: pd.DataFrame = field(default_factory=pd.DataFrame)  # gains at equal lanes (a lanes sweep; else empty)


def run_sweep(source: Source, sweep: Mapping[str, Any] | None = None,
              options: RunOptions | None = None) -> SweepResult:
    """Run (or resume) the sweep of `source` (its `sweep:` block, or `sweep` in its place); with
    `options.out_dir`, its points and the points/frontier/comparisons CSVs are written there.

    The report (`specplan.reports.report.write_report`) is the reports layer's: `specplan sweep` writes it.
    """
    options = options or RunOptions()
    design = design_sweep(source, options.overrides, sweep_block=sweep)
    out = options.out_path
    points_dir = out / "points" if out is not None else None
    summaries, computed = collect(design, points_dir, options.workers, options.backend, options.address,
                                  options.progress)
    result = sweep_frames(design, summaries, computed)
    if out is not None:
        write_outputs(result, out)
        result.out_dir = out
    return result


def collect(design: SweepDesign, points_dir: Path | None, workers: int | None, backend: str,
            address: str | None, progress: bool | None) -> tuple[dict[str, dict[str, Any]], int]:
    """Summaries by key: stored ones reused, the rest run and stored as each finishes."""
    unique = design.unique_points
    summaries: dict[str, dict[str, Any]] = {}
    if points_dir is not None:
        for point in unique:
            stored = load_point(points_dir, point.key)
            if stored is not None:
                summaries[point.key] = stored
    missing = [p for p in unique if p.key not in summaries]
    with Progress(len(unique), "sweep", enabled=progress if progress is not None else None) as bar:
        bar.skip(len(unique) - len(missing))

        def on_done(point: Point, summary: dict[str, Any]) -> None:
            if points_dir is not None and load_point(points_dir, point.key) is None:
                store_point(points_dir, point.key, summary, point.scenario)
            summaries[point.key] = summary
            bar.advance()

        run_points(missing, on_done, backend, workers, points_dir, address)
    return summaries, len(missing)


def sweep_frames(design: SweepDesign, summaries: dict[str, dict[str, Any]], computed: int = 0) -> SweepResult:
    """Assemble the points, operating points, frontier and comparison frames from summaries."""
    rows = [{**scalars(summaries[p.key]), "label": p.label, "load_kind": p.load_kind, "load": p.load,
             "seed": p.seed, "key": p.key} for p in design.points]
    points = numeric_columns(pd.DataFrame(rows))
    sla = design.sla
    statistic = sla.statistic if sla is not None else "p50"
    ops = operating_points(points, tps_column(statistic), sla.ttft_s if sla is not None else None)
    front = frontier_table(ops, design.labels)
    comp = comparisons(ops, design.labels, sla.tps_user if sla is not None else (), statistic)
    reused = len(design.unique_points) - computed
    return SweepResult(design, points, ops, front, comp, statistic, computed, reused,
                       drafts=label_drafts(design, summaries), lanes=lane_gains(points, design.labels))


def scalars(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary's figures, one column each (the nested draft record is kept per label instead, and the notes
    are the sweep's: SweepDesign.notes)."""
    return {k: v for k, v in summary.items() if k not in ("draft_record", "notes")}


def label_drafts(design: SweepDesign, summaries: dict[str, dict[str, Any]]) -> dict[str, DraftRecord]:
    """Each label's draft record, pooled over its points (loads and seeds): what the report's acceptance
    and calibration figures read."""
    out: dict[str, DraftRecord] = {}
    for point in design.points:
        stored = summaries[point.key].get("draft_record")
        if stored is not None:
            record = DraftRecord.from_json(stored)
            out[point.label] = out[point.label].merged(record) if point.label in out else record
    return out


def numeric_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns of numbers and nulls (NaN stored as JSON null) as floats."""
    for name in frame.columns:
        col = frame[name]
        if col.dtype == object and col.map(lambda v: v is None or is_number(v)).all():
            frame[name] = pd.to_numeric(col, errors="coerce").astype(float)
    return frame


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def write_outputs(result: SweepResult, out: Path) -> None:
    """points.csv, frontier.csv, comparisons.csv (lanes.csv over agent lanes) and the resolved base scenario."""
    out.mkdir(parents=True, exist_ok=True)
    result.points.to_csv(out / "points.csv", index=False, float_format="%.9g")
    result.frontier.to_csv(out / "frontier.csv", index=False, float_format="%.9g")
    result.comparisons.to_csv(out / "comparisons.csv", index=False, float_format="%.9g")
    if not result.lanes.empty:
        result.lanes.to_csv(out / "lanes.csv", index=False, float_format="%.9g")
    write_resolved(result.design.base, out / "scenario.resolved.yaml")
