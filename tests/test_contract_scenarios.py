"""Every contract scenario in ../shared/scenarios validates and runs, unchanged."""

from __future__ import annotations

import importlib.util
import json

import pytest

from policies.registry import POLICIES
from tests.conftest import SHARED

SCENARIOS = sorted(p.name for p in (SHARED / "scenarios").glob("*.yaml"))


def missing_capabilities(name: str) -> list[str]:
    """What a contract scenario needs that this build does not have yet."""
    text = (SHARED / "scenarios" / name).read_text()
    needs = []
    if "kind: trace" in text and importlib.util.find_spec("traces.replay") is None:
        needs.append("trace replay (issue 7)")
    if "preset:" in text and importlib.util.find_spec("simulator.drafters.presets") is None:
        needs.append("acceptance presets (issue 4)")
    if "kind: model" in text and importlib.util.find_spec("simulator.drafters.heads") is None:
        needs.append("confidence heads with STS (issue 4)")
    for policy in ("dspark-greedy", "dspark-async", "dspark-global"):
        if f"name: {policy}" in text and policy not in POLICIES:
            needs.append(f"policy {policy} (issue 5)")
    return needs


def test_the_contract_scenarios_are_there():
    assert len(SCENARIOS) >= 4


@pytest.mark.parametrize("name", SCENARIOS)
def test_contract_scenario_checks(cli, name):
    needs = missing_capabilities(name)
    if any(n.startswith("policy") for n in needs):
        pytest.skip("needs " + ", ".join(needs))
    status, out, err = cli("check", SHARED / "scenarios" / name)
    assert status == 0, err
    assert "ok" in out


@pytest.mark.parametrize("name", SCENARIOS)
def test_contract_scenario_runs(cli, tmp_path, name):
    needs = missing_capabilities(name)
    if needs:
        pytest.skip("needs " + ", ".join(needs))
    status, _, err = cli("run", SHARED / "scenarios" / name, "--out", tmp_path, "--quiet")
    assert status == 0, err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["requests_completed"] > 0
    assert summary["throughput_tokens_per_s"] > 0
    assert (tmp_path / "requests.csv").exists()
    assert (tmp_path / "scenario.resolved.yaml").exists()
