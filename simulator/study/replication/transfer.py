"""Calibration that transfers: one set of terms per engine version, layout kind and model, and its cross-validation.

    folds = fit_folds(members, grid, points)      every fit a re-selection over one simulated grid
    folds.params(member, mode)                   the parameters that predict `member` in a mode (None: no fit)

Place in the data flow: `replicate.py` (with `--calibrate`) has the serving
figures simulated at the points of the (host_ms, verify_scale) grid each fold
needs (`calibrate.search_grid`, kept in calibration_grid.csv; `--full-grid`:
every point); here each fit only chooses a grid point among its fold's
simulated points (`choose`), so the in-sample fit and every cross-validation
fold cost no simulation. `table.py` writes the in-sample fits
as the shipped calibration table.

A row (`RowKey`) is an engine, the engine version the simulator runs it as
(the traits row and kernel tables the case's scenario resolves to: SGLang
0.5.14 for every V4 SGLang built-in, whatever version was measured), the
layout kind (tp, dp-attention) and the model its profile prices
(`calibration.model_name`: a repackaging is the same model): what a user's
scenario can be matched on. A model is a row of its own because the level a
row fits is its model's kernel tables' (docs/guides/replication.md, "Calibration
that transfers").
The modes:

    calibrated          fitted on the member's whole row (in sample: the shipped
                        table's terms)
    transferred         leave one GPU out: fitted on the row's figures of the other GPUs,
                        so the member's GPU is never seen (no other GPU in the row: no value)
    transferred_layout  leave one layout out: fitted on the figures of the same engine,
                        version and model in the other layout kinds (none: no value)

**The fit's objective** (`choose`): the grid point with the smallest median
|error| over the fold's TPOT figures (`FIT_METRICS`; a fold with none, its
throughput and speed-up figures), ties the smaller max, among the points
where every one of those figures was simulated (an incomplete grid leaves a
point out, never half-scores it). Why TPOT: both terms are a step's price
(the host time every step pays, the level of its kernels), and TPOT is the
figure that reads the step; a run's throughput figure is nearly the
reciprocal of its TPOT (fitting both counts a run twice, and weighs the two
sides of one miss unequally: a -50% TPOT miss is a +100% throughput miss) and adds what the two terms do not carry (the client's ramp,
prefill, the drawn lengths). Judged on the held-out folds of the committed
grid (docs/guides/replication.md, "Transfer rules tried"), this fit carries
to an unseen GPU better than the fit over every goal figure (leave one GPU
out 22.5% against 24.1%), and choosing between the two inside each fold (a
nested cross-validation) picks it in 4 of 5 folds with the same 22.5%.
Every goal figure is still scored in every mode.

**The extend value** (where the grid has more than one, calibrate.py's
slices): host time and scale are chosen as above within each extend value's
slice, and the fold takes the slice whose choice has the smallest median
|error| over its TTFT figures (`EXTEND_METRICS`, `extend_training`: the fold's
own, chosen by row, GPU and layout as its TPOT figures are). Why TTFT: the
extend cost prices a step carrying prompt tokens, and a TTFT is the figure
that reads one (at c = 1, a prompt on an idle server is nothing else), as
TPOT reads the decode step. Chosen jointly with host and scale on the TPOT
figures instead, the extra freedom fitted the folds' TPOT noise and carried
worse (leave one GPU out 26.9% against 24.1% with the engine's own; picked
by TTFT 23.0%: docs/guides/replication.md, "The extend step's cost in the
calibration").

A held-out fold's figures never enter its fit: the training set of a fold is
chosen by the row, GPU and layout alone, before any figure is read
(`in_fold`: its TPOT and its TTFT figures alike), and tests/test_transfer.py checks that replacing the held-out
figures' published values by garbage leaves every fold's choice unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from specplan.simulator.study.replication.calibrate import Grid, best, figure_key
from specplan.simulator.study.replication.case_runner import Params, signed_error
from specplan.simulator.study.replication.published import GOAL_METRICS, Case, Figure

RowKey = tuple[str, str, str, str]   # (engine, engine version as run, layout kind, model)
TRANSFER_MODES = ("calibrated", "transferred", "transferred_layout")
FIT_METRICS = ("mean_tpot", "median_tpot")   # the figures a fit is chosen on (module docstring)
EXTEND_METRICS = ("mean_ttft", "median_ttft")   # the figures its extend value is picked by


@dataclass(frozen=True)
class Member:
    """A serving figure as the fits see it: its case, the figure, its row and its GPU."""

    case: Case
    figure: Figure
    row: RowKey
    gpu: str

    @property
    def goal(self) -> bool:
        return self.figure.metric in GOAL_METRICS


FoldKey = tuple[str, RowKey, str]   # (mode, row, held-out GPU or layout; "" in sample)


@dataclass
class Folds:
    """Each fold's chosen grid point (None: the fold has no figure to fit on) and what it was fitted on."""

    chosen: dict[FoldKey, Params | None] = field(default_factory=dict)
    trained_on: dict[FoldKey, list[Member]] = field(default_factory=dict)

    def fold_of(self, member: Member, mode: str) -> FoldKey:
        if mode == "calibrated":
            return mode, member.row, ""
        if mode == "transferred":
            return mode, member.row, member.gpu
        return mode, member.row, member.row[2]

    def params(self, member: Member, mode: str) -> Params | None:
        return self.chosen.get(self.fold_of(member, mode))

    def fold_keys(self, members: list[Member]) -> list[FoldKey]:
        """Every fold of every mode over `members`, once each, in the members' order."""
        return list(dict.fromkeys(self.fold_of(m, mode) for m in members for mode in TRANSFER_MODES))


