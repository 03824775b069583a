"""Scenario loading: numbers as people write them, overrides, paths, the resolved copy."""

from __future__ import annotations

import yaml

from specplan.simulator.scenario import load_scenario, resolved_mapping
from tests.conftest import BASE, SHARED, merged


def write(tmp_path, mapping, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(mapping))
    return path


def test_numbers_written_the_way_people_write_them(tmp_path):
    text = yaml.safe_dump(BASE).replace("tokens_per_s: 20000", "tokens_per_s: 1.0e12")
    text = text.replace("kv_capacity_tokens: 1000000", "kv_capacity_tokens: 40_000")
    path = tmp_path / "s.yaml"
    path.write_text(text + "\n")
    s = load_scenario(path, ["engine.max_batch_requests=1e2"])
    assert s.engine.prefill.tokens_per_s == 1e12
    assert s.engine.kv_capacity_tokens == 40_000
    assert s.engine.max_batch_requests == 100


def test_string_numbers_from_pyyaml_are_numbers(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(BASE) + "\n")
    s = load_scenario(path, ["engine.prefill.tokens_per_s=1e12", "workload.arrivals.rate_per_s='2_5'"])
    assert s.engine.prefill.tokens_per_s == 1e12
    assert s.workload.arrivals.rate_per_s == 25.0


def test_set_overrides_parse_yaml_values(tmp_path):
    path = write(tmp_path, BASE)
    s = load_scenario(path, ["drafter.acceptance.domains={chat: 1.0}", "cluster.replicas=3",
                             "policy.params={length: 2}"], seed=99)
    assert s.drafter.acceptance.domains == {"chat": 1.0}
    assert s.cluster.replicas == 3
    assert s.seed == 99


def test_relative_paths_resolve_against_the_scenario_folder(tmp_path):
    sub = tmp_path / "deep"
    sub.mkdir()
    raw = merged(BASE, {"workload": {"arrivals": {"kind": "trace", "path": "../trace.csv", "format": "azure"}}})
    raw["workload"]["arrivals"].pop("rate_per_s", None)
    s = load_scenario(write(sub, raw))
    assert s.workload.arrivals.path == str((tmp_path / "trace.csv").resolve())


def test_resolved_mapping_fills_defaults_and_reloads(tmp_path):
    s = load_scenario(write(tmp_path, BASE))
    resolved = resolved_mapping(s)
    assert resolved["engine"]["scheduling_overhead_ms"] == 0.0
    assert resolved["engine"]["prefill"]["mode"] == "disaggregated"
    assert resolved["engine"]["max_step_tokens"] == 16384  # the linear profile's largest B, filled in once
    assert resolved["hardware"]["profile"]["max_tokens"] == 16384  # the inline profile's default
    again = load_scenario(write(tmp_path, resolved, "again.yaml"))
    assert again == s


def test_resolved_policy_params_carry_every_default(tmp_path):
    s = load_scenario(write(tmp_path, BASE), ["policy={name: dspark-async}"])
    assert resolved_mapping(s)["policy"] == {"name": "dspark-async",
                                          "params": {"cold_length": 1, "bypass": None, "draft_widths": "capacity"}}


def test_merge_deep_merges_a_fragment_in_order_with_set(cli, tmp_path):
    fragment = tmp_path / "drafter.yaml"
    fragment.write_text("drafter:\n  block_size: 2\n  acceptance:\n    per_position: {code: [0.9, 0.8]}\n"
                        "    domains: {code: 1.0}\n")
    scenario = SHARED / "scenarios" / "contract-minimal.yaml"
    loaded = load_scenario(scenario, [f"@{fragment}", "drafter.block_size=1"])
    acc = loaded.drafter.acceptance
    assert loaded.drafter.block_size == 1 and acc.preset is None  # per_position replaced the preset
    assert acc.per_position == {"code": (0.9, 0.8)} and acc.domains == {"code": 1.0}  # the mix replaced, not added
    status, out, _ = cli("check", scenario, "--merge", fragment)
    assert status == 0 and "contract-minimal" in out


def test_merging_something_else_than_a_mapping_is_one_line(cli, tmp_path):
    fragment = tmp_path / "list.yaml"
    fragment.write_text("- a\n- b\n")
    status, _, err = cli("check", SHARED / "scenarios" / "contract-minimal.yaml", "--merge", fragment)
    assert status == 2 and "--merge" in err and len(err.strip().splitlines()) == 1
