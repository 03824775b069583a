"""Calibration that transfers (issue 47, item 5): the cross-validation folds, the table and how `run` applies it.

The folds are re-selections over a grid of values (no simulation): a synthetic grid stands in for
calibration_grid.csv here. The end-to-end tests use tests/data/replication-tiny (a synthetic case whose figures
are its engine plus 0.2 ms of host time per step), copied as a second GPU.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from specplan.simulator.scenario.calibration_table import SHIPPED_TABLE, read_table
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.calibrate import GRID_FILE, figure_key
from specplan.simulator.study.replication.case_runner import Params
from specplan.simulator.study.replication.published import Case, Figure, read_case
from specplan.simulator.study.replication.replicate import ReplicationAsk, replicate
from specplan.simulator.study.replication.stats import error_statistics
from specplan.simulator.study.replication.transfer import Member, fit_folds
from tests.conftest import REPO

TINY = REPO / "tests" / "data" / "replication-tiny"
POINTS = [Params(h, s) for h in (0.0, 1.0, 2.0) for s in (1.0, 1.5)]
ROWS = {"tp": ("sglang", "0.5.14", "tp", "DeepSeek-V4-Flash"), "dp": ("sglang", "0.5.14", "dp-attention", "DeepSeek-V4-Flash")}
CELLS = [("tp", "B200", 1.0), ("tp", "H200", 1.1), ("tp", "GB300", 0.9), ("dp", "B200", 1.5), ("dp", "H200", 1.4)]


def synthetic_members() -> list[Member]:
    """A throughput figure per (layout, GPU) cell and concurrency (published 100), each its own case."""
    out = []
    for layout, gpu, _level in CELLS:
        case = Case(Path(f"/nowhere/{layout}-{gpu}"), {"gpus": {"type": gpu}}, [])
        for line, c in enumerate((1, 16, 64), start=2):
            figure = Figure("w", "a", "output_throughput", 100.0, 100.0, "tok/s", c, None, line)
            out.append(Member(case, figure, ROWS[layout], gpu))
    return out


def synthetic_grid(members: list[Member]) -> dict[Params, dict]:
    """Each figure's value at each point: 100 x its cell's level / scale, less 5% per ms of host, a little per c."""
    level = {(layout, gpu): lv for layout, gpu, lv in CELLS}
    grid: dict[Params, dict] = {}
    for p in POINTS:
        for m in members:
            layout = "tp" if m.row[2] == "tp" else "dp"
            value = 100 * level[(layout, m.gpu)] / p.verify_scale * (1 - 0.05 * p.host_ms) * (1 + 0.001 * m.figure.concurrency)
            grid.setdefault(p, {})[figure_key(m.case, m.figure)] = value
    return grid


def garbled(members: list[Member], held) -> list[Member]:
    """The members with the held-out ones' published values replaced by garbage."""
    return [dataclasses.replace(m, figure=dataclasses.replace(m.figure, value=1e-6)) if held(m) else m
            for m in members]


def test_a_fold_never_fits_on_its_held_out_figures():
    """Every leave-one-GPU-out and leave-one-layout-out fold chooses the same grid point when the figures it holds
    out are garbage; a fold that sees them (another GPU's fold) moves."""
    members = synthetic_members()
    grid = synthetic_grid(members)
    folds = fit_folds(members, grid, POINTS)
    checked = 0
    for (mode, row, held), chosen in folds.chosen.items():
        if mode == "calibrated":
            continue
        if mode == "transferred":
            def out(m, row=row, held=held):
                return m.row == row and m.gpu == held
        else:
            def out(m, row=row):
                return m.row == row
        again = fit_folds(garbled(members, out), grid, POINTS)
        assert again.chosen[(mode, row, held)] == chosen, (mode, row, held)
        checked += 1
    assert checked == 5 + 2  # one fold per GPU of each row, one per layout
    moved = fit_folds(garbled(members, lambda m: m.row == ROWS["tp"] and m.gpu == "H200"), grid, POINTS)
    assert moved.chosen[("transferred", ROWS["tp"], "B200")] != folds.chosen[("transferred", ROWS["tp"], "B200")]
    assert moved.chosen[("transferred", ROWS["tp"], "H200")] == folds.chosen[("transferred", ROWS["tp"], "H200")]


