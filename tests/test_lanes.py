"""Planning for agent lanes: the `lanes` load axis, its run-size estimate, session SLA bounds, a plan whose window
opens at the lanes' barrier, and a sweep's gains at equal lanes with the report's lanes figure.

The corpus is hand-made (plain format, written here): eight identical sessions of six turns, a 256-token first
prompt then 64 new tokens a turn, 32-token answers and 0.5 s tool gaps, on a linear engine (10 ms + 1 ms per
token). Small enough that each run takes a few hundredths of a second.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specplan.hwprofiles import load_profile
from specplan.reports.lanes import PANELS, lanes_figure
from specplan.reports.report import write_report
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.outputs import describe
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.size import run_size
from specplan.simulator.scenario.study import parse_bound
from specplan.simulator.study.keepup import MIN_COMPLETED, outstanding
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan.plan_json import capacity_json
from specplan.simulator.study.plan.probe import seed_run
from specplan.simulator.study.plan.probe_store import ProbeStore
from specplan.simulator.study.plan.run import plan_capacity, plan_search
from specplan.simulator.study.plan.tables import search_table
from specplan.simulator.study.plan.target import Target
from specplan.simulator.study.points import design_sweep
from specplan.simulator.study.sweep.run import run_sweep
from tests.conftest import REPO, merged

MTP1 = {"label": "MTP-1", "drafter": {"family": "mtp", "block_size": 1,
                                      "acceptance": {"per_position": {"code": [0.85]}, "domains": {"code": 1.0}},
                                      "latency": {"kind": "fixed", "ms": 1.0}},
        "policy": {"name": "mtp-1"}}


def corpus(folder: Path, gap_s: float = 0.5, sessions: int = 8, turns: int = 6) -> str:
    rows = [{"session": f"s{s}", "turn": t, "new_tokens": 256 if t == 0 else 64, "output_tokens": 32,
             "gap_s": 0.0 if t == 0 else gap_s} for s in range(sessions) for t in range(turns)]
    path = folder / "sessions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def lanes_mapping(folder: Path, lanes: int = 8, **changes: Any) -> dict[str, Any]:
    raw = {"name": "lanes", "seed": 1, "horizon": {"duration_s": 30},
           "hardware": {"profile": {"kind": "linear", "base_ms": 10, "per_token_ms": 1.0}},
           "cluster": {"replicas": 1, "router": "session"},
           "engine": {"max_batch_requests": 16, "kv_capacity_tokens": 200_000,
                      "prefill": {"mode": "chunked", "chunk_tokens": 2048},
                      "prefix_cache": {"block_tokens": 64, "capacity_tokens": 100_000}},
           "drafter": {"family": "none", "block_size": 0}, "policy": {"name": "none"},
           "workload": {"arrivals": {"kind": "sessions", "lanes": lanes, "path": corpus(folder), "format": "plain",
                                     "idle_gap_cap_s": None}}}
    return merged(raw, changes)


# ---- the axis -----------------------------------------------------------------------------------------------------


def test_a_lanes_point_is_that_many_lanes_each_holding_one_request_at_a_time(tmp_path):
    """Without tool gaps a lane sends its next turn the moment its answer ends, so the requests outstanding at any
    instant of the window are exactly the lanes: the sweep's lanes value is the concurrency it runs."""
    raw = lanes_mapping(tmp_path, sweep={"load": {"lanes": [1, 3]}})
    raw["workload"]["arrivals"]["path"] = corpus(tmp_path, gap_s=0.0)
    raw["horizon"]["duration_s"] = 5
    design = design_sweep(raw, base_dir=tmp_path)
    assert [(p.load_kind, p.load, p.scenario.workload.arrivals.lanes) for p in design.points] == \
        [("lanes", 1, 1), ("lanes", 3, 3)]
    for point in design.points:
        result = simulate(point.scenario)
        start = result.summary["session_window_start_s"]
        times = np.linspace(start, start + 5.0, 101)[1:-1] + 1e-7   # off the instants a turn ends and the next starts
        assert set(outstanding(result.requests, times).tolist()) == {point.load}
        assert result.summary["session_lanes"] == point.load


