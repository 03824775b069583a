"""The calibration's extend term (issue 47, items 4-5): an extend step's host cost per kernel, fitted per engine
version and layout where the engine prices such a step by its kernel launches, applied by `run` only there.

What is checked: the search's third axis (its design, and a case whose engine does not price the term simulated
once per host time and scale, never at every extend value); a replication case's scenario at an extend point;
the table's extend term (fitted where a row's cases price it, its interval the held-out folds' choices, and said
not fitted elsewhere); a calibration or table row applying it where the engine prices it and saying it does not
elsewhere, in the printout and in the scenario the run resolved.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import Callable

import yaml

from specplan.engines.eager import PUBLIC_EAGER_COST
from specplan.simulator.engine.assembly import prices_extend_by_launches
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.calibration import (
    Calibration,
    Term,
    apply_calibration,
    deployment_of,
)
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.calibrate import (
    GRID_FILE,
    canonical,
    design_points,
    figure_key,
)
from specplan.simulator.study.replication.case_runner import Params, calibrated_scenario
from specplan.simulator.study.replication.published import read_case
from specplan.simulator.study.replication.replicate import ReplicationAsk, replicate
from specplan.simulator.study.replication.table import EXTEND_NONE, write_table
from specplan.simulator.study.replication.transfer import Member, fit_folds
from tests.conftest import REPO
from tests.test_transfer import (  # AGENTIC: sglang 0.5.14 TP, V4-Flash on B200, priced by its launches
    AGENTIC,
    KNOWN_ROW,
    POINTS,
    ROWS,
    SHORT,
    TINY,
    synthetic_grid,
    synthetic_members,
    two_gpus,
)

V4_CASE = REPO / "benchmarks" / "published" / "sglang-cookbook-v4-flash-b200-fp4-balanced"


def extend_calibration(scenario, value: float) -> Calibration:
    return Calibration(deployment_of(scenario), {"extend_op_us": Term(value, (10.0, 28.5), "a test")}, path="c.yaml")


def test_each_extend_value_is_its_own_slice_of_the_search():
    points = design_points((0.0, 1.0, 4.0), (0.7, 1.0, 3.0), 16.9)
    assert points == [Params(0.0, 0.7, 16.9), Params(0.0, 1.0, 16.9), Params(0.0, 3.0, 16.9), Params(1.0, 1.0, 16.9),
                      Params(4.0, 0.7, 16.9), Params(4.0, 3.0, 16.9)]


def test_an_unpriced_case_takes_the_engines_own_extend_cost():
    assert canonical(Params(1.0, 1.5, 16.9), priced=False) == Params(1.0, 1.5, None)
    assert canonical(Params(1.0, 1.5, 16.9), priced=True) == Params(1.0, 1.5, 16.9)


def test_a_v4_case_at_an_extend_point_runs_with_that_cost(tmp_path):
    case = read_case(V4_CASE)
    scenario = calibrated_scenario(case, [], Params(0.5, 1.0, 16.9), tmp_path)
    assert scenario.engine.cuda_graph.extend_op_us == 16.9 and scenario.engine.host_overhead_ms == 0.5
    assert calibrated_scenario(case, [], Params(), tmp_path).engine.cuda_graph.extend_op_us is None
    assert prices_extend_by_launches(scenario)
    assert not prices_extend_by_launches(load_scenario(TINY / "scenario.yaml"))


def test_a_case_whose_engine_does_not_price_it_is_simulated_once_per_host_and_scale(tmp_path):
    folder = two_gpus(tmp_path)
    ask = ReplicationAsk(calibrate=True, host_grid=(0.0, 0.2, 0.4), scale_grid=(1.0, 1.1),
                         extend_grid=(None, 10.0, 28.5))
    result = replicate([read_case(p) for p in sorted(folder.iterdir())], ask, RunOptions(out_dir=tmp_path / "out"))
    with (tmp_path / "out" / GRID_FILE).open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["extend_op_us"] for r in rows} == {""}   # every simulated point at the engine's own extend cost
    assert all(p.extend_op_us is None for fits in result.params.values() for p in fits.values())
    assert result.params["transferred"]["none tp unknown without cpu"] == Params(0.2, 1.0)


def ttft_members(members: list[Member]) -> list[Member]:
    """A TTFT figure (published 100 ms) beside each case's first figure."""
    return [dataclasses.replace(m, figure=dataclasses.replace(m.figure, metric="median_ttft", line=99))
            for m in members if m.figure.line == 2]