def test_leave_one_gpu_out_fits_on_the_other_gpus_only():
    members = synthetic_members()
    folds = fit_folds(members, synthetic_grid(members), POINTS)
    trained = folds.trained_on[("transferred", ROWS["tp"], "H200")]
    assert {m.gpu for m in trained} == {"B200", "GB300"} and {m.row for m in trained} == {ROWS["tp"]}
    across = folds.trained_on[("transferred_layout", ROWS["dp"], "dp-attention")]
    assert {m.row for m in across} == {ROWS["tp"]}
    assert folds.chosen[("calibrated", ROWS["dp"], "")] == Params(0.0, 1.5)   # 1.45 / 1.5: the nearest level


def paired_members() -> list[Member]:
    """Per (layout, GPU) cell and concurrency, a run's TPOT figure and its throughput figure (published 100 each)."""
    out = []
    for layout, gpu, _level in CELLS:
        case = Case(Path(f"/nowhere/{layout}-{gpu}"), {"gpus": {"type": gpu}}, [])
        for line, c in enumerate((1, 16, 64), start=2):
            for metric, unit, shift in (("median_tpot", "ms", 0), ("output_throughput", "tok/s", 10)):
                figure = Figure("w", "a", metric, 100.0, 100.0, unit, c, None, line + shift)
                out.append(Member(case, figure, ROWS[layout], gpu))
    return out


def paired_grid(members: list[Member]) -> dict[Params, dict]:
    """The TPOT figures are right at host 1 ms, scale 1; the throughput figures at host 0, scale 1.5."""
    grid: dict[Params, dict] = {}
    for p in POINTS:
        for m in members:
            right = Params(1.0, 1.0) if m.figure.metric == "median_tpot" else Params(0.0, 1.5)
            miss = abs(p.host_ms - right.host_ms) * 0.1 + abs(p.verify_scale - right.verify_scale) * 0.2
            grid.setdefault(p, {})[figure_key(m.case, m.figure)] = 100.0 * (1 + miss)
    return grid


def test_each_fit_reads_the_tpot_figures_only():
    """Every fold chooses the point its TPOT figures choose: garbage in the throughput figures moves no fold."""
    members = paired_members()
    grid = paired_grid(members)
    folds = fit_folds(members, grid, POINTS)
    assert set(folds.chosen.values()) == {Params(1.0, 1.0)}
    assert all(m.figure.metric == "median_tpot" for train in folds.trained_on.values() for m in train)
    again = fit_folds(garbled(members, lambda m: m.figure.metric == "output_throughput"), grid, POINTS)
    assert again.chosen == folds.chosen


def test_a_fold_without_tpot_figures_fits_on_its_throughput():
    """The synthetic throughput-only cells (no TPOT figure): their own point, as before."""
    members = synthetic_members()
    folds = fit_folds(members, synthetic_grid(members), POINTS)
    assert folds.chosen[("calibrated", ROWS["dp"], "")] == Params(0.0, 1.5)
    assert len(folds.trained_on[("calibrated", ROWS["dp"], "")]) == 6


def test_a_point_not_simulated_for_every_fit_figure_is_not_chosen():
    """A grid point missing one of a fold's figures (a grid evaluated in part) is not eligible; none left: no fit."""
    members = paired_members()
    grid = paired_grid(members)
    tpot = next(m for m in members if m.figure.metric == "median_tpot" and m.gpu == "B200" and m.row == ROWS["tp"])
    del grid[Params(1.0, 1.0)][figure_key(tpot.case, tpot.figure)]
    folds = fit_folds(members, grid, POINTS)
    assert folds.chosen[("calibrated", ROWS["tp"], "")] not in (None, Params(1.0, 1.0))
    assert folds.chosen[("transferred", ROWS["tp"], "B200")] == Params(1.0, 1.0)   # B200 held out: all there
    assert folds.chosen[("calibrated", ROWS["dp"], "")] == Params(1.0, 1.0)
    assert fit_folds(members, {}, POINTS).chosen[("calibrated", ROWS["tp"], "")] is None


def test_the_fold_of_a_held_out_gpu_never_reads_its_tpot_figures():
    """On the TPOT path too: garbage in one GPU's figures leaves its own fold's choice; a fold that sees figures
    moved to another point (two GPUs' TPOT figures right at host 0, scale 1.5) follows them."""
    members = paired_members()
    grid = paired_grid(members)
    folds = fit_folds(members, grid, POINTS)
    held = fit_folds(garbled(members, lambda m: m.gpu == "H200" and m.row == ROWS["tp"]), grid, POINTS)
    assert held.chosen[("transferred", ROWS["tp"], "H200")] == folds.chosen[("transferred", ROWS["tp"], "H200")]
    assert all(m.gpu != "H200" for m in held.trained_on[("transferred", ROWS["tp"], "H200")])
    there = Params(0.0, 1.5)
    moved = [dataclasses.replace(m, figure=dataclasses.replace(m.figure, value=grid[there][figure_key(m.case, m.figure)]))
             if m.gpu in ("H200", "GB300") and m.row == ROWS["tp"] else m for m in members]
    assert fit_folds(moved, grid, POINTS).chosen[("transferred", ROWS["tp"], "B200")] == there