def test_lanes_fit_sessions_only_and_other_axes_do_not_fit_sessions(tmp_path):
    with pytest.raises(SpecplanError, match=r"sweep.load.users: a 'users' load does not fit workload.arrivals "
                                            r"kind 'sessions' .* scale this workload with sweep.load.lanes"):
        design_sweep(lanes_mapping(tmp_path, sweep={"load": {"users": [2]}}), base_dir=tmp_path)
    poisson = lanes_mapping(tmp_path, sweep={"load": {"lanes": [2]}})
    poisson["workload"] = {"arrivals": {"kind": "poisson", "rate_per_s": 2.0},
                           "prompt_tokens": {"kind": "fixed", "value": 100},
                           "output_tokens": {"kind": "fixed", "value": 10}}
    with pytest.raises(SpecplanError, match=r"sweep.load.lanes: a 'lanes' load does not fit workload.arrivals kind "
                                            r"'poisson' \(it fits sessions\)"):
        design_sweep(poisson, base_dir=tmp_path)


def test_a_folder_of_session_files_keys_a_point_by_every_file_in_it(tmp_path):
    """A weka corpus is a folder: a sweep point's key reads every file in it, so editing one session is a new
    point (and a folder is no longer refused as an unreadable input)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name in ("agentx-0000.json", "agentx-0001.json"):
        (folder / name).write_bytes((REPO / "tests" / "data" / "agentx-generated" / name).read_bytes())
    raw = lanes_mapping(tmp_path, sweep={"load": {"lanes": [2]}})
    raw["workload"]["arrivals"].update(path=str(folder), format="weka")
    before = design_sweep(raw, base_dir=tmp_path).points[0].key
    assert design_sweep(raw, base_dir=tmp_path).points[0].key == before
    edited = folder / "agentx-0001.json"
    edited.write_text(edited.read_text() + "\n")
    assert design_sweep(raw, base_dir=tmp_path).points[0].key != before


def test_the_run_size_of_lanes_is_their_warm_up_and_one_turn_per_gap_and_answer(tmp_path):
    """4 lanes, 60 s, 32-token answers at one token per 10 ms step (0.32 s), a 1 s gap before five turns of six
    (5/6 s on average): the estimate is the four warm-up turns plus 4 × 60 / (5/6 + 0.32) turns, 212.1; without
    reading the corpus, each lane could send a one-step turn every step (4 + 4 × 60 / 0.01). The run itself sends
    a little fewer than the estimate (its answers wait for admission, and its first turns compute their
    prompts)."""
    raw = lanes_mapping(tmp_path, lanes=4, horizon={"duration_s": 60},
                        hardware={"profile": {"kind": "linear", "base_ms": 10, "per_token_ms": 0.0}})
    raw["workload"]["arrivals"]["path"] = corpus(tmp_path, gap_s=1.0)
    scenario = scenario_from_mapping(raw, tmp_path)
    profile = load_profile(scenario.hardware.profile)
    read = run_size(scenario, profile, read_files=True)
    assert read.arrivals == pytest.approx(4 + 4 * 60 / (5 / 6 + 0.32))
    assert run_size(scenario, profile, read_files=False).arrivals == pytest.approx(4 + 4 * 60 / 0.01)
    arrived = simulate(scenario).summary["requests_arrived"]
    assert 0.9 * read.arrivals <= arrived <= read.arrivals


# ---- session SLA bounds -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "accepted"), [
    ("session_wall_p90_s<=600", True), ("session_wall_p90_s>=600", False), ("session_wall_mean_s<=300", True),
    ("session_output_tokens_per_s_mean>=20", True), ("session_output_tokens_per_s_p50<=20", False)])
def test_session_bounds_go_the_way_more_replicas_help(text, accepted):
    """A session's wall time shrinks and its tokens/s grow with more replicas: a bound the other way is refused."""
    if accepted:
        assert parse_bound(text).text() == text
    else:
        with pytest.raises(SpecplanError, match="more replicas must help"):
            parse_bound(text)


