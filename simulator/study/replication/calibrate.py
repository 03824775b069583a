"""Calibration of the replication suite: the grid of host time and step level every fit chooses from.

Place in the data flow: `replicate.py` predicts every figure with nothing
fitted; with `--calibrate` it hands the runnable serving figures here, with
the fits it needs (`Fit`: the in-sample fit per engine version, layout and model and
each cross-validation fold, transfer.py). The three parameters:

    host_ms       engine.host_overhead_ms: what the engine's host adds to every step
                  (scheduling, sampling, launches a CUDA graph does not hide; under DP
                  attention also the ranks' sync, which one layout's runs cannot tell apart)
    verify_scale  a factor on the target's step times (the profile's table): the level
                  of the database's kernel sum against the engine as it ran
    extend_op_us  engine.cuda_graph.extend_op_us: the host's cost per kernel of a step
                  that carries prompt tokens, where the engine prices such a step by its
                  launches (a DeepSeek-V4 engine row; step_modes.launch_count). No public
                  eager extend trace fixes it: the launcher's 4.7 us (None, the engine's
                  own) and the "launches added" reading of sglang PR #24047's eager decode
                  pair (16.9 us) bracket it, with 10 us between (`EXTEND_GRID_US`). On a
                  case whose engine does not price it, every extend value is the case's
                  point at None (`canonical`: simulated once)

The grid is searched in slices, one per extend value: a fit (`Fit`) is one fold
at one extend value, choosing host time and scale on its TPOT figures as below;
transfer.py then picks the fold's extend value by its TTFT figures (the figure
that reads a step carrying prompt tokens), each at its slice's choice.

All three are fitted per engine version, layout kind and model (transfer.py: the shipped
table's rows), so that a fit carries to a GPU it never saw, and the
cross-validation says what that costs. By layout: a data-parallel-attention
cell runs another step than a tensor-parallel one on the same GPUs (per-rank
attention, an all-to-all, SGLang's min-reduced modes), and fitted together the
two pulled each other to a compromise that fitted neither. The scale grid runs
to 3 because the data-parallel levels of the per-GPU fits reached 2.5.

Why these and not a factor per part family: the step's parts (attention,
the MoE block, the shared expert, mHC and norms) scale together under
`verify_scale`, and host time is the one cost the kernel tables leave out.
A factor per part family would not separate the figures that miss most: they
are prefill-dominated, and every part family grows with the tokens a mixed
step carries, so each family's factor would absorb the same miss. Two
parameters leave that miss visible in the transferred errors.

**Which points are simulated (`search_grid`).** A fit chooses the grid point
with the smallest median |error| over its figures (`best`; ties: the smaller
maximum, then the grid's order), and only among points where every one of its
figures was simulated. Simulating all 48 host x scale points for every case
cost 21 min on two workers (per extend value); the search simulates
what the fits need:

 1. the design: the slice's four corners, its middle point and the predicted
    run's point (the smallest host time at scale 1, whose values the plain
    predicted pass already has at the engine's own extend cost), for every case
    a fit is made on;
 2. per fit, alone: each of its figures' value is modelled over the whole grid
    from the points the fit has simulated (least squares in 1, h, s, h*s, s^2
    of TPOT and TTFT, and of 1/throughput for throughputs; ratios as they are:
    on the committed 48-point host x scale grid the model is within 0.3% of the simulated
    value at the median figure, 1% at the 90th percentile); the point with the
    smallest modelled median |error| (simulated values where simulated) is
    simulated for every case of the fit, the model refitted, and so on until
    that point is one the fit has simulated: it is then the fit's choice;
 3. every case that reads a fit's choice (a held-out GPU's figures read its
    fold's) is simulated there, in the round after the choice is known.

A fit's points depend on its own figures only (its design and the points its
own model chose), never on another fit's: a leave-one-GPU-out fold never sees
its held-out GPU's figures, not even through which points exist
(tests/test_calibrate_search.py). On the committed host x scale grid the
search picks the full grid's point for every fit (the same test), at 9 of the
48 points' simulation cost. `full=True` (`--full-grid`) simulates every point for every
case and lets every fit choose among all of them, as before.

The values (DESIGN's "calibrated" when fitted on what it is compared with) are
appended to calibration_grid.csv in the output folder as each task (a case at
a point, on `workers` processes, the costliest first) finishes; `--grid FILE`
(`read_grid`) reads an earlier run's file back, so a refit costs no simulation
where the file holds the points the search asks for.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import numpy as np

from specplan.simulator.study.backends import map_calls
from specplan.simulator.study.replication.case_runner import CaseRunner, Params, signed_error
from specplan.simulator.study.replication.published import METRICS, RATIO_METRICS, Case, Figure

HOST_GRID_MS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
SCALE_GRID = (0.7, 0.85, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0)
EXTEND_GRID_US = (None, 10.0, 16.9)   # None: the engine's own (the launcher's 4.7 us a kernel); module docstring

FigureKey = tuple[str, int]     # (case name, the figure's line in published.csv)
Grid = dict[Params, dict[FigureKey, float]]   # grid point -> figure -> predicted value (summary units)
Pair = tuple[str, Params]       # a case (by name) at a grid point: one task
K = TypeVar("K", bound=Hashable)   # what names a fit (transfer.py: a fold)
GRID_FILE = "calibration_grid.csv"   # every figure's value at every simulated point, written as the tasks finish
GRID_COLUMNS = ("source", "line", "metric", "published", "host_ms", "verify_scale", "extend_op_us", "value")


def figure_key(case: Case, figure: Figure) -> FigureKey:
    return case.name, figure.line


def grid_points(host_grid: tuple[float, ...], scale_grid: tuple[float, ...],
                extend_grid: tuple[float | None, ...] = (None,)) -> list[Params]:
    """Every point of the grid, in the grid's order (the order ties are broken in)."""
    return [Params(h, s, e) for h in host_grid for s in scale_grid for e in extend_grid]


