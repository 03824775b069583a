"""The replication suite: a tiny synthetic case end to end, availability, and bad published CSVs.

tests/data/replication-tiny is a synthetic case (not a measurement): its
published figures are the closed forms of its scenario's engine plus 0.2 ms
of host time per step, so the uncalibrated prediction misses them by a
known amount and the calibration must recover 0.2 ms.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.case_runner import AS_RUN, NEAREST
from specplan.simulator.study.replication.published import read_case
from specplan.simulator.study.replication.replicate import (
    ReplicationAsk,
    case_status,
    missing_cases,
    replicate,
    statuses,
)
from specplan.simulator.study.replication.stats import error_statistics
from tests.conftest import REPO

TINY = REPO / "tests" / "data" / "replication-tiny"
PUBLISHED = REPO / "benchmarks" / "published"


def test_tiny_case_end_to_end(tmp_path, cli):
    code, out, _err = cli("replicate", str(TINY), "--out", str(tmp_path))
    assert code == 0
    for name in ("replication.csv", "replication.md", "replication.png", "replication.json"):
        assert (tmp_path / name).exists()
    assert "median |error| 1.5%, max 2.0%" in out  # TPOT 10 vs 10.2 ms, throughput 11/0.101 vs 11/0.103 s


def test_uncalibrated_errors_are_the_missing_host_time(tmp_path):
    rows = replicate([read_case(TINY)], None, RunOptions(out_dir=tmp_path)).rows.set_index(["arm", "metric"])
    assert rows.loc[("fast", "median_tpot"), "predicted_error"] == pytest.approx(10 / 10.2 - 1, abs=1e-9)
    assert rows.loc[("slow", "median_tpot"), "predicted_value"] == pytest.approx(0.020)  # in seconds, as published
    assert rows.loc[("fast", "output_throughput"), "predicted_error"] == pytest.approx(0.103 / 0.101 - 1, rel=1e-4)  # published to 6 digits
    assert rows.loc[("slow/fast", "speedup_sign"), "predicted_value"] == -1


def test_calibration_recovers_the_host_time(tmp_path):
    """Fitted per engine version and layout (the tiny case's engine 'none', tp); its one GPU leaves no GPU to
    transfer from (no transferred value: tests/test_transfer.py covers two)."""
    result = replicate([read_case(TINY)], ReplicationAsk(calibrate=True, host_grid=(0.0, 0.2, 0.4),
                                                         scale_grid=(1.0, 1.1)), RunOptions(out_dir=tmp_path))
    assert result.params["calibrated"]["none tp unknown"].host_ms == 0.2
    stats = error_statistics(result.rows, "calibrated")
    assert stats["figures"] == 4 and stats["max_abs_error"] < 1e-5  # published values carry 6 digits
    assert error_statistics(result.rows, "transferred")["figures"] == 0


def test_missing_profile_is_reported_and_left_out(tmp_path):
    case = tmp_path / "case"
    shutil.copytree(TINY, case)
    source = (case / "source.yaml").read_text()
    (case / "source.yaml").write_text(source + "requires: {profiles: [builtin:no-such-gpu-profile]}\n")
    rows = replicate([read_case(case)], None, RunOptions(out_dir=tmp_path / "out")).rows
    assert (rows["status"] == "profile not available: builtin:no-such-gpu-profile").all()
    assert error_statistics(rows, "predicted")["figures"] == 0


@pytest.mark.slow("simulates every case of the development set")
def test_the_development_set_says_why_each_case_is_out(tmp_path):
    """Every committed case reads; each one that cannot run says why (never a silent drop).

    Availability and scenario loading only (`statuses`): predicting the whole set is the
    benchmark's job (`specplan replicate benchmarks/published`), not a test's.
    """
    cases = [read_case(p) for p in sorted(PUBLISHED.iterdir()) if (p / "source.yaml").exists()]
    assert len(cases) >= 22
    rows_by_id, _runnable = statuses(cases, tmp_path, lambda _m: None)
    rows = pd.DataFrame(list(rows_by_id.values()))
    assert set(rows["source"]) >= {"sglang-29538-v4-flash-dspark-b200", "vllm-49369-v4-flash-dspark-b300",
                                   "sglang-cookbook-v4-flash-b200-fp4-high-throughput", "vllm-41044-v4-flash-mtp-b200"}
    assert not rows["status"].eq("").any()
    unrunnable = rows[rows["status"] != "ok"]
    assert unrunnable["status"].str.contains("not available|database lacks|not runnable").all()
    ran = rows[rows["status"] == "ok"]
    assert set(ran["source"]) >= {"sglang-29538-v4-flash-dspark-b200", "sglang-33082-v4-flash-0731-dspark-gb300",
                                  "sglang-33083-v4-flash-0731-dspark-h200", "vllm-49369-v4-flash-dspark-b300"}
    assert (ran["basis"] == NEAREST).all()  # every case runs on the database's nearest engine version, said so
    labels = {case.name: case_status(case) for case in cases}
    assert "stand-in: acceptance" in labels["sglang-29538-v4-flash-dspark-b200"]


def test_a_nearest_version_case_is_labelled_and_counted_apart(tmp_path):
    case = tmp_path / "case"
    shutil.copytree(TINY, case)
    source = (case / "source.yaml").read_text()
    (case / "source.yaml").write_text(source + 'requires: {nearest_version: "engine 1.0 tables for 1.1"}\n')
    result = replicate([read_case(case)], None, RunOptions(out_dir=tmp_path / "out"))
    assert (result.rows["basis"] == NEAREST).all()
    assert result.cases["case"] == "runs (nearest database version: engine 1.0 tables for 1.1)"
    assert error_statistics(result.rows, "predicted", AS_RUN)["figures"] == 0
    assert error_statistics(result.rows, "predicted", NEAREST)["figures"] == 4


BAD = [
    ("missing unit", "fixed-100-11,fast,median_tpot,10.2,,1,", "missing unit for median_tpot"),
    ("unit the metric is not published in", "fixed-100-11,fast,median_tpot,10.2,tok/s,1,",
     "unit 'tok/s' is not one median_tpot"),
    ("unknown arm", "fixed-100-11,turbo,median_tpot,10.2,ms,1,", "unknown arm 'turbo'"),
    ("unknown metric", "fixed-100-11,fast,goodput,10.2,ms,1,", "unknown metric 'goodput'"),
    ("non-numeric value", "fixed-100-11,fast,median_tpot,ten,ms,1,", "value must be a number, got 'ten'"),
    ("speed-up of one arm", "fixed-100-11,fast,speedup_output_throughput,2,x,1,", "needs a ratio of two arms"),
    ("unknown workload", "sharegpt,fast,median_tpot,10.2,ms,1,", "unknown workload 'sharegpt'"),
]


@pytest.mark.parametrize(("label", "row", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_published_csv_is_one_line_and_exit_2(tmp_path, cli, label, row, message):
    case = tmp_path / "case"
    shutil.copytree(TINY, case)
    header = (TINY / "published.csv").read_text().splitlines()[0]
    (case / "published.csv").write_text(f"{header}\n{row}\n")
    code, _out, err = cli("replicate", str(case), "--out", str(tmp_path / "out"))
    assert code == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_missing_column_is_rejected(tmp_path, cli):
    case = tmp_path / "case"
    shutil.copytree(TINY, case)
    (case / "published.csv").write_text("workload,arm,metric,value,concurrency\nfixed-100-11,fast,median_tpot,1,1\n")
    code, _out, err = cli("replicate", str(case))
    assert code == 2 and "missing column(s) unit" in err


COOKBOOK = PUBLISHED / "sglang-cookbook-v4-flash-b200-fp4-low-latency"
BAD_CELLS = [  # (label, file edited, (text, replacement), message)
    ("unknown strategy", "source.yaml", ("recipe: {strategy: low-latency", "recipe: {strategy: turbo"),
     "unknown strategy 'turbo'"),
    ("unknown checkpoint", "source.yaml", ("checkpoint: fp4", "checkpoint: int4"), "unknown checkpoint 'int4'"),
    ("missing server flag", "source.yaml", ("--speculative-num-steps 3 ", ""),
     "server_flags lack '--speculative-num-steps 3', which the recipe's speculative 'mtp-3-1-4' needs"),
    ("missing backend flag", "source.yaml", ("--moe-runner-backend flashinfer_mxfp4 ", ""),
     "lack '--moe-runner-backend flashinfer_mxfp4', which the recipe's moe_backend"),
    ("speculating without a recipe for it", "source.yaml", ("speculative: mtp-3-1-4", "speculative: none"),
     "speculative 'none', but server_flags set --speculative-algorithm"),
    ("parallelism not a number", "source.yaml", ("flashinfer_mxfp4, tp: 4,", "flashinfer_mxfp4, tp: four,"), "tp must be a whole number >= 1"),
    ("implied AL past its ceiling", "source.yaml", ("implied_al: 2.97", "implied_al: 4.5"),
     "implied_al 4.5 is outside (1, 4]"),
    ("throughput in a latency unit", "published.csv", ("75.22,tok/s/GPU,1", "75.22,ms,1"),
     "unit 'ms' is not one output_throughput_per_gpu is published in"),
    ("a median labelled Mean", "published.csv", ("median_tpot,2.91,ms,1,32,P50", "median_tpot,2.91,ms,1,32,Mean"),
     "statistic 'Mean' is not what median_tpot compares (P50); use mean_tpot"),
    ("a figure's length rule against the cell's", "published.csv", ("2.91,ms,1,32,P50,uniform", "2.91,ms,1,32,P50,fixed"),
     "length_rule 'fixed' disagrees with source.yaml's (uniform)"),
    ("a scenario drawing fixed lengths under a uniform rule", "scenario.yaml",
     ("prompt_tokens: {kind: empirical, values: [65, 193, 321, 449, 577, 705, 833, 961, 1089, 1217, 1345, 1473, 1601, 1729, "
      "1857, 1985, 2113, 2241, 2369, 2497, 2625, 2753, 2881, 3009, 3137, 3265, 3393, 3521, 3649, 3777, 3905, 4033, 4161, 4289, "
      "4417, 4545, 4673, 4801, 4929, 5057, 5185, 5313, 5441, 5569, 5697, 5825, 5953, 6081, 6209, 6337, 6465, 6593, 6721, 6849, "
      "6977, 7105, 7233, 7361, 7489, 7617, 7745, 7873, 8001, 8129]}", "prompt_tokens: {kind: fixed, value: 8192}"),
     "workload.prompt_tokens does not draw source.yaml's length rule (uniform: {kind: empirical, values: [65, 193, ..., 8129]})"),
    ("a ratio that is not the rule's", "source.yaml", ("  range_ratio: 0.0", "  range_ratio: 1.0"),
     "rule uniform is --random-range-ratio 0, got range_ratio 1.0"),
    ("an unknown length rule", "source.yaml", ("  rule: uniform", "  rule: lognormal"),
     "unknown rule 'lognormal' (valid: uniform, fixed)"),
]


@pytest.mark.parametrize(("label", "name", "edit", "message"), BAD_CELLS, ids=[b[0] for b in BAD_CELLS])
def test_bad_cookbook_cell_is_one_line_and_exit_2(tmp_path, cli, label, name, edit, message):
    """A cell whose recipe is unknown, whose server flags lack what its recipe needs, or whose figure
    is in a unit its metric is not published in is refused before it runs."""
    case = tmp_path / "case"
    shutil.copytree(COOKBOOK, case)
    text = (case / name).read_text()
    assert edit[0] in text
    (case / name).write_text(text.replace(edit[0], edit[1], 1))
    code, _out, err = cli("replicate", str(case), "--out", str(tmp_path / "out"))
    assert code == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def frame(errors: dict[str, list[float]]) -> pd.DataFrame:
    """Rows of two engine/GPU groups: throughput figures with the given predicted and calibrated errors."""
    rows = []
    for group, (predicted, calibrated) in {"a/X": errors["a"], "b/Y": errors["b"]}.items():
        rows.append({"group": group, "status": "ok", "metric": "output_throughput", "basis": NEAREST,
                     "published": 100.0, "predicted_value": 100 * (1 + predicted), "predicted_error": predicted,
                     "calibrated_value": 100 * (1 + calibrated), "calibrated_error": calibrated})
    rows.append({"group": "b/Y", "status": "ok", "metric": "mean_ttft", "basis": NEAREST, "published": 1.0,
                 "predicted_value": 9.0, "predicted_error": 8.0, "calibrated_value": 9.0, "calibrated_error": 8.0})
    return pd.DataFrame(rows)


def test_statistics_per_engine_and_gpu_and_the_goals():
    from specplan.simulator.study.replication.stats import goals, statistics

    stats = statistics(frame({"a": [0.10, 0.02], "b": [-0.30, 0.20]}), (AS_RUN, NEAREST))
    by_group = stats["predicted"]["by_group"]
    assert by_group["a/X"]["median_abs_error"] == pytest.approx(0.10) and by_group["b/Y"]["figures"] == 1  # no TTFT
    assert stats["predicted"]["median_abs_error"] == pytest.approx(0.20)
    assert stats["calibrated"]["by_group"]["b/Y"]["max_abs_error"] == pytest.approx(0.20)
    verdicts = {g["goal"]: g["met"] for g in goals(stats)}
    assert verdicts["predicted median |error| <= 15%"] is False and verdicts["calibrated median |error| <= 10%"] is False
    assert verdicts["calibrated max |error| <= 25%"] is True and verdicts["transferred median |error| <= 15%"] is None


def test_calibration_on_two_processes_matches_one(tmp_path):
    ask = ReplicationAsk(calibrate=True, host_grid=(0.0, 0.2), scale_grid=(1.0,))
    one = replicate([read_case(TINY)], ask, RunOptions(out_dir=tmp_path / "one"))
    two = replicate([read_case(TINY)], ask, RunOptions(out_dir=tmp_path / "two", workers=2))
    assert one.params == two.params
    pd.testing.assert_frame_equal(one.rows, two.rows)


STALE = ("workload,arm,metric,value,unit,concurrency,statistic,note\n"
         "fixed-100-11,fast,mean_tpot,12.75,ms,1,Mean,an older run of the same cell\n"
         "fixed-100-11,fast,output_throughput,90,tok/s,1,-,\n")
SPREAD = 'spread: {engine_version: "0-old", conditions: "warm cache, latencies labelled Mean"}\n'


def stale_case(tmp_path):
    """The tiny case with an older run of its fast arm (spread.csv): TPOT 12.75 ms (mean), 90 tok/s."""
    case = tmp_path / "case"
    shutil.copytree(TINY, case)
    (case / "source.yaml").write_text((case / "source.yaml").read_text() + SPREAD)
    (case / "spread.csv").write_text(STALE)
    return case


def test_a_stale_and_newest_cell_pair_is_reported_apart(tmp_path, cli):
    """The older run's figures are paired with the newest of the same quantity (a mean TPOT with a P50 one, said so),
    written to version_spread.csv and a section of their own, and counted in no error statistic."""
    code, out, _err = cli("replicate", str(stale_case(tmp_path)), "--out", str(tmp_path / "out"))
    assert code == 0
    spread = pd.read_csv(tmp_path / "out" / "version_spread.csv").set_index("quantity")
    assert set(spread.index) == {"TPOT", "output tok/s"}
    tpot = spread.loc["TPOT"]
    assert (tpot["stale"], tpot["newest"], tpot["stale_statistic"], tpot["newest_statistic"]) == (12.75, 10.2, "mean", "P50")
    assert tpot["ratio"] == pytest.approx(10.2 / 12.75) and tpot["stale_version"] == "0-old"
    assert spread.loc["output tok/s", "ratio"] == pytest.approx(106.796 / 90)
    rows = pd.read_csv(tmp_path / "out" / "replication.csv")
    assert len(rows) == 5 and 12.75 not in set(rows["published"]) and 90 not in set(rows["published"])
    assert "median |error| 1.5%, max 2.0%" in out  # the same statistics as without the stale run
    report = (tmp_path / "out" / "replication.md").read_text()
    apart = report.index("## Version spread (in no goal or error statistic)")
    assert apart > report.index("goal predicted median") and "| case | 1 | TPOT | 12.75 ms (0-old, mean) | 10.2 ms" in report
    assert "version spread, TPOT: 1 pairs, median |newest / stale - 1| 20.0%" in out


def test_a_stale_file_without_its_run_is_refused(tmp_path, cli):
    case = stale_case(tmp_path)
    (case / "source.yaml").write_text((case / "source.yaml").read_text().replace(SPREAD, ""))
    code, _out, err = cli("replicate", str(case), "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1 and "source.yaml has no 'spread'" in err


def test_a_statistic_label_that_is_not_the_metrics_is_refused(tmp_path, cli):
    """A figure the source labels Mean may not be compared as a median (the simulator's statistic must match)."""
    case = tmp_path / "case"
    shutil.copytree(TINY, case)
    header = (TINY / "published.csv").read_text().splitlines()[0].replace(",note", ",statistic,note")
    (case / "published.csv").write_text(f"{header}\nfixed-100-11,fast,median_tpot,10.2,ms,1,Mean,\n")
    code, _out, err = cli("replicate", str(case), "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1
    assert "statistic 'Mean' is not what median_tpot compares (P50); use mean_tpot" in err


def test_statistics_per_kind_of_cell_and_gpu():
    from specplan.simulator.study.replication.stats import kind_statistics

    rows = frame({"a": [0.10, 0.02], "b": [-0.30, 0.20]})
    rows["kind"], rows["gpu"] = ["balanced", "balanced", "balanced"], ["X", "Y", "Y"]
    by_kind = kind_statistics(rows, "predicted")
    assert by_kind["balanced"]["figures"] == 2 and by_kind["balanced"]["median_abs_error"] == pytest.approx(0.20)
    assert by_kind["balanced"]["by_gpu"]["Y"]["max_abs_error"] == pytest.approx(0.30)  # its TTFT row is in no statistic


def test_data_parallel_and_tensor_parallel_cells_of_one_gpu_are_calibrated_apart():
    """The same engine on the same GPUs runs another step under DP attention: its own group, its own fit."""
    balanced = read_case(PUBLISHED / "sglang-cookbook-v4-flash-b200-fp4-balanced")
    low_latency = read_case(PUBLISHED / "sglang-cookbook-v4-flash-b200-fp4-low-latency")
    pr_case = read_case(PUBLISHED / "sglang-29538-v4-flash-dspark-b200")
    assert balanced.group == "sglang/B200/dp-attention"
    assert low_latency.group == pr_case.group == "sglang/B200/tp"


def with_missing_profile(tmp_path):
    """A folder of two cases: the tiny one, and a copy whose built-in is not installed."""
    folder = tmp_path / "cases"
    shutil.copytree(TINY, folder / "a-runs")
    shutil.copytree(TINY, folder / "b-missing")
    source = folder / "b-missing" / "source.yaml"
    source.write_text(source.read_text() + "requires: {profiles: [builtin:no-such-gpu-profile]}\n")
    return folder


def test_a_case_not_predicted_is_counted_first_and_fails_the_command(tmp_path, cli):
    """The suite never shrinks in silence: 'N of M cases not predicted' opens the report with each reason, and the
    command exits 1 in one line unless --allow-missing accepts the partial record."""
    folder = with_missing_profile(tmp_path)
    code, out, err = cli("replicate", str(folder), "--out", str(tmp_path / "out"), "--quiet")
    assert code == 1 and "Traceback" not in err
    assert err.count("\n") == 1 and "1 of 2 cases not predicted" in err and "--allow-missing" in err
    report = (tmp_path / "out" / "replication.md").read_text().split("\n\n", 2)[1].splitlines()
    assert report[0] == "1 of 2 cases not predicted"
    assert report[1] == "  not predicted: b-missing: profile not available: builtin:no-such-gpu-profile"
    record = json.loads((tmp_path / "out" / "replication.json").read_text())
    assert record["cases_not_predicted"] == {"b-missing": "profile not available: builtin:no-such-gpu-profile"}
    code, out, err = cli("replicate", str(folder), "--out", str(tmp_path / "out2"), "--allow-missing", "--quiet")
    assert code == 0 and out.startswith("1 of 2 cases not predicted") and err == ""


def test_a_case_with_a_figure_left_out_is_not_predicted():
    rows = pd.DataFrame([{"source": "x", "status": "ok"}, {"source": "x", "status": "workload not available: no"},
                         {"source": "y", "status": "ok"}])
    cases = {"x": "runs", "y": "runs", "z": "runs", "w": "not runnable: why"}
    assert missing_cases(cases, rows) == {"x": "1 of 2 figures not predicted: workload not available: no",
                                          "z": "no published figure", "w": "not runnable: why"}


def test_a_folder_with_nothing_to_compare_is_one_line_and_exit_2(tmp_path, cli):
    """The InferenceX #3346 case: no figure, not runnable. It used to end in a traceback (KeyError: 'source')."""
    case = PUBLISHED / "inferencex-3346-v41-flash-dspark5-b200"
    code, out, err = cli("replicate", str(case), "--out", str(tmp_path / "out"), "--quiet")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "nothing to compare: no figure of its 1 case(s) can be predicted" in err and "not runnable" in err


def test_a_report_with_no_figure_draws_and_says_so(tmp_path):
    """write_replication on a record with no rows (the API's answer for a folder with nothing to compare)."""
    from specplan.reports.replication import write_replication

    result = replicate([read_case(PUBLISHED / "inferencex-3346-v41-flash-dspark5-b200")], None,
                       RunOptions(out_dir=tmp_path))
    assert result.compared() == 0
    text = write_replication(result, tmp_path)
    assert text.startswith("1 of 1 cases not predicted\n  not predicted: inferencex-3346") and (
        tmp_path / "replication.png").exists()
