"""Sweeps: variant deep-merge, load axis, point keys, outputs, resume after a crash, determinism."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

import specplan.simulator.study.points as points_module
import specplan.simulator.study.sweep.run as sweep_module
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.outputs import contract_keys, describe
from specplan.simulator.scenario.merge import apply_load, apply_variant, deep_merge
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.sweep.run import design_sweep, run_sweep

REPO = Path(__file__).resolve().parents[1]

BASE: dict[str, Any] = {
    "name": "tiny-sweep",
    "seed": 1,
    "horizon": {"duration_s": 6, "warmup_s": 1},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.05}, "gpus_per_replica": 1},
    "engine": {"max_batch_requests": 32, "kv_capacity_tokens": 10_000_000},
    "drafter": {
        "family": "mtp", "block_size": 3,
        "acceptance": {"per_position": {"chat": [0.8, 0.7, 0.6]}, "domains": {"chat": 1.0},
                       "request_sigma": 0.3, "token_sigma": 0.3},
        "latency": {"kind": "fixed", "ms": 0.5},
    },
    "policy": {"name": "static", "params": {"length": 3}},
    "workload": {
        "arrivals": {"kind": "closed_loop", "users": 4, "think_s": 0.1},
        "prompt_tokens": {"kind": "fixed", "value": 64},
        "output_tokens": {"kind": "lognormal", "median": 80, "sigma": 0.5, "max": 400},
    },
    "sweep": {
        "load": {"users": [2, 8]},
        "variants": [
            {"label": "plain", "drafter": {"family": "none", "block_size": 0}, "policy": {"name": "none"}},
            {"label": "MTP-1", "policy": {"name": "mtp-1"}},
            {"label": "static-3", "policy": {"name": "static", "params": {"length": 3}}},
        ],
        "seeds": [1, 2],
    },
    "sla": {"tps_user": [60, 90], "statistic": "p50"},
}


def tiny(**changes: Any) -> dict[str, Any]:
    """A deep copy of BASE with top-level keys replaced."""
    raw = copy.deepcopy(BASE)
    raw.update(copy.deepcopy(changes))
    return raw


def write_yaml(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def without_wall(frame: pd.DataFrame) -> pd.DataFrame:
    """Results minus the measured wall time, the one column that may differ between runs."""
    return frame.drop(columns=["wall_s"]).reset_index(drop=True)


# ---- deep merge -------------------------------------------------------------------------


def test_mappings_merge_key_by_key_and_lists_replace():
    base = {"engine": {"max_batch_requests": 8, "kv_capacity_tokens": 100}, "sla": {"tps_user": [1, 2]}}
    out = deep_merge(base, {"engine": {"max_batch_requests": 16}, "sla": {"tps_user": [5]}})
    assert out == {"engine": {"max_batch_requests": 16, "kv_capacity_tokens": 100}, "sla": {"tps_user": [5]}}
    assert base["engine"]["max_batch_requests"] == 8  # the base is not modified


def test_acceptance_preset_and_per_position_exclude_each_other():
    base = {"drafter": {"acceptance": {"per_position": {"chat": [0.8]}, "domains": {"chat": 1.0}}}}
    out = apply_variant(base, {"label": "x", "drafter": {"acceptance": {"preset": "qwen3-8b"}}})
    assert out["drafter"]["acceptance"] == {"preset": "qwen3-8b", "domains": {"chat": 1.0}}
    back = apply_variant(out, {"label": "y", "drafter": {"acceptance": {"per_position": {"chat": [0.5]}}}})
    assert back["drafter"]["acceptance"] == {"per_position": {"chat": [0.5]}, "domains": {"chat": 1.0}}


def test_a_different_kind_replaces_the_whole_tagged_mapping():
    base = {"workload": {"arrivals": {"kind": "closed_loop", "users": 4, "think_s": 1.0}},
            "drafter": {"confidence": {"kind": "model", "noise": 0.4, "calibration": "sts"}},
            "engine": {"prefill": {"mode": "chunked", "chunk_tokens": 256}}}
    out = deep_merge(base, {"workload": {"arrivals": {"kind": "poisson", "rate_per_s": 3}},
                            "drafter": {"confidence": {"kind": "perfect"}},
                            "engine": {"prefill": {"mode": "disaggregated", "tokens_per_s": 1e4}}})
    assert out["workload"]["arrivals"] == {"kind": "poisson", "rate_per_s": 3}
    assert out["drafter"]["confidence"] == {"kind": "perfect"}
    assert out["engine"]["prefill"] == {"mode": "disaggregated", "tokens_per_s": 1e4}
    same = deep_merge(base, {"drafter": {"confidence": {"kind": "model", "noise": 0.1}}})
    assert same["drafter"]["confidence"] == {"kind": "model", "noise": 0.1, "calibration": "sts"}


def test_a_different_policy_name_drops_the_base_params():
    base = {"policy": {"name": "static", "params": {"length": 3}}}
    assert deep_merge(base, {"policy": {"name": "mtp-1"}}) == {"policy": {"name": "mtp-1"}}
    assert deep_merge(base, {"policy": {"params": {"length": 2}}}) == {
        "policy": {"name": "static", "params": {"length": 2}}}


def test_load_axis_sets_the_closed_loop_users_keeping_its_think_time():
    base = design_sweep(tiny()).base
    users = apply_load(BASE, base.workload.arrivals, "users", 16)
    assert users["workload"]["arrivals"] == {"kind": "closed_loop", "users": 16, "think_s": 0.1, "think_cv": 1.0}
    assert users["workload"]["prompt_tokens"] == BASE["workload"]["prompt_tokens"]
    with pytest.raises(SpecplanError, match=r"'rate_per_s' load does not fit workload\.arrivals kind 'closed_loop'"):
        apply_load(BASE, base.workload.arrivals, "rate_per_s", 2.5)


# ---- points ---------------------------------------------------------------------------------


def test_points_cover_variants_loads_seeds_in_order_with_content_keys():
    plan = design_sweep(tiny())
    rows = [(p.label, p.load, p.seed) for p in plan.points]
    assert rows[:4] == [("plain", 2, 1), ("plain", 2, 2), ("plain", 8, 1), ("plain", 8, 2)]
    assert len(rows) == 12 and plan.labels == ["plain", "MTP-1", "static-3"]
    assert len({p.key for p in plan.points}) == 12
    mtp = next(p for p in plan.points if p.label == "MTP-1")
    assert mtp.scenario.policy.name == "mtp-1" and mtp.scenario.policy.params == {}
    assert mtp.scenario.workload.arrivals.users == 2 and mtp.scenario.sweep is None


def test_keys_ignore_labels_and_the_sla_block_but_not_the_scenario():
    raw = tiny()
    raw["sweep"]["variants"].append({"label": "static-3 again", "policy": {"name": "static"}})
    plan = design_sweep(raw)
    keys = {p.label: p.key for p in plan.points if p.load == 2 and p.seed == 1}
    assert keys["static-3"] == keys["static-3 again"]  # the same simulation, computed once
    assert len(plan.unique_points) == 12
    other_sla = design_sweep(tiny(sla={"tps_user": [10], "statistic": "p10"}))
    assert [p.key for p in other_sla.points] == [p.key for p in design_sweep(tiny()).points]
    longer = design_sweep(tiny(horizon={"duration_s": 7, "warmup_s": 1}))
    assert longer.points[0].key != plan.points[0].key


def test_a_bad_variant_is_named_with_its_key_path():
    raw = tiny()
    raw["sweep"]["variants"][1]["drafter"] = {"blok_size": 2}
    with pytest.raises(SpecplanError, match=r"sweep.variants\[1\] \(MTP-1\).*blok_size.*block_size"):
        design_sweep(raw)


@pytest.mark.parametrize(("sweep", "message"), [
    ({"variants": [{"policy": {"name": "none"}}]}, "needs a text label"),
    ({"variants": [{"label": "a"}, {"label": "a"}]}, "duplicate label"),
    ({"load": {"users": [1], "rate_per_s": [2]}}, "exactly one of"),
    ({"load": {"users": [0]}}, "must be >= 1"),
    ({"seeds": [1, 1]}, "distinct"),
    ({"loads": {"users": [1]}}, "did you mean 'load'"),
])
def test_sweep_block_errors(sweep, message):
    with pytest.raises(SpecplanError, match=message):
        design_sweep(tiny(sweep=sweep))


def test_without_a_sweep_block_the_scenario_is_one_point():
    raw = tiny()
    del raw["sweep"]
    plan = design_sweep(raw)
    assert [(p.label, p.load, p.seed) for p in plan.points] == [("static", None, 1)]


# ---- running, storing, resuming ---------------------------------------------------------------


@pytest.mark.slow("several sweep runs with their point stores")
def test_sweep_writes_points_frontier_comparisons(tmp_path):
    result = run_sweep(tiny(), None, RunOptions(out_dir=tmp_path, workers=1))
    points = pd.read_csv(tmp_path / "points.csv")
    assert len(points) == 12
    assert set(contract_keys()) | {"label", "load", "seed"} <= set(points.columns)
    assert points["label"].tolist()[::4] == ["plain", "MTP-1", "static-3"]
    assert len(list((tmp_path / "points").glob("*.json"))) == 12
    frontier = pd.read_csv(tmp_path / "frontier.csv")
    assert set(frontier["label"]) == {"plain", "MTP-1", "static-3"}
    comparisons = pd.read_csv(tmp_path / "comparisons.csv")
    assert len(comparisons) == 6 and set(comparisons["baseline"]) == {"plain"}
    for name, frame in (("points.csv", points), ("frontier.csv", frontier), ("comparisons.csv", comparisons)):
        assert [c for c in frame.columns if describe(name, c) is None] == [], name  # the outputs registry
    # speculation verifies more tokens per request-step and emits more per step
    ops = result.operating.set_index(["label", "load"])
    assert ops.loc[("static-3", 8), "mean_verify_tokens_per_request_step"] == pytest.approx(4.0)
    assert ops.loc[("static-3", 8), "throughput_per_gpu"] > ops.loc[("plain", 8), "throughput_per_gpu"]
    assert (tmp_path / "scenario.resolved.yaml").exists()


@pytest.mark.slow("several sweep runs with their point stores")
def test_rerun_recomputes_only_missing_or_damaged_points(tmp_path):
    first = run_sweep(tiny(), None, RunOptions(out_dir=tmp_path, workers=1))
    stored = sorted((tmp_path / "points").glob("*.json"))
    stored[0].unlink()
    stored[1].unlink()
    stored[2].write_text('{"key": "trunc')  # a damaged file is recomputed, not trusted
    (tmp_path / "points" / ".abc.tmp").write_text("half a write")
    again = run_sweep(tiny(), None, RunOptions(out_dir=tmp_path, workers=1))
    assert (again.computed, again.reused) == (3, 9)
    pd.testing.assert_frame_equal(without_wall(first.points), without_wall(again.points))
    third = run_sweep(tiny(), None, RunOptions(out_dir=tmp_path, workers=1))
    assert third.computed == 0
    pd.testing.assert_frame_equal(third.points, again.points)


@pytest.mark.slow("several sweep runs with their point stores")
def test_changing_only_the_sla_reuses_every_point(tmp_path):
    run_sweep(tiny(), None, RunOptions(out_dir=tmp_path, workers=1))
    result = run_sweep(tiny(sla={"tps_user": [50], "statistic": "mean"}), None, RunOptions(out_dir=tmp_path, workers=1))
    assert result.computed == 0
    assert result.comparisons["statistic"].unique().tolist() == ["mean"]


@pytest.mark.slow("several sweep runs with their point stores")
def test_results_do_not_depend_on_the_number_of_workers(tmp_path):
    one = run_sweep(tiny(), None, RunOptions(out_dir=tmp_path / "one", workers=1))
    two = run_sweep(tiny(), None, RunOptions(out_dir=tmp_path / "two", workers=2))
    assert two.computed == 12
    pd.testing.assert_frame_equal(without_wall(one.points), without_wall(two.points))
    pd.testing.assert_frame_equal(one.frontier, two.frontier)
    pd.testing.assert_frame_equal(one.comparisons, two.comparisons)


@pytest.mark.slow("several sweep runs with their point stores")
def test_an_interrupted_sweep_resumes_without_losing_finished_points(tmp_path, monkeypatch):
    """The sweep is stopped after exactly 5 of 12 points (Ctrl-C as the 6th finishes); a re-run
    computes only the 7 missing ones, and an interrupted write leaves no point file behind."""
    scenario = write_yaml(tmp_path / "sweep.yaml", tiny())
    out = tmp_path / "out"
    real_run_points = sweep_module.run_points

    def interrupted(points, on_done, *args):
        def stop_after_five(point, summary):
            if len(list((out / "points").glob("*.json"))) == 5:
                (out / "points" / ".partial.tmp").write_text("{")  # what a kill mid-write leaves
                raise KeyboardInterrupt
            on_done(point, summary)

        real_run_points(points, stop_after_five, *args)

    monkeypatch.setattr(sweep_module, "run_points", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(scenario, None, RunOptions(out_dir=out, workers=1))
    monkeypatch.undo()
    finished = {p.stem for p in (out / "points").glob("*.json")}
    assert len(finished) == 5
    for path in (out / "points").glob("*.json"):
        assert json.loads(path.read_text())["key"] == path.stem
    resumed = run_sweep(scenario, None, RunOptions(out_dir=out, workers=2))
    assert resumed.computed == 7 and resumed.reused == 5
    fresh = run_sweep(scenario, None, RunOptions(out_dir=tmp_path / "fresh", workers=1))
    pd.testing.assert_frame_equal(without_wall(resumed.points), without_wall(fresh.points))


def test_a_point_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """store_point writes a temporary file and renames it: a failure mid-write leaves nothing."""
    plan = design_sweep(tiny())
    point = plan.unique_points[0]

    def failing_dump(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(points_module.json, "dump", failing_dump)
    with pytest.raises(OSError):
        points_module.store_point(tmp_path, point.key, {"policy": "static"}, point.scenario)
    assert list(tmp_path.iterdir()) == []


# ---- the command line -----------------------------------------------------------------------


@pytest.mark.slow("several sweep runs with their point stores")
def test_sweep_command_json_and_quiet(cli, tmp_path):
    scenario = write_yaml(tmp_path / "s.yaml", tiny())
    status, out, err = cli("sweep", scenario, "--out", tmp_path / "o", "--workers", "1", "--json",
                           "--no-report")
    assert status == 0 and err == ""
    payload = json.loads(out)
    assert (payload["points"], payload["computed"], payload["reused"]) == (12, 12, 0)
    assert {r["label"] for r in payload["comparisons"]} == {"plain", "MTP-1", "static-3"}
    status, out, err = cli("sweep", scenario, "--out", tmp_path / "o", "--quiet", "--no-report")
    assert (status, out, err) == (0, "", "")
    status, out, _ = cli("sweep", scenario, "--out", tmp_path / "o", "--no-report", "--set", "sla.tps_user=[70]")
    assert status == 0 and "0 simulated, 12 reused" in out and ">= 70" in out


def test_sweep_command_errors_are_one_line(cli, tmp_path):
    scenario = write_yaml(tmp_path / "s.yaml", tiny())
    status, _, err = cli("sweep", scenario, "--out", tmp_path / "o", "--backend", "spark")
    assert status == 2 and "invalid choice" in err and err.count("\n") == 1
    status, _, err = cli("sweep", scenario, "--out", tmp_path / "o", "--workers", "0")
    assert status == 2 and "workers must be >= 1, got 0" in err


def test_demo_runs_the_embedded_scenario(cli, tmp_path, monkeypatch):
    import specplan.cli.commands.demo as demo

    assert demo.default_scenario().is_file()
    monkeypatch.setattr(demo, "default_scenario", lambda: write_yaml(tmp_path / "d.yaml", tiny()))
    status, out, _ = cli("demo", "--out", tmp_path / "demo", "--workers", "1", "--no-report")
    assert status == 0 and "12 points" in out
    assert (tmp_path / "demo" / "points.csv").exists()


def test_default_scenario_sweeps_the_six_policies():
    from specplan.cli.commands.demo import default_scenario

    plan = design_sweep(default_scenario())
    policies = {p.label: p.scenario.policy.name for p in plan.points}
    assert sorted(policies.values()) == sorted(
        ["mtp-1", "static", "static", "dspark-greedy", "dspark-async", "oracle"])
    families = {p.scenario.drafter.family for p in plan.points}
    assert families == {"mtp", "dflash", "dspark"}
    assert plan.base.hardware.profile.startswith("builtin:")
    assert plan.sla is not None and plan.sla.tps_user
