"""The deployment search: every point planned as `plan` plans a variant, ranked by cost, plan.csv with every
point, the figure and launch lines, resumable from its probes; bad spaces and misuse refused in one line."""

from __future__ import annotations

import copy
import json

import pandas as pd
import pytest
import yaml

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.outputs import describe
from specplan.simulator.scenario.study import parse_bound
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan import probe
from specplan.simulator.study.plan.plan_json import deployment_rows
from specplan.simulator.study.plan.run import plan_capacity, plan_search
from specplan.simulator.study.plan.search import DeploymentPlan
from specplan.simulator.study.plan.tables import search_table
from specplan.simulator.study.plan.target import Target
from tests.test_planner import KNOWN, RATE

SLA = "tps_user_p50>=50"
PREFILL = "builtin:h200-llama3.1-8b-vllm-prefill"


def space_scenario() -> dict:
    """KNOWN's closed-form cluster (answers 4 and 2 replicas at c = 1.0 and 0.5 ms) as a search space."""
    raw = copy.deepcopy(KNOWN)
    raw.pop("sweep")
    raw["engine"]["max_batch_requests"] = 64  # an overloaded replica queues and still completes requests
    linear = raw["hardware"]["profile"]
    raw["search"] = {
        "hardware": [
            {"label": "slow", "profile": {**linear, "per_token_ms": 1.0}, "gpus_per_replica": 2, "gpu_hour_usd": 2.0,
             "prefill_profile": PREFILL, "prefill_gpus_per_replica": 1},
            {"label": "fast", "profile": {**linear, "per_token_ms": 0.5}, "gpus_per_replica": 2, "gpu_hour_usd": 3.0,
             "prefill_profile": PREFILL, "prefill_gpus_per_replica": 1},
        ],
        "serving": [{"mode": "aggregated", "chunk_tokens": 512},
                    {"mode": "disaggregated", "prefill_per_decode": [0.5], "link": {"gbps": 400},
                     "model": "llama3-8b"}],
    }
    return raw


def target(**changes) -> Target:
    return Target("rate_per_s", RATE, (parse_bound(SLA),), seeds=1, **changes)


def searched_in(out, **options) -> DeploymentPlan:
    return plan_search(space_scenario(), target(), RunOptions(workers=1, out_dir=out, **options), PlanOptions(max_replicas=2))


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    out = tmp_path_factory.mktemp("search")
    return searched_in(out), out


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_every_point_is_planned_and_ranked_by_cost(searched):
    plan, _ = searched
    rows = deployment_rows(plan)
    assert len(rows) == 4 and set(rows["label"]) == {
        "slow / aggregated / none", "slow / disaggregated 0.5:1 / none",
        "fast / aggregated / none", "fast / disaggregated 0.5:1 / none"}
    met = rows[rows["meets_sla"]]
    assert set(met["hardware"]) == {"fast"}  # the slow GPU needs 4 replicas: not met up to the cap of 2
    assert list(rows["meets_sla"]) == [True, True, False, False]  # met first, then the rest
    assert list(met["usd_per_hour"]) == sorted(met["usd_per_hour"])
    for p in plan.deployments:
        if p.meets_sla:
            assert p.sizing.chosen.meets_sla and (p.sizing.replicas == 1 or not p.sizing.one_fewer.meets_sla)
        else:
            assert p.sizing.replicas is None and max(q.replicas for q in p.sizing.probes) == 2
    disagg = rows[(rows["mode"] == "disaggregated") & rows["meets_sla"]].iloc[0]
    assert disagg["gpus"] == 2 * disagg["decode_replicas"] + disagg["prefill_replicas"]
    assert disagg["gpus_prefill"] == disagg["prefill_replicas"] >= 1
    assert disagg["usd_per_hour"] == pytest.approx(3.0 * disagg["gpus"])
    per_token = met.iloc[0]
    assert per_token["usd_per_million_tokens"] == pytest.approx(
        per_token["usd_per_hour"] / (per_token["output_tokens_per_s"] * 3600) * 1e6)
    assert "winner: fast / " in search_table(plan)


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_a_point_is_planned_exactly_as_plan_plans_that_scenario(searched):
    plan, _ = searched
    point = next(p for p in plan.deployments if p.info.label == "fast / aggregated / none")
    alone = plan.point_scenario(point, 1)
    raw = copy.deepcopy(space_scenario())
    raw.pop("search")
    raw["hardware"] = {"profile": raw_profile(alone), "gpus_per_replica": 2}
    raw["engine"]["prefill"] = {"mode": "chunked", "chunk_tokens": 512}
    same = plan_capacity(raw, target(), RunOptions(workers=1), PlanOptions(max_replicas=2))
    assert same.variants[0].replicas == point.sizing.replicas
    assert [r["key"] for q in same.variants[0].probes for r in q.runs] == \
        [r["key"] for q in point.sizing.probes for r in q.runs]


