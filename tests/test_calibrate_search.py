"""The calibration's search (issue 46 item 4: `replicate --calibrate` in minutes): which grid points it simulates.

On a full grid (tests/data/calibration-grid-full-e3e4468.csv.gz: a record's calibration_grid.csv with every
figure at all 48 points, written before the search) the search is run with that file as its simulator: it must choose each fold's full-grid point (or one a grid step
away), at a fraction of the pairs, and a fold's points must never depend on the figures it holds out.
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest

from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication import calibrate
from specplan.simulator.study.replication.calibrate import (
    GRID_FILE,
    HOST_GRID_MS,
    SCALE_GRID,
    best,
    design_points,
    figure_key,
    grid_points,
    read_grid,
    search_grid,
)
from specplan.simulator.study.replication.case_runner import CaseRunner, Params, availability
from specplan.simulator.study.replication.published import Figure, read_case
from specplan.simulator.study.replication.replicate import (
    ReplicationAsk,
    fold_fits,
    gpu_of,
    read_cases,
    replicate,
    row_key,
)
from specplan.simulator.study.replication.transfer import Member, fit_folds
from tests.conftest import REPO

PUBLISHED = REPO / "benchmarks" / "published"
# Every figure at every grid point (a --full-grid run, the record of e3e4468, before the search): what a full
# grid chooses, against which the search is checked; the record's own grid file holds the searched points only.
FULL_GRID = REPO / "tests" / "data" / "calibration-grid-full-e3e4468.csv.gz"
TINY = REPO / "tests" / "data" / "replication-tiny"


@cache
def full_grid() -> tuple[list[Member], dict]:
    """The development set's serving figures that the full grid holds, as the fits see them, and the grid."""
    cases = [c for c in read_cases(PUBLISHED) if c.kind != "step" and availability(c) is None]
    with tempfile.TemporaryDirectory() as folder:
        full = Path(folder) / GRID_FILE
        full.write_bytes(gzip.decompress(FULL_GRID.read_bytes()))
        grid = read_grid(full, [(c, f) for c in cases for f in c.figures])
    held = grid[Params(0.0, 1.0)]
    members = [Member(c, f, row_key(c), gpu_of(c)) for c in cases for f in c.figures if figure_key(c, f) in held]
    return members, grid


def searched(members: list[Member], grid: dict) -> tuple[dict, dict, list]:
    """The search run with the full grid as its simulator: each fold's points, the values it read, the pairs."""
    figures: dict[str, list] = {}
    for m in members:
        figures.setdefault(m.case.name, []).append((m.case, m.figure))
    values: dict = {}
    pairs: list = []

    def simulate(wanted):
        pairs.extend(wanted)
        for name, p in wanted:
            for case, figure in figures[name]:
                values.setdefault(p, {})[figure_key(case, figure)] = grid[p][figure_key(case, figure)]

    found = search_grid(fold_fits(members), figures, values, simulate, HOST_GRID_MS, SCALE_GRID)
    return {key: points for (key, _extend), points in found.items()}, values, pairs   # one slice: the engine's own


def steps_apart(a: Params, b: Params) -> int:
    return max(abs(HOST_GRID_MS.index(a.host_ms) - HOST_GRID_MS.index(b.host_ms)),
               abs(SCALE_GRID.index(a.verify_scale) - SCALE_GRID.index(b.verify_scale)))


def test_the_search_picks_the_full_grids_point_on_a_full_grid():
    """Every in-sample row and every fold: the point the full grid chooses, or one within a grid step; the search
    reads under a third of the full grid's (case, point) pairs."""
    members, grid = full_grid()
    full = fit_folds(members, grid, grid_points(HOST_GRID_MS, SCALE_GRID))
    visited, values, pairs = searched(members, grid)
    found = fit_folds(members, values, lambda key: visited[key])
    assert {k for k, p in full.chosen.items() if p is not None} == {k for k, p in found.chosen.items() if p is not None}
    for key, point in full.chosen.items():
        if point is not None:
            assert steps_apart(found.chosen[key], point) <= 1, (key, found.chosen[key], point)
    every = len({m.case.name for m in members}) * len(HOST_GRID_MS) * len(SCALE_GRID)
    assert len(set(pairs)) == len(pairs) and len(pairs) < every / 3


