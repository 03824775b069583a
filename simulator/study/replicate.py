"""Predictions against published measurements: run every case, compare, calibrate.

    result = replicate(cases, out_dir)                  predicted: no parameter looked at a figure
    result = replicate(cases, out_dir, calibrate=True)  adds "calibrated" and "split" errors

Each figure of a case (specplan.simulator.study.published) is predicted by
running the case's scenario with its workload's and arm's overrides at the
figure's concurrency (`workload.arrivals.max_concurrency`, and `num_prompts`
from the figure, the workload, or `prompts_per_concurrency` × c, default 4),
reading the client's metric from summary.json (a speed-up is the ratio of
the two arms' output throughput). Signed error = predicted / published − 1.

Availability is checked before anything runs, and never silently: a case
with `runnable: false`, a `requires.unsupported` entry (a GPU, engine
version or kernel the database lacks), a required built-in profile that is
not installed, a workload marked `unavailable`, or a scenario that does not
load gets that reason as its status and stays out of every error statistic.

A case run on the database's nearest version of its engine (the version
that was run is not in the database) says so in `requires.nearest_version`;
its rows carry the basis "nearest database version" (else "as run") and
`requires.stand_ins` (what else stands in: an acceptance preset, a
checkpoint's tables), and every statistic is also reported per basis.

**Calibration** (the procedure, DESIGN's "calibrated"): two parameters per
group (engine and GPU, `Case.group`), shared by every case of the group:

    host_ms      engine.host_overhead_ms, the engine's host time per step
    verify_scale a factor on the target's verify step time (the profile's
                 table), standing for the database operators whose source is
                 "mixed" or "empirical" (composed profiles keep no per-operator
                 provenance at step level, so the factor applies to the step)

chosen by a grid search (HOST_GRID_MS × SCALE_GRID) minimising the median
|error| over the group's throughput, TPOT and speed-up figures (ties: the
smaller maximum). "calibrated" errors fit on every figure of the group;
"split" errors fit on one half (figures in file order, alternating) and
predict the other half, both ways, so every split figure is out of sample.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.fileformat import builtin_names, write_profile_csv
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.presets import check_preset
from specplan.simulator.engine.bench_metrics import PREFIX
from specplan.simulator.engine.simulation import simulate
from specplan.simulator.scenario import load_scenario
from specplan.simulator.study.published import GOAL_METRICS, METRICS, RATIO_METRICS, Case, Figure

HOST_GRID_MS = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
SCALE_GRID = (0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5)
DEFAULT_PROMPTS_PER_CONCURRENCY = 4


@dataclass(frozen=True)
class Params:
    """The free parameters of one group (None: the scenario's own host time)."""

    host_ms: float | None = None
    verify_scale: float = 1.0


@dataclass
class Replication:
    """Every figure's prediction, and the fitted parameters per group."""

    rows: pd.DataFrame
    params: dict[str, dict[str, Params]] = field(default_factory=dict)  # mode -> group -> params
    cases: dict[str, str] = field(default_factory=dict)  # case -> "runs" or why it cannot


class CaseRunner:
    """Runs a case's scenarios, cached by (workload, arm, concurrency, prompts, params)."""

    def __init__(self, case: Case, out_dir: Path) -> None:
        self.case, self.out_dir = case, out_dir
        self.cache: dict[tuple, float | dict[str, Any]] = {}

    def workload(self, name: str) -> dict[str, Any]:
        entry = self.case.source.get("workloads", {}).get(name) or {}
        return {"overrides": entry} if isinstance(entry, list) else entry

    def prompts(self, figure: Figure) -> int:
        spec = self.workload(figure.workload)
        if figure.num_prompts is not None:
            return figure.num_prompts
        if spec.get("num_prompts"):
            return int(spec["num_prompts"])
        return int(spec.get("prompts_per_concurrency", DEFAULT_PROMPTS_PER_CONCURRENCY)) * figure.concurrency

    def overrides(self, figure: Figure, arm: str) -> list[str]:
        arms = self.case.source["arms"]
        return [*map(str, self.workload(figure.workload).get("overrides", [])), *map(str, arms[arm] or []),
                f"workload.arrivals.max_concurrency={figure.concurrency}",
                f"workload.arrivals.num_prompts={self.prompts(figure)}"]

    def summary(self, figure: Figure, arm: str, params: Params) -> dict[str, Any]:
        key = (figure.workload, arm, figure.concurrency, self.prompts(figure), params)
        if key not in self.cache:
            self.cache[key] = simulate(self.scenario(figure, arm, params)).summary
        return self.cache[key]  # type: ignore[return-value]

    def scenario(self, figure: Figure, arm: str, params: Params) -> Any:
        overrides = self.overrides(figure, arm)
        if params.host_ms is not None:
            overrides.append(f"engine.host_overhead_ms={params.host_ms}")
        scenario = load_scenario(self.case.folder / "scenario.yaml", overrides)
        if params.verify_scale != 1.0:
            path = self.scaled_profile(scenario.hardware.profile, params.verify_scale)
            scenario = load_scenario(self.case.folder / "scenario.yaml", [*overrides, f"hardware.profile={path}"])
        return scenario

    def scaled_profile(self, spec: Any, scale: float) -> Path:
        """The target's profile with every step time × scale (a calibration copy, said so in its provenance)."""
        profile = load_profile(spec)
        digest = hashlib.sha1(f"{spec}|{scale}".encode()).hexdigest()[:12]
        path = (self.out_dir / "profiles" / f"scaled-x{scale:g}-{digest}.csv").resolve()  # the scenario resolves it
        if not path.exists():
            provenance = {"device": "unknown", "model": "unknown", **profile.provenance,
                          "calibration": f"step times x {scale:g} of {profile.name} (specplan replicate)"}
            write_profile_csv(replace(profile, step_ms_table=profile.step_ms_table * scale,
                                      provenance=provenance), path)
        return path

    def predict(self, figure: Figure, params: Params) -> float:
        """The figure's predicted value, in the unit of its summary key (a ratio for speed-ups)."""
        key = f"{PREFIX[self.case.client]}.{METRICS[figure.metric][0]}"
        values = [float(self.summary(figure, arm, params)[key]) for arm in figure.arms]
        if figure.metric in RATIO_METRICS:
            ratio = values[0] / values[1] if values[1] > 0 else math.nan
            return float(np.sign(ratio - 1.0)) if figure.metric == "speedup_sign" else ratio
        return values[0]


def availability(case: Case) -> str | None:
    """Why the case cannot run at all (None: it can)."""
    source = case.source
    if source.get("runnable", True) is False:
        return f"not runnable: {source.get('reason', 'no reason given')}"
    requires = source.get("requires") or {}
    unsupported = requires.get("unsupported") or []
    if unsupported:
        return "database lacks: " + "; ".join(map(str, unsupported))
    installed = set(builtin_names())
    missing = [p for p in requires.get("profiles") or [] if p.removeprefix("builtin:") not in installed]
    if missing:
        return "profile not available: " + ", ".join(missing)
    absent = [p for p in requires.get("presets") or [] if not preset_known(*str(p).split(":", 1))]
    if absent:
        return "acceptance preset not available: " + ", ".join(map(str, absent))
    return None


NEAREST = "nearest database version"
AS_RUN = "as run"


def basis(case: Case) -> str:
    """Whether the case runs on the engine version that was measured, or the database's nearest."""
    return NEAREST if (case.source.get("requires") or {}).get("nearest_version") else AS_RUN


def case_label(case: Case) -> str:
    """What the case runs on instead of what was measured (empty when nothing stands in)."""
    requires = case.source.get("requires") or {}
    parts = [f"{NEAREST}: {requires['nearest_version']}"] if requires.get("nearest_version") else []
    parts += [f"stand-in: {s}" for s in requires.get("stand_ins") or []]
    return "; ".join(parts)


def preset_known(preset: str, family: str = "dspark") -> bool:
    try:
        check_preset(preset, family)
    except SpecplanError:
        return False
    return True


def figure_status(runner: CaseRunner, figure: Figure) -> str | None:
    """Why this figure cannot be predicted (a workload marked unavailable, a scenario that does not load)."""
    reason = runner.workload(figure.workload).get("unavailable")
    if reason:
        return f"workload not available: {reason}"
    try:
        for arm in figure.arms:
            runner.scenario(figure, arm, Params())
    except SpecplanError as exc:
        return f"scenario does not load: {exc}"
    return None


def base_row(case: Case, figure: Figure) -> dict[str, Any]:
    return {"source": case.name, "reference": case.source.get("reference", ""), "group": case.group,
            "workload": figure.workload, "arm": figure.arm, "metric": figure.metric,
            "concurrency": figure.concurrency, "published": figure.published, "unit": figure.unit,
            "line": figure.line, "basis": basis(case)}


def in_unit(figure: Figure, value: float) -> float:
    """A predicted value in the unit the figure was published in."""
    return value / METRICS[figure.metric][1][figure.unit]


def signed_error(figure: Figure, predicted: float) -> float:
    if figure.metric == "speedup_sign":
        return 0.0 if predicted == figure.value else math.nan
    return predicted / figure.value - 1.0


Entry = tuple[Case, Figure, CaseRunner]


def replicate(cases: Iterable[Case], out_dir: str | Path, calibrate: bool = False,
              host_grid: tuple[float, ...] = HOST_GRID_MS, scale_grid: tuple[float, ...] = SCALE_GRID,
              progress: Callable[[str], None] = lambda _m: None) -> Replication:
    """Predict every figure of every case (see the module docstring)."""
    out = Path(out_dir)
    cases = list(cases)
    rows, runnable = statuses(cases, out, progress)
    for entry in runnable:
        add_prediction(rows[id(entry[1])], entry, Params(), "predicted")
    params: dict[str, dict[str, Params]] = {}
    if calibrate and runnable:
        params = calibrations(runnable, rows, host_grid, scale_grid, progress)
    return Replication(pd.DataFrame(list(rows.values())), params, {case.name: case_status(case) for case in cases})


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


def add_prediction(row: dict[str, Any], entry: Entry, params: Params, mode: str) -> None:
    _case, figure, runner = entry
    value = runner.predict(figure, params)
    row[f"{mode}_value"] = in_unit(figure, value) if figure.metric not in RATIO_METRICS else value
    row[f"{mode}_error"] = signed_error(figure, value)


def calibrations(runnable: list[Entry], rows: dict[int, dict], host_grid: tuple[float, ...],
                 scale_grid: tuple[float, ...], progress: Callable[[str], None]) -> dict[str, dict[str, Params]]:
    """Fit per group on all figures (calibrated) and on halves (split); record both errors."""
    fitted: dict[str, dict[str, Params]] = {"calibrated": {}, "split_a": {}, "split_b": {}}
    groups: dict[str, list[Entry]] = {}
    for entry in runnable:
        groups.setdefault(entry[0].group, []).append(entry)
    for group, members in groups.items():
        entries = [e for e in members if e[1].metric in GOAL_METRICS]
        halves = (entries[0::2], entries[1::2])
        fit = fitted["calibrated"][group] = best_params(entries, host_grid, scale_grid)
        fitted["split_a"][group] = best_params(halves[0], host_grid, scale_grid)
        fitted["split_b"][group] = best_params(halves[1], host_grid, scale_grid)
        progress(f"{group}: calibrated {fit}")
        for entry in members:
            add_prediction(rows[id(entry[1])], entry, fit, "calibrated")
        for params, half in ((fitted["split_b"][group], halves[0]), (fitted["split_a"][group], halves[1])):
            for entry in half:
                add_prediction(rows[id(entry[1])], entry, params, "split")
        for entry in members:  # figures no fit looks at (sign cases): the whole group's fit predicts them
            if entry[1].metric not in GOAL_METRICS:
                add_prediction(rows[id(entry[1])], entry, fit, "split")
    return fitted


def best_params(entries: list[Entry], host_grid: tuple[float, ...], scale_grid: tuple[float, ...]) -> Params:
    """The grid point with the smallest median |error| over `entries` (ties: the smaller max)."""
    if not entries:
        return Params()
    best: tuple[float, float, Params] | None = None
    for host in host_grid:
        for scale in scale_grid:
            params = Params(host, scale)
            errors = np.abs([signed_error(f, r.predict(f, params)) for _c, f, r in entries])
            score = (float(np.median(errors)), float(np.max(errors)), params)
            if best is None or score[:2] < best[:2]:
                best = score
    assert best is not None
    return best[2]


def error_statistics(rows: pd.DataFrame, mode: str, on_basis: str | None = None) -> dict[str, Any]:
    """Median and max |error| over the goal metrics, and the sign check, for one mode's columns
    (of the figures on one basis, `as run` or `nearest database version`, when given)."""
    column = f"{mode}_error"
    if on_basis is not None and "basis" in rows:
        rows = rows[rows["basis"] == on_basis]
    if column not in rows or rows.empty:
        return {"figures": 0}
    ok = rows[(rows["status"] == "ok") & rows[column].notna()]
    goal = ok[ok["metric"].isin(GOAL_METRICS)][column].abs()
    signs = rows[(rows["status"] == "ok") & (rows["metric"] == "speedup_sign")]
    return {"figures": int(goal.size),
            "median_abs_error": float(goal.median()) if goal.size else None,
            "max_abs_error": float(goal.max()) if goal.size else None,
            "sign_cases": len(signs),
            "sign_reproduced": int((signs.get(f"{mode}_error", pd.Series(dtype=float)) == 0).sum())}