def two_gpus(tmp_path: Path) -> Path:
    """The tiny case, and a copy of it as measured on a second GPU (the same figures)."""
    folder = tmp_path / "cases"
    shutil.copytree(TINY, folder / "tiny-a")
    shutil.copytree(TINY, folder / "tiny-b")
    source = folder / "tiny-b" / "source.yaml"
    source.write_text(source.read_text().replace("gpus: {type: cpu, count: 1}", "gpus: {type: cpu2, count: 1}"))
    return folder


def test_leave_one_gpu_out_recovers_the_host_time_and_writes_the_table(tmp_path):
    folder = two_gpus(tmp_path)
    cases = [read_case(p) for p in sorted(folder.iterdir())]
    table = tmp_path / "table.yaml"
    ask = ReplicationAsk(calibrate=True, host_grid=(0.0, 0.2, 0.4), scale_grid=(1.0, 1.1), table=table,
                         command="specplan replicate cases --calibrate --write-table table.yaml")
    result = replicate(cases, ask, RunOptions(out_dir=tmp_path / "out"))
    assert result.params["transferred"]["none tp unknown without cpu"] == Params(0.2, 1.0)   # fitted on cpu2 alone
    transferred = error_statistics(result.rows, "transferred")
    assert transferred["figures"] == 8 and transferred["max_abs_error"] < 1e-5
    read = read_table(table)
    assert read.version == 1 and len(read.rows) == 1 and read.rows[0].calibration.term("host_cycle_ms").value == 0.2
    assert read.rows[0].label.startswith("4 public none TP runs of unknown (measured on 0,") and read.written_by == ask.command
    replicate(cases, dataclasses.replace(ask, grid=tmp_path / "out" / GRID_FILE), RunOptions(out_dir=tmp_path / "b"))
    assert read_table(table).version == 2   # a rewrite bumps the version


def test_a_refit_from_the_grid_file_simulates_nothing(tmp_path, monkeypatch):
    """--grid: every grid point the earlier run wrote is read back; no figure is simulated again."""
    folder = two_gpus(tmp_path)
    ask = ReplicationAsk(calibrate=True, host_grid=(0.0, 0.2), scale_grid=(1.0,))
    first = replicate([read_case(p) for p in sorted(folder.iterdir())], ask, RunOptions(out_dir=tmp_path / "one"))
    from specplan.simulator.study.replication import calibrate

    def refuse(*_args):
        raise AssertionError("simulated again")

    monkeypatch.setattr(calibrate, "case_values", refuse)
    again = replicate([read_case(p) for p in sorted(folder.iterdir())],
                      dataclasses.replace(ask, grid=tmp_path / "one" / GRID_FILE),
                      RunOptions(out_dir=tmp_path / "two", workers=2))   # nothing left to run: no process pool
    assert again.params == first.params
    assert error_statistics(again.rows, "transferred") == error_statistics(first.rows, "transferred")


def test_one_gpu_row_is_not_shipped(tmp_path, cli):
    code, _out, _err = cli("replicate", str(TINY), "--out", str(tmp_path / "out"), "--calibrate", "--write-table",
                           str(tmp_path / "t.yaml"), "--quiet")
    assert code == 0
    read = read_table(tmp_path / "t.yaml")
    assert read.rows == [] and "one GPU (cpu)" in read.not_shipped[0]["reason"]


def test_write_table_needs_calibrate(tmp_path, cli):
    code, _out, err = cli("replicate", str(TINY), "--out", str(tmp_path), "--write-table", str(tmp_path / "t.yaml"))
    assert code == 2 and err.count("\n") == 1 and "--write-table needs --calibrate" in err


# --- the shipped table, applied by `run` ---

AGENTIC = REPO / "scenarios" / "agentic.yaml"   # sglang 0.5.14, TP, V4-Flash on B200: the shipped table has its row
SHORT = ("--set", "horizon.duration_s=2")


def shipped_row(layout: str):
    return next(row for row in read_table().rows if row.match == {"engine": "sglang", "engine_version": "0.5.14",
                                                                   "layout": layout, "model": "DeepSeek-V4-Flash"})