def design_points(host_grid: tuple[float, ...], scale_grid: tuple[float, ...],
                  extend: float | None = None) -> list[Params]:
    """The points every fit of one extend value starts from: the four corners, the middle point and the predicted
    run's point (host and scale)."""
    hosts, scales = (host_grid[0], host_grid[-1]), (scale_grid[0], scale_grid[-1])
    wanted = {Params(h, s, extend) for h in hosts for s in scales}
    wanted.add(Params(host_grid[len(host_grid) // 2], scale_grid[len(scale_grid) // 2], extend))
    if 1.0 in scale_grid:
        wanted.add(Params(host_grid[0], 1.0, extend))
    return [p for p in grid_points(host_grid, scale_grid, (extend,)) if p in wanted]


def canonical(params: Params, priced: bool) -> Params:
    """The point a case is simulated at: its own where the case's engine prices an extend step by its launches
    (`priced`), else with the engine's own extend cost (the key would move nothing, and is refused)."""
    return params if priced else replace(params, extend_op_us=None)


@dataclass(frozen=True)
class Fit:
    """One choice the search serves: the figures it is made on, the cases simulated at its choice (the held-out
    cases that read it, and the cases whose TTFT figures pick the fold's extend value), and the extend cost its
    points have (one slice of the grid: host time and scale at that value)."""

    train: tuple[tuple[Case, Figure], ...]
    readers: frozenset[str]
    extend_op_us: float | None = None


Simulate = Callable[[list[Pair]], None]   # simulates the pairs, adding their figures' values to the grid


def search_grid(fits: Mapping[K, Fit], figures: Mapping[str, list[tuple[Case, Figure]]], values: Grid,
                simulate: Simulate, host_grid: tuple[float, ...], scale_grid: tuple[float, ...],
                full: bool = False) -> dict[K, list[Params]]:
    """Each fit's candidate points (its extend value's slice of the grid), every one simulated for all its figures
    (module docstring: the search; with `full`, every point of every fit's slice for every case in `figures`,
    each case's figures); `simulate` is called once per round with the pairs `values` lacks (a fit's readers join
    the round after its choice is known)."""
    slices = {key: grid_points(host_grid, scale_grid, (fit.extend_op_us,)) for key, fit in fits.items()}
    if full:
        every = list(dict.fromkeys(p for points in slices.values() for p in points))
        simulate(missing([(name, p) for name in sorted(figures) for p in every], values, figures))
        return {key: list(points) for key, points in slices.items()}
    seen = {key: design_points(host_grid, scale_grid, fit.extend_op_us) for key, fit in fits.items() if fit.train}
    wanted = [(name, p) for key in seen for name in fit_cases(fits[key]) for p in seen[key]]
    open_fits = list(seen)
    while wanted:
        simulate(missing(wanted, values, figures))
        wanted = []
        for key in list(open_fits):
            nxt = modelled_best(list(fits[key].train), values, seen[key], slices[key])
            if nxt in seen[key]:   # the fit's choice: its readers are simulated there in the next round
                open_fits.remove(key)
                chosen = best(list(fits[key].train), values, ordered(seen[key], slices[key]))
                wanted += [(name, chosen) for name in sorted(fits[key].readers)]
                continue
            seen[key].append(nxt)
            wanted += [(name, nxt) for name in fit_cases(fits[key])]
    return {key: ordered(seen.get(key, []), slices[key]) for key in fits}


def fit_cases(fit: Fit) -> list[str]:
    return sorted({c.name for c, _f in fit.train})


def ordered(chosen: list[Params], points: list[Params]) -> list[Params]:
    return [p for p in points if p in set(chosen)]


def missing(pairs: list[Pair], values: Grid, figures: Mapping[str, list[tuple[Case, Figure]]]) -> list[Pair]:
    """The pairs (once each, in order) where `values` lacks one of the case's figures."""
    held = {p: values.get(p, {}).keys() for _name, p in pairs}
    return [(name, p) for name, p in dict.fromkeys(pairs)
            if not all(figure_key(c, f) in held[p] for c, f in figures[name])]


def modelled_best(members: list[tuple[Case, Figure]], values: Grid, seen: list[Params], points: list[Params]) -> Params:
    """The point with the smallest modelled median |error| over `members` (module docstring, step 2)."""
    known = ordered(seen, points)
    at = [points.index(p) for p in known]
    simulated = np.array([[values[p][figure_key(c, f)] for c, f in members] for p in known])
    inverse = np.array([rate(f) for _c, f in members])
    target = np.where(inverse, 1.0 / simulated, simulated)
    finite = np.all(np.isfinite(target), axis=0)
    coef = np.linalg.lstsq(np.array([model_terms(p) for p in known]), np.where(finite, target, 0.0), rcond=None)[0]
    modelled = np.array([model_terms(p) for p in points]) @ coef
    modelled = np.where(inverse, 1.0 / modelled, modelled)
    modelled[:, ~finite] = np.nan          # a figure with no finite value anywhere simulated is not modelled
    modelled[at] = simulated
    table = np.array([[abs(signed_error(f, float(v))) for v in modelled[:, j]] for j, (_c, f) in enumerate(members)])
    medians, maxima = np.median(table, axis=0), np.max(table, axis=0)
    scores = [(m if np.isfinite(m) else np.inf, x if np.isfinite(x) else np.inf, i)
              for i, (m, x) in enumerate(zip(medians, maxima, strict=True))]
    return points[min(scores)[2]]


def model_terms(p: Params) -> list[float]:
    h, s = float(p.host_ms or 0.0), p.verify_scale
    return [1.0, h, s, h * s, s * s]


def rate(figure: Figure) -> bool:
    """A throughput (tokens per second): modelled as its inverse, a time per token."""
    return figure.metric not in RATIO_METRICS and "_tok_s" in METRICS[figure.metric][0]


def case_values(members: list[tuple[Case, Figure]], params: Params, out_dir: Path) -> tuple[dict[FigureKey, float], float]:
    """Every member figure of one case predicted at `params` (one task; its runs shared), and the CPU seconds."""
    started = time.process_time()
    runner = CaseRunner(members[0][0], out_dir)
    out = {figure_key(case, figure): runner.predict(figure, params) for case, figure in members}
    return out, time.process_time() - started


def simulate_pairs(pairs: list[Pair], figures: Mapping[str, list[tuple[Case, Figure]]], values: Grid, out_dir: Path,
                   workers: int, cost: dict[str, float], progress: Callable[[str], None]) -> float:
    """Simulate each (case, point) pair, the costliest case first (`cost`: CPU seconds of one run of it), adding
    its figures' values to `values` and appending them to out_dir/calibration_grid.csv; returns the CPU seconds."""
    if not pairs:
        return 0.0
    pairs = sorted(pairs, key=lambda pair: -cost.get(pair[0], 0.0))
    path = out_dir / GRID_FILE
    spent = [0.0]

    def done(index: int, get: Callable[[], tuple[dict[FigureKey, float], float]]) -> None:
        name, p = pairs[index]
        got, cpu = get()
        values.setdefault(p, {}).update(got)
        append_grid(path, grid_rows(figures[name], p, got))
        spent[0] += cpu

    calls = [(case_values, (figures[name], p, out_dir)) for name, p in pairs]
    map_calls(calls, done, workers, what="grid point", kept=f"every finished grid point is in {path}")
    progress(f"grid: {len(pairs)} case points simulated ({spent[0]:.0f} CPU s)")
    return spent[0]


def best(members: list[tuple[Case, Figure]], values: dict[Params, dict[FigureKey, float]],
         grid: list[Params]) -> Params:
    """The grid point with the smallest median |error| over `members` (ties: the smaller max, then the order of
    `grid`), among the points where every member was simulated (none: no fit)."""
    if not members:
        return Params()
    keys = [figure_key(c, f) for c, f in members]
    scores = []
    for index, p in enumerate(grid):
        held = values.get(p, {})
        if not all(k in held for k in keys):
            continue
        errors = np.abs([signed_error(f, held[figure_key(c, f)]) for c, f in members])
        scores.append((float(np.median(errors)), float(np.max(errors)), index))
    if not scores:
        raise ValueError("no grid point holds every figure of the fit")  # the search simulates a fit's points whole
    return grid[min(scores)[2]]


def grid_rows(members: list[tuple[Case, Figure]], params: Params, values: dict[FigureKey, float]) -> list[dict]:
    """The grid file's rows of one task: each member figure's value at `params`."""
    return [{"source": case.name, "line": figure.line, "metric": figure.metric, "published": figure.value,
             "host_ms": params.host_ms, "verify_scale": params.verify_scale, "extend_op_us": params.extend_op_us,
             "value": values[figure_key(case, figure)]} for case, figure in members]


def write_grid(path: Path, members: list[tuple[Case, Figure]], values: Grid) -> None:
    """Start the grid file afresh with every value `values` holds for `members` (an earlier run's, `read_grid`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    for p, held in values.items():
        rows = [(c, f) for c, f in members if figure_key(c, f) in held]
        if rows:
            append_grid(path, grid_rows(rows, p, held))


def append_grid(path: Path, rows: list[dict]) -> None:
    """Add rows to the grid file (its header first where it is new)."""
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=GRID_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def read_grid(path: Path, members: list[tuple[Case, Figure]]) -> Grid:
    """The values of an earlier run's grid file for `members` (a row whose published value or metric no longer
    matches the case is left out: that figure is simulated again)."""
    wanted = {figure_key(c, f): f for c, f in members}
    out: Grid = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["source"], int(row["line"]))
            figure = wanted.get(key)
            if figure is None or row["metric"] != figure.metric or not np.isclose(float(row["published"]), figure.value):
                continue
            host = None if row["host_ms"] in ("", "None") else float(row["host_ms"])
            extend = row.get("extend_op_us")   # absent from a grid file written before the extend term
            extend_us = None if extend in (None, "", "None") else float(extend)
            out.setdefault(Params(host, float(row["verify_scale"]), extend_us), {})[key] = float(row["value"])
    return out
