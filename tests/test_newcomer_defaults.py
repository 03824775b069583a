"""Where a newcomer stumbled, the tool: the KV capacity defaults from the profile's memory model (and
says so in summary.json), and `plan` on a trace plans the trace as recorded without a demand flag."""

from __future__ import annotations

import json

import yaml

from specplan.hwprofiles import load_profile
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.load import profile_kv_capacity
from tests.conftest import BASE, REPO, merged

MEASURED = "builtin:h200-llama3.1-8b-vllm"


def without_kv(raw: dict) -> dict:
    out = merged(raw, {})
    del out["engine"]["kv_capacity_tokens"]
    return out


def test_the_kv_capacity_defaults_from_the_profiles_memory_model():
    raw = merged(without_kv(BASE), {"hardware": {"profile": MEASURED}, "horizon": {"duration_s": 3, "warmup_s": 1}})
    scenario = scenario_from_mapping(raw, REPO)
    stated = profile_kv_capacity(load_profile(MEASURED))
    assert stated == 882_732 and scenario.engine.kv_capacity_tokens == stated
    summary = simulate(scenario).summary
    assert (summary["kv_capacity_tokens"], summary["kv_capacity_source"]) == (stated, "profile memory model")


def test_a_kv_capacity_the_scenario_gives_is_kept_and_said_so():
    raw = merged(BASE, {"hardware": {"profile": MEASURED}, "engine": {"kv_capacity_tokens": 300_000},
                        "horizon": {"duration_s": 3, "warmup_s": 1}})
    summary = simulate(scenario_from_mapping(raw, REPO)).summary
    assert (summary["kv_capacity_tokens"], summary["kv_capacity_source"]) == (300_000, "scenario")


def test_without_a_memory_model_the_kv_capacity_is_required(cli, tmp_path):
    path = tmp_path / "inline.yaml"
    path.write_text(yaml.safe_dump(without_kv(BASE)))  # an inline linear profile states no memory model
    status, out, err = cli("check", path)
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert "engine.kv_capacity_tokens: required: profile linear" in err and "no memory model" in err


def test_the_resolved_scenario_records_the_defaulted_capacity(cli, tmp_path):
    path = tmp_path / "measured.yaml"
    path.write_text(yaml.safe_dump(merged(without_kv(BASE), {"hardware": {"profile": MEASURED},
                                                             "horizon": {"duration_s": 3, "warmup_s": 1}})))
    assert cli("run", path, "--out", tmp_path / "out", "--quiet")[0] == 0
    resolved = yaml.safe_load((tmp_path / "out" / "scenario.resolved.yaml").read_text())
    assert resolved["engine"]["kv_capacity_tokens"] == 882_732
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["kv_capacity_source"] == "profile memory model"


def trace_scenario(tmp_path) -> dict:
    rows = [f"{0.25 * i:.2f},16,20" for i in range(240)]  # 4 requests/s for 60 s
    (tmp_path / "ours.csv").write_text("timestamp,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    raw = merged(BASE, {"horizon": {"duration_s": 60, "warmup_s": 5},
                        "workload": {"arrivals": {"kind": "trace", "path": "ours.csv", "format": "csv"}},
                        "sla": {"bounds": ["tps_user_p50>=10"]}})
    (tmp_path / "trace.yaml").write_text(yaml.safe_dump(raw))
    return raw


def test_plan_on_a_trace_defaults_to_the_trace_as_recorded(cli, tmp_path):
    trace_scenario(tmp_path)
    status, out, err = cli("plan", tmp_path / "trace.yaml", "--seeds", "1", "--max-replicas", "2", "--workers", "1",
                           "--quiet")
    assert status == 0, err
    assert "planning the trace as recorded (--rate-scale 1)" in err
    assert out.startswith("demand the workload's rate x 1;")


def test_plan_without_a_demand_on_anything_else_is_refused_before_any_folder(cli, tmp_path):
    status, _, err = cli("plan", REPO / "scenarios" / "default.yaml", "--sla-tps", "100", "--out", tmp_path / "p")
    assert status == 2 and "give a demand: --rate R" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p").exists()