def raw_profile(scenario) -> dict:
    profile = scenario.hardware.profile
    return {"kind": "linear", "base_ms": profile.base_ms, "per_token_ms": profile.per_token_ms}


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_a_rerun_resumes_from_the_stored_probes(searched, monkeypatch):
    plan, out = searched
    stored = len(list((out / "probes").glob("*.json")))
    assert stored == sum(len(q.runs) for p in plan.deployments for q in p.sizing.probes)

    def refuse(_scenario):
        raise AssertionError("a stored probe was simulated again")

    monkeypatch.setattr(probe, "simulate", refuse)
    again = searched_in(out)
    pd.testing.assert_frame_equal(deployment_rows(again), deployment_rows(plan))


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_the_cli_writes_the_table_csv_figure_and_launch_lines(cli, tmp_path):
    path = tmp_path / "space.yaml"
    raw = space_scenario()
    raw["sla"] = {"bounds": [SLA]}
    path.write_text(yaml.safe_dump(raw))
    status, out, err = cli("plan", path, "--rate", RATE, "--seeds", "1", "--max-replicas", "2", "--workers", "1",
                           "--out", tmp_path / "out", "--quiet")
    assert status == 0, err
    assert "winner: fast / " in out and "vllm serve" in out
    files = {f.name for f in (tmp_path / "out").iterdir()}
    assert {"plan.csv", "plan.json", "plan.md", "plan.png", "launch-vllm.sh", "launch-sglang.sh", "probes"} <= files
    rows = pd.read_csv(tmp_path / "out" / "plan.csv")
    assert len(rows) == 4 and [c for c in rows.columns if describe("plan.csv", c) is None] == []
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["winner"].startswith("fast / ")
    assert (tmp_path / "out" / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("args", "message"), [
    (("--gpu-hour-usd", "3"), "a search prices each GPU type in search.hardware[].gpu_hour_usd"),
    (("--users", "4"), "--users"),
    (("--sla", "tps_user_p10<=3"), "tps_user_p10 takes a lower bound"),
])
def test_misuse_of_a_search_is_one_line_with_exit_2(cli, tmp_path, args, message):
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space_scenario()))
    demand = () if "--users" in args else ("--rate", RATE)
    status, _out, err = cli("plan", path, *demand, "--sla", SLA, *args, "--quiet")
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_bad_search_spaces_stop_the_plan_with_exit_2(cli, tmp_path):
    raw = space_scenario()
    raw["search"]["serving"] = [{"mode": "disaggregated", "prefill_per_decode": [0.5, 0.5], "link": {"gbps": 1},
                                 "model": "llama3-8b"}]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, _out, err = cli("plan", path, "--rate", RATE, "--sla", SLA)
    assert status == 2 and "search.serving[0].prefill_per_decode: ratios must be distinct" in err
    assert len(err.strip().splitlines()) == 1
    raw = space_scenario()
    raw["search"]["hardware"][1]["profile"] = "builtin:no-such-gpu"
    path.write_text(yaml.safe_dump(raw))
    status, _out, err = cli("plan", path, "--rate", RATE, "--sla", SLA)
    assert status == 2 and "no-such-gpu" in err and len(err.strip().splitlines()) == 1


def test_a_ray_backend_needs_a_search_block(cli, tmp_path):
    raw = copy.deepcopy(KNOWN)
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, _out, err = cli("plan", path, "--rate", RATE, "--sla", SLA, "--backend", "ray")
    assert status == 2 and "give the scenario a search: block" in err


def test_plan_search_refuses_a_scenario_without_a_space():
    with pytest.raises(SpecplanError, match="a deployment search needs a search: block"):
        plan_search(copy.deepcopy(KNOWN), target())