def test_a_folds_points_never_depend_on_its_held_out_figures():
    """Garbage in place of the held-out GPU's (or layout's) published values: the fold simulates the same points and
    chooses the same one; the in-sample fit, which sees them, moves."""
    members, grid = full_grid()
    visited, values, _pairs = searched(members, grid)
    folds = fit_folds(members, values, lambda key: visited[key])
    checked = 0
    for (mode, row, held), chosen in folds.chosen.items():
        if mode == "calibrated" or chosen is None:
            continue
        out = ((lambda m, row=row, held=held: m.row == row and m.gpu == held) if mode == "transferred"
               else (lambda m, row=row: m.row == row))
        garbled = [dataclasses.replace(m, figure=dataclasses.replace(m.figure, value=m.figure.value * 50))
                   if out(m) else m for m in members]
        again, values_again, _ = searched(garbled, grid)
        refit = fit_folds(garbled, values_again, lambda key, again=again: again[key])
        assert again[(mode, row, held)] == visited[(mode, row, held)], (mode, row, held)
        assert refit.chosen[(mode, row, held)] == chosen
        checked += 1
    assert checked >= 8
    dp = ("sglang", "0.5.14", "dp-attention", "DeepSeek-V4-Flash")
    garbled = [dataclasses.replace(m, figure=dataclasses.replace(m.figure, value=m.figure.value * 50))
               if m.row == dp and m.gpu == "B200" else m for m in members]
    again, _values, _ = searched(garbled, grid)
    assert again[("calibrated", dp, "")] != visited[("calibrated", dp, "")]


def test_a_fit_chooses_only_among_points_where_all_its_figures_were_simulated():
    """A better point that lacks one of the fit's figures is not eligible."""
    members, grid = full_grid()
    train = [(m.case, m.figure) for m in members if m.row == ("sglang", "0.5.14", "dp-attention", "DeepSeek-V4-Flash") and m.goal]
    points = grid_points(HOST_GRID_MS, SCALE_GRID)
    chosen = best(train, grid, points)
    partial = {p: dict(v) for p, v in grid.items()}
    del partial[chosen][figure_key(*train[0])]
    assert best(train, partial, points) != chosen
    assert best(train, partial, [chosen, *[p for p in points if p != chosen]]) != chosen


def test_the_design_holds_the_corners_the_middle_and_the_predicted_point():
    assert design_points(HOST_GRID_MS, SCALE_GRID) == [Params(0.0, 0.7), Params(0.0, 1.0), Params(0.0, 3.0),
                                                       Params(1.0, 1.5), Params(4.0, 0.7), Params(4.0, 3.0)]


def tiny_cases(tmp_path):
    """The tiny case (its figures: the engine plus 0.2 ms of host time per step) on two GPUs."""
    folder = tmp_path / "cases"
    shutil.copytree(TINY, folder / "tiny-a")
    shutil.copytree(TINY, folder / "tiny-b")
    source = folder / "tiny-b" / "source.yaml"
    source.write_text(source.read_text().replace("gpus: {type: cpu, count: 1}", "gpus: {type: cpu2, count: 1}"))
    return [read_case(p) for p in sorted(folder.iterdir())]


@pytest.mark.slow("simulates the tiny cases at 43 grid points")
def test_the_search_and_the_full_grid_agree_end_to_end_and_the_search_simulates_less(tmp_path, monkeypatch):
    """The tiny cases on a 5 x 3 grid: the same fits as every point, fewer tasks, and never the predicted point
    (the plain predictions are its values)."""
    ran: list[Params] = []
    real = calibrate.case_values

    def counted(members, params, out_dir):
        ran.append(params)
        return real(members, params, out_dir)

    monkeypatch.setattr(calibrate, "case_values", counted)
    ask = ReplicationAsk(calibrate=True, host_grid=(0.0, 0.1, 0.2, 0.3, 0.4), scale_grid=(0.9, 1.0, 1.1))
    cases = tiny_cases(tmp_path)
    search = replicate(cases, ask, RunOptions(out_dir=tmp_path / "search"))
    searched_tasks, ran[:] = list(ran), []
    full = replicate(cases, dataclasses.replace(ask, full_grid=True), RunOptions(out_dir=tmp_path / "full"))
    assert search.params == full.params and search.params["calibrated"]["none tp unknown"] == Params(0.2, 1.0)
    assert len(searched_tasks) < len(ran) == 2 * (15 - 1)
    assert Params(0.0, 1.0) not in searched_tasks + ran
    kept = read_grid(tmp_path / "search" / GRID_FILE, [(c, f) for c in cases for f in c.figures])
    assert set(kept) == set(searched_tasks) | {Params(0.0, 1.0)}   # the file holds every point the fits read


def test_the_predicted_run_is_the_grid_point_of_its_own_host_time(tmp_path):
    case = read_case(TINY)
    figure: Figure = case.figures[0]
    assert CaseRunner(case, tmp_path).predict(figure, Params()) == CaseRunner(case, tmp_path).predict(
        figure, Params(0.0, 1.0))


@pytest.mark.parametrize("flag", ["--full-grid"])
def test_full_grid_needs_calibrate(tmp_path, cli, flag):
    code, _out, err = cli("replicate", str(TINY), "--out", str(tmp_path / "o"), flag)
    assert code == 2 and f"{flag} needs --calibrate" in err
