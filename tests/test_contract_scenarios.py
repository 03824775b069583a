"""Every contract scenario in ../shared/scenarios validates and runs, unchanged."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SHARED

SCENARIOS = sorted(p.name for p in (SHARED / "scenarios").glob("*.yaml"))


def test_the_contract_scenarios_are_there():
    assert len(SCENARIOS) >= 4


@pytest.mark.parametrize("name", SCENARIOS)
def test_contract_scenario_checks(cli, name):
    status, out, err = cli("check", SHARED / "scenarios" / name)
    assert status == 0, err
    assert "ok" in out


@pytest.mark.slow("a shared contract scenario at its full horizon")
@pytest.mark.parametrize("name", SCENARIOS)
def test_contract_scenario_runs(cli, tmp_path, name):
    status, _, err = cli("run", SHARED / "scenarios" / name, "--out", tmp_path, "--quiet")
    assert status == 0, err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["requests_completed"] > 0
    assert summary["throughput_tokens_per_s"] > 0
    assert summary["requests_arrived"] == (
        summary["requests_completed"] + summary["requests_running"] + summary["requests_rejected"])
    assert (tmp_path / "requests.csv").exists()
    assert (tmp_path / "scenario.resolved.yaml").exists()