def extended_grid(members: list[Member], ttft: list[Member], right: Callable[[Member], float | None]) -> dict:
    """The synthetic grid at the engine's own extend cost and at 16.9 us: the same throughputs, and each TTFT figure
    published (100) at the extend value `right` gives its case, 40% low elsewhere."""
    base = synthetic_grid(members)
    grid: dict[Params, dict] = {}
    for p in POINTS:
        for extend in (None, 16.9):
            at = dataclasses.replace(p, extend_op_us=extend)
            grid[at] = dict(base[p])
            grid[at].update({figure_key(m.case, m.figure): 100.0 if right(m) == extend else 60.0 for m in ttft})
    return grid


def test_a_fold_picks_its_extend_value_by_its_own_ttft_figures():
    members = synthetic_members()
    ttft = ttft_members(members)
    grid = extended_grid(members, ttft, lambda m: 16.9 if m.gpu != "B200" else None)
    points = list(grid)
    folds = fit_folds(members + ttft, grid, points)
    tp = ROWS["tp"]
    assert folds.chosen[("transferred", tp, "B200")].extend_op_us == 16.9   # its training GPUs' TTFTs say 16.9
    assert folds.chosen[("transferred", tp, "H200")].extend_op_us is None   # B200 and GB300 disagree: a tie, the
    # engine's own first
    assert folds.chosen[("calibrated", tp, "")].extend_op_us == 16.9
    untouched = fit_folds(members, grid, points)   # no TTFT figure: the engine's own, host and scale unchanged
    assert all(p is None or p.extend_op_us is None for p in untouched.chosen.values())
    garbled_grid = {p: {k: (1e-6 if k[0].endswith("B200") else v) for k, v in values.items()}
                    for p, values in grid.items()}   # the held-out GPU's values never pick its fold's value
    assert fit_folds(members + ttft, garbled_grid, points).chosen[("transferred", tp, "B200")] == \
        folds.chosen[("transferred", tp, "B200")]


def test_the_table_fits_the_extend_term_where_the_rows_cases_price_it(tmp_path):
    members = synthetic_members()
    ttft = ttft_members(members)
    grid = extended_grid(members, ttft, lambda m: 16.9 if m.gpu != "B200" else None)
    everything = members + ttft
    folds = fit_folds(everything, grid, list(grid))
    tp = {m.case.name for m in members if m.row[2] == "tp"}
    path = write_table(tmp_path / "t.yaml", everything, folds, grid, "a test", priced=tp, extends=(None, 16.9))
    rows = {row["match"]["layout"]: row["terms"]["extend_op_us"] for row in yaml.safe_load(path.read_text())["rows"]}
    assert rows["tp"]["value"] == 16.9 and "kernel launches" in rows["tp"]["source"]
    assert "among the engine's own, 16.9 us a kernel" in rows["tp"]["source"]
    assert "over the row's 3 TTFT figures" in rows["tp"]["source"]
    own = PUBLIC_EAGER_COST.per_launch_us
    held = [folds.chosen[("transferred", ROWS["tp"], gpu)] for gpu in ("B200", "GB300", "H200")]
    assert [p.extend_op_us for p in held] == [16.9, None, None]   # without B200 the TTFTs agree; else a tie
    assert rows["tp"]["interval"] == [own, 16.9]   # the engine's own read as the launcher's figure
    assert rows["dp-attention"] == {"value": None, "interval": None, "source": EXTEND_NONE}


def test_a_calibration_applies_the_extend_cost_only_where_the_engine_prices_launches():
    v4 = load_scenario(V4_CASE / "scenario.yaml")
    applied = apply_calibration(extend_calibration(v4, 16.9), v4, launch_priced=prices_extend_by_launches)
    assert applied.overrides == ["engine.cuda_graph.extend_op_us=16.9"] and applied.not_applied == []
    tiny = load_scenario(TINY / "scenario.yaml")
    applied = apply_calibration(extend_calibration(tiny, 16.9), tiny, launch_priced=prices_extend_by_launches)
    assert applied.overrides == [] and applied.not_applied == ["extend_op_us"]
    assert any(line.startswith("  not applied: extend_op_us 16.9 (engine.cuda_graph.extend_op_us: this engine "
                               "prices no step by its kernel launches)") for line in applied.lines())