def in_fold(members: list[Member], fold: FoldKey) -> list[Member]:
    """The figures a fold may read, chosen by row, GPU and layout only (module docstring)."""
    mode, row, held = fold
    if mode == "calibrated":
        return [m for m in members if m.row == row]
    if mode == "transferred":
        return [m for m in members if m.row == row and m.gpu != held]
    return [m for m in members if m.row[:2] == row[:2] and m.row[3] == row[3] and m.row[2] != held]


def training(members: list[Member], fold: FoldKey) -> list[Member]:
    """The goal figures a fold is fitted on (module docstring)."""
    return [m for m in in_fold(members, fold) if m.goal]


def extend_training(members: list[Member], fold: FoldKey) -> list[Member]:
    """The TTFT figures that pick a fold's extend value (module docstring)."""
    return [m for m in in_fold(members, fold) if m.figure.metric in EXTEND_METRICS]


def fitted_on(train: list[Member]) -> list[Member]:
    """The figures a fold's choice reads: its TPOT figures, else (a fold with none) all its goal figures."""
    return [m for m in train if m.figure.metric in FIT_METRICS] or train


def choose(train: list[Member], grid: Grid, points: list[Params], ttft: list[Member] | None = None) -> Params | None:
    """The fit of one fold (module docstring): host time and scale per extend value among `points` on the TPOT
    figures, then the extend value whose choice has the smallest median |error| over `ttft` (ties, or no TTFT figure
    at every choice: the grid's order, the engine's own first). None where it has no figure, or no point holds all
    of them."""
    fit = fitted_on(train)
    keys = [figure_key(m.case, m.figure) for m in fit]
    eligible = [p for p in points if all(k in grid.get(p, {}) for k in keys)]
    if not fit or not eligible:
        return None
    slices: dict[float | None, list[Params]] = {}
    for p in eligible:   # by extend value, each in the grid's order
        slices.setdefault(p.extend_op_us, []).append(p)
    chosen = [best([(m.case, m.figure) for m in fit], grid, part) for part in slices.values()]
    if len(chosen) == 1:
        return chosen[0]
    held = [m for m in ttft or [] if all(figure_key(m.case, m.figure) in grid[p] for p in chosen)]
    if not held:
        return chosen[0]
    scores = [float(np.median([abs(signed_error(m.figure, grid[p][figure_key(m.case, m.figure)])) for m in held]))
              for p in chosen]
    return chosen[int(np.argmin(scores))]


def fit_folds(members: list[Member], grid: Grid, points: list[Params] | Callable[[FoldKey], list[Params]]) -> Folds:
    """Every fold of every mode over `members`, each `choose`n on its own training figures among `points`
    (or `points(fold)`: the points the calibration's search simulated for that fold, calibrate.py)."""
    candidates = points if callable(points) else (lambda _key: points)
    folds = Folds()
    for key in folds.fold_keys(members):
        train = fitted_on(training(members, key))
        folds.trained_on[key] = train
        folds.chosen[key] = choose(train, grid, candidates(key), extend_training(members, key))
    return folds


def fold_lines(folds: Folds, describe: Callable[[RowKey], str]) -> list[str]:
    """A line per fold: what it held out, how many figures over which GPUs it was fitted on, and its choice."""
    out = []
    for (mode, row, held), params in folds.chosen.items():
        train = folds.trained_on[(mode, row, held)]
        gpus = ", ".join(sorted({m.gpu for m in train})) or "none"
        what = {"calibrated": "in sample", "transferred": f"without {held}",
                "transferred_layout": f"without {held} (from the other layouts)"}[mode]
        fitted = "no figure to fit on" if params is None else describe_params(params)
        out.append(f"{mode}: {describe(row)} {what}: {len(train)} figures on {gpus}: {fitted}")
    return out


def describe_params(params: Params) -> str:
    """'host 1 ms, scale 1.5, extend 16.9 us a kernel' (the extend cost only where a value was chosen)."""
    extend = "" if params.extend_op_us is None else f", extend {params.extend_op_us:g} us a kernel"
    return f"host {params.host_ms:g} ms, scale {params.verify_scale:g}{extend}"