def test_a_session_bound_on_a_workload_without_sessions_is_one_line(cli, tmp_path):
    path = tmp_path / "poisson.yaml"
    raw = lanes_mapping(tmp_path)
    raw["workload"] = {"arrivals": {"kind": "poisson", "rate_per_s": 2.0},
                       "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 10}}
    path.write_text(json.dumps(raw))
    status, out, err = cli("plan", path, "--rate", 2, "--sla", "session_wall_p90_s<=600")
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [f"specplan: error: {path}: the SLA bound session_wall_p90_s<=600 reads agent "
                                        "sessions' job-level figures, but workload.arrivals is 'poisson', not sessions"]


# ---- a plan ------------------------------------------------------------------------------------------------------


@pytest.mark.slow("a whole capacity plan: two cluster sizes × three seeds")
def test_a_plan_for_lanes_answers_replicas_judged_from_the_barrier(tmp_path):
    """8 lanes at a session's wall time p90 of at most 10 s: one replica plays a session in ~11.2 s, two in
    ~9.1 s, so the answer is 2 replicas, confirmed by 1 failing. Every probe is judged over the window that opens
    at the lanes' warm-up barrier: the keep-up judge counts the requests the summary measured there, not the
    warm-up turns that ended before it."""
    out = tmp_path / "plan"
    plan = plan_capacity(lanes_mapping(tmp_path), Target("lanes", 8, ("session_wall_p90_s<=10",), seeds=3),
                         RunOptions(workers=1, out_dir=out, progress=False), PlanOptions(max_replicas=4))
    (sizing,) = plan.variants
    assert (sizing.replicas, sizing.one_fewer.replicas) == (2, 1)
    assert sizing.chosen.stats["session_wall_p90_s"][0] <= 10 < sizing.one_fewer.stats["session_wall_p90_s"][0]
    for probe in sizing.probes:
        for run in probe.runs:
            assert run["session_window_start_s"] > 0 and run["session_lanes"] == 8
            assert run["keep_up_completed"] == run["requests_completed_in_window"] < run["requests_completed"]
            assert run["keep_up_verdict"] == "keeps up"
    row = capacity_json(plan)["variants"][0]
    assert row["sessions"]["lanes"] == 8 and row["sessions"]["session_wall_p90_s"] <= 10
    assert row["sessions"]["sessions_completed"] >= 10
    assert "every seed plays the same sessions" in plan.seeds_replay
    probes = pd.read_csv(out / "probes.csv")
    assert {"session_lanes", "session_wall_p90_s", "sessions_completed"} <= set(probes.columns)
    assert [c for c in probes.columns if describe("probes.csv", c) is None] == []
    assert "8 lanes on 2 replica(s): a session's wall time" in (out / "plan.md").read_text()


@pytest.mark.slow("a capacity plan from the command line")
def test_the_plan_command_plans_the_scenario_s_own_lanes_by_default(cli, tmp_path):
    path = tmp_path / "lanes.yaml"
    path.write_text(json.dumps(lanes_mapping(tmp_path)))
    status, out, err = cli("plan", path, "--sla", "ttft_p99_s<=5", "--seeds", 2, "--workers", 1, "--quiet")
    assert status == 0
    assert err.strip() == "specplan: no demand given: planning the scenario's 8 lanes (--lanes 8)"
    assert out.startswith("demand 8 agent session lanes; SLA ttft_p99_s<=5; 2 seeds per probe")
    assert "8 lanes on 1 replica(s): a session's wall time p50" in out


def test_a_lanes_run_too_short_to_judge_names_a_horizon_counted_from_the_barrier(tmp_path):
    """Two seconds after the barrier hold too few completions to judge; the horizon the probe asks for is
    counted from the barrier, as horizon.duration_s is on lanes, and it does settle the verdict."""
    short = seed_run(scenario_from_mapping(lanes_mapping(tmp_path, horizon={"duration_s": 2}), tmp_path),
                     ProbeStore(None))
    assert short["keep_up_verdict"] == "too short" and short["session_window_start_s"] > 2
    asked = short["keep_up_needed_duration_s"]
    settled = seed_run(scenario_from_mapping(lanes_mapping(tmp_path, horizon={"duration_s": asked}), tmp_path),
                       ProbeStore(None))
    assert settled["keep_up_verdict"] == "keeps up"
    assert settled["requests_completed_in_window"] >= 2 * MIN_COMPLETED


@pytest.mark.slow("a deployment search: two hardware options sized by whole-cluster simulations")
def test_a_search_sizes_each_deployment_for_the_lanes(tmp_path):
    """The same 8 lanes and bound over two GPUs (the serving option carries the prefix cache, as a search's
    serving options do): each deployment is sized as a plan sizes a variant, and plan.csv carries the job-level
    figures."""
    raw = lanes_mapping(tmp_path)
    linear = raw["hardware"]["profile"]
    raw["search"] = {"hardware": [{"label": "slow", "profile": {**linear, "per_token_ms": 1.0}, "gpu_hour_usd": 2.0},
                                  {"label": "fast", "profile": {**linear, "per_token_ms": 0.5}, "gpu_hour_usd": 3.0}],
                     "serving": [{"mode": "aggregated", "chunk_tokens": 2048,
                                  "prefix_cache": {"block_tokens": 64, "capacity_tokens": 100_000}}]}
    plan = plan_search(raw, Target("lanes", 8, ("session_wall_p90_s<=10",), seeds=2),
                       RunOptions(workers=1, out_dir=tmp_path / "out", progress=False), PlanOptions(max_replicas=4))
    sized = {p.info.hardware: p.sizing for p in plan.deployments}
    assert (sized["slow"].replicas, sized["slow"].one_fewer.replicas, sized["fast"].replicas) == (2, 1, 1)
    rows = pd.read_csv(tmp_path / "out" / "plan.csv")
    assert [c for c in rows.columns if describe("plan.csv", c) is None] == []
    assert set(rows["session_lanes"]) == {8} and (rows["session_wall_p90_s"] <= 10).all()
    assert "session_wall_p90_s" in search_table(plan)


@pytest.mark.slow("a capacity plan (stopped at its first probe)")
def test_a_session_bound_with_too_few_whole_sessions_stops_the_plan(tmp_path):
    """Sessions of 40 turns 0.1 s apart last over 15 s: a 10 s window holds plenty of requests (the keep-up judge
    is satisfied) but no session whole, so a session bound cannot be judged, and the plan says so rather than
    growing the cluster."""
    raw = lanes_mapping(tmp_path, horizon={"duration_s": 10})
    raw["workload"]["arrivals"]["path"] = corpus(tmp_path, gap_s=0.1, turns=40)
    with pytest.raises(SpecplanError, match=r"none: 1 replica\(s\), seed 1: only 0 sessions ran whole inside the "
                                            r"measurement window, at least 10 are needed"):
        plan_capacity(raw, Target("lanes", 8, ("session_output_tokens_per_s_mean>=1",), seeds=1),
                      RunOptions(workers=1, progress=False), PlanOptions(max_replicas=2))


# ---- a sweep over lanes: gains at equal lanes and the lanes figure -------------------------------------------------


@pytest.fixture(scope="module")
def lanes_sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lanes")
    raw = lanes_mapping(folder, sweep={"load": {"lanes": [2, 8]}, "seeds": [1, 2],
                                       "variants": [{"label": "none"}, MTP1]})
    raw["hardware"]["profile"]["per_token_ms"] = 0.05
    result = run_sweep(raw, None, RunOptions(out_dir=folder / "out", workers=1, progress=False))
    return result, write_report(result, folder / "out")


@pytest.mark.slow("a sweep over lanes and its report (matplotlib)")
def test_the_gain_at_equal_lanes_is_paired_by_seed(lanes_sweep):
    """lanes.csv's gain is each seed's throughput per GPU ÷ the first variant's at the same lanes and seed, − 1,
    averaged over seeds (recomputed here from points.csv)."""
    result, _ = lanes_sweep
    points = result.points.set_index(["label", "load", "seed"])["throughput_tokens_per_s_per_gpu"]
    for row in result.lanes.itertuples():
        ratios = [points[(row.label, row.lanes, seed)] / points[("none", row.lanes, seed)] - 1 for seed in (1, 2)]
        assert row.throughput_gain == pytest.approx(float(np.mean(ratios)))
        assert row.seeds == 2 and row.baseline == "none"
    assert set(result.lanes["lanes"]) == {2, 8}
    written = pd.read_csv(result.out_dir / "lanes.csv")
    assert [c for c in written.columns if describe("lanes.csv", c) is None] == []


@pytest.mark.slow("a sweep over lanes and its report (matplotlib)")
def test_the_lanes_figure_draws_what_lanes_csv_holds(lanes_sweep):
    result, _ = lanes_sweep
    fig = lanes_figure(result)
    for ax, (column, _) in zip(fig.axes, PANELS, strict=True):
        for label, bars in zip(result.design.labels, ax.containers, strict=True):
            line = bars.lines[0]   # an errorbar's data line
            mine = result.lanes[result.lanes["label"] == label].sort_values("lanes")
            assert line.get_xdata().tolist() == mine["lanes"].tolist()
            assert np.allclose(np.asarray(line.get_ydata(), float), mine[column].to_numpy(float), equal_nan=True)


@pytest.mark.slow("a sweep over lanes and its report (matplotlib)")
def test_a_lanes_sweep_report_shows_the_gains_and_the_lanes_figure(lanes_sweep):
    result, html_path = lanes_sweep
    out = html_path.parent
    assert (out / "figures" / "lanes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (out / "figures" / "lanes.svg").read_text()[:2000]
    md = (out / "report.md").read_text()
    assert "## Gains at equal lanes" in md and "(figures/lanes.png)" in md and "lanes.csv:" in md
    assert md.index("## Gains at equal lanes") < md.index("## Variants")
    mtp = result.lanes[(result.lanes["label"] == "MTP-1") & (result.lanes["lanes"] == 8)].iloc[0]
    assert f"| 8 | MTP-1 | {mtp.throughput_per_gpu:,.0f} ± " in md
    assert "Load axis: agent session lanes 2, 8" in md
    assert "Lanes against tokens/s per GPU" in html_path.read_text()
    assert not math.isnan(mtp.session_rate_gain)