ROW = KNOWN_ROW.replace("verify_scale: {value: 1.2, interval: null, source: test}",
                       "extend_op_us: {value: 28.5, interval: [16.9, 45.0], source: test}")


def test_run_applies_a_rows_extend_cost_and_names_it(tmp_path, cli, monkeypatch):
    from specplan.simulator.scenario import calibration_table

    table = tmp_path / "table.yaml"
    table.write_text(ROW)
    monkeypatch.setattr(calibration_table, "SHIPPED_TABLE", table)
    code, out, _err = cli("run", str(AGENTIC), "--out", str(tmp_path / "cal"), *SHORT)
    assert code == 0 and "applied: host_cycle_ms 2.5, extend_op_us 28.5" in out
    resolved = yaml.safe_load((tmp_path / "cal" / "scenario.resolved.yaml").read_text())
    assert resolved["engine"]["cuda_graph"]["extend_op_us"] == 28.5
    code, _out, _err = cli("run", str(AGENTIC), "--out", str(tmp_path / "raw"), *SHORT, "--uncalibrated")
    raw = yaml.safe_load((tmp_path / "raw" / "scenario.resolved.yaml").read_text())
    assert code == 0 and raw["engine"]["cuda_graph"].get("extend_op_us") is None
    assert "calibration" not in json.loads((tmp_path / "raw" / "summary.json").read_text())


def test_a_calibration_file_with_an_extend_cost_runs_an_unpriced_scenario_and_says_so(tmp_path, cli):
    from specplan.simulator.scenario.calibration import write_calibration

    tiny = load_scenario(TINY / "scenario.yaml")
    path = write_calibration(extend_calibration(tiny, 16.9), tmp_path / "c.yaml")
    code, out, _err = cli("run", str(TINY / "scenario.yaml"), "--out", str(tmp_path / "run"), "--calibration",
                          str(path))
    assert code == 0 and "not applied: extend_op_us 16.9" in out
    resolved = yaml.safe_load((tmp_path / "run" / "scenario.resolved.yaml").read_text())
    assert ((resolved["engine"].get("cuda_graph") or {}).get("extend_op_us")) is None


def test_a_grid_file_written_before_the_extend_term_reads_as_the_engines_own(tmp_path):
    from specplan.simulator.study.replication.calibrate import read_grid

    case = read_case(TINY)
    figure = case.figures[0]
    path = tmp_path / "old.csv"
    path.write_text("source,line,metric,published,host_ms,verify_scale,value\n"
                    f"{case.name},{figure.line},{figure.metric},{figure.value},0.5,1.2,42.0\n")
    assert read_grid(path, [(case, figure)]) == {Params(0.5, 1.2, None): {figure_key(case, figure): 42.0}}


def test_extend_us_needs_calibrate_and_a_positive_value(tmp_path, cli):
    code, _out, err = cli("replicate", str(TINY), "--out", str(tmp_path / "a"), "--extend-us", "10")
    assert code == 2 and err.count("\n") == 1 and "--extend-us needs --calibrate" in err
    code, _out, err = cli("replicate", str(TINY), "--out", str(tmp_path / "b"), "--calibrate", "--extend-us", "-3")
    assert code == 2 and err.count("\n") == 1 and "give 'own' or a positive number of µs" in err


def test_extend_us_is_the_tables_provenance_and_an_unpriced_row_says_so(tmp_path, cli):
    folder = two_gpus(tmp_path)
    table = tmp_path / "t.yaml"
    code, _out, _err = cli("replicate", str(folder), "--out", str(tmp_path / "out"), "--calibrate", "--extend-us",
                           "own", "16.9", "--write-table", str(table), "--quiet")
    body = yaml.safe_load(table.read_text())
    assert code == 0 and "--calibrate --extend-us own 16.9 --write-table" in body["written_by"]
    assert body["rows"][0]["terms"]["extend_op_us"] == {"value": None, "interval": None, "source": EXTEND_NONE}