def test_the_shipped_table_is_the_commands_own():
    """Written by `specplan replicate --write-table` (its provenance), never by hand; no DeepSeek-V4-Pro figure."""
    raw = yaml.safe_load(SHIPPED_TABLE.read_text())
    assert raw["written_by"].startswith("specplan replicate benchmarks/published --calibrate")
    for row in read_table().rows:
        assert all("pro" not in case.lower() for case in row.fitted_on["cases"])
        assert row.fitted_on["gpus"] and len(row.fitted_on["gpus"]) >= 2


def test_run_names_the_shipped_row(tmp_path, cli):
    row = shipped_row("tp")
    code, out, _err = cli("run", str(AGENTIC), "--out", str(tmp_path), *SHORT)
    assert code == 0
    assert f"calibration: calibrated on {row.label} (the shipped calibration table v" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["calibration"].endswith(row.label) and summary["calibration_deployment"] == "sglang 0.5.14 TP, DeepSeek-V4-Flash"


KNOWN_ROW = """format: specplan-calibration-table/1
version: 7
written_by: a test's table
rows:
  - match: {engine: sglang, engine_version: 0.5.14, layout: tp}
    label: 3 test runs
    terms:
      host_cycle_ms: {value: 2.5, interval: null, source: test}
      verify_scale: {value: 1.2, interval: null, source: test}
    errors: {transferred: 0.123}
"""


def test_run_applies_the_matching_row_and_uncalibrated_leaves_it_out(tmp_path, cli, monkeypatch):
    from specplan.simulator.scenario import calibration_table

    table = tmp_path / "table.yaml"
    table.write_text(KNOWN_ROW)
    monkeypatch.setattr(calibration_table, "SHIPPED_TABLE", table)
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(tmp_path / "cache"))
    code, out, _err = cli("run", str(AGENTIC), "--out", str(tmp_path / "cal"), *SHORT)
    assert code == 0
    assert "calibration: calibrated on 3 test runs (the shipped calibration table v7;" in out
    assert "applied: host_cycle_ms 2.5, verify_scale 1.2" in out and "median |error| on its development set 12.3%" in out
    resolved = yaml.safe_load((tmp_path / "cal" / "scenario.resolved.yaml").read_text())
    assert resolved["engine"]["host_overhead_ms"] == 2.5
    assert "scaled-x1.2-" in str(resolved["hardware"]["profile"])
    code, out, _err = cli("run", str(AGENTIC), "--out", str(tmp_path / "raw"), *SHORT, "--uncalibrated")
    assert code == 0 and "calibration" not in out
    assert "calibration" not in json.loads((tmp_path / "raw" / "summary.json").read_text())
    physics = yaml.safe_load((tmp_path / "raw" / "scenario.resolved.yaml").read_text())
    assert physics["engine"]["host_overhead_ms"] != 2.5 and "scaled" not in str(physics["hardware"]["profile"])


def test_no_matching_row_says_so_and_runs_the_physics(tmp_path, cli):
    """vLLM 0.24 TP (scenarios/default.yaml) has no row: one line, and the run is the physics alone."""
    scenario = REPO / "scenarios" / "default.yaml"
    short = ("--set", "horizon={duration_s: 3, warmup_s: 1}")
    code, out, _err = cli("run", str(scenario), "--out", str(tmp_path / "a"), *short)
    assert code == 0
    assert "calibration: none: the shipped calibration table v" in out and "has no row for vllm 0.24 TP" in out
    code, _out, _err = cli("run", str(scenario), "--out", str(tmp_path / "b"), *short, "--uncalibrated")
    drop = ("calibration", "calibration_deployment", "calibration_transfer", "wall_s")
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("a", "b"))
    assert a["calibration"] == "none"
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def test_uncalibrated_and_a_calibration_file_are_refused_together(tmp_path, cli):
    code, _out, err = cli("run", str(AGENTIC), "--out", str(tmp_path), "--uncalibrated", "--calibration",
                          str(tmp_path / "c.yaml"))
    assert code == 2 and err.count("\n") == 1 and "--uncalibrated and --calibration FILE" in err


@pytest.mark.parametrize(("text", "message"), [
    ("format: nope\n", "expected format: specplan-calibration-table/1"),
    ("format: specplan-calibration-table/1\nversion: 0\n", "version must be a whole number >= 1"),
    ("format: specplan-calibration-table/1\nversion: 1\nrows: [{match: {engine: sglang}}]\n",
     "rows[0].match must give engine, engine_version, layout"),
])
def test_a_bad_table_is_one_line(tmp_path, text, message):
    from specplan.simulator.scenario.calibration import CalibrationError

    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(CalibrationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_table(path)
