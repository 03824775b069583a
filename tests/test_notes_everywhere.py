"""What loading took from a profile is said wherever a result is (issue 45 follow-up to items 2-3).

`Scenario.notes` (DP ranks from a built-in's header, a memory model that
leaves no pool at the engine's fraction, a stated KV pool kept above the
engine's) are in every run's summary.json (`notes`), and `plan` and `sweep`
print each distinct note once (not once per variant, probe or point), with
a Notes section in plan.md and in the sweep's report.
"""

from __future__ import annotations

import copy

from specplan.simulator.core.outputs import describe
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from tests.conftest import REPO
from tests.test_sweep import BASE, write_yaml

ABOVE_POOL = ("engine.kv_capacity_tokens 900,000 is more than the pool profile h200-llama3.1-8b-vllm's memory model "
              "gives at the engine's memory fraction 0.900 (882,732 tokens per replica); the run uses 900,000")


def measured(**extra: object) -> dict:
    """The tiny sweep on a measured H200 built-in whose stated KV pool is above the engine's: one note."""
    raw = copy.deepcopy(BASE)
    raw["hardware"] = {"profile": "builtin:h200-llama3.1-8b-vllm", "gpus_per_replica": 1}
    raw["engine"]["kv_capacity_tokens"] = 900_000
    raw.update(extra)
    return raw


def test_a_runs_summary_keeps_its_scenarios_notes() -> None:
    raw = measured()
    for block in ("sweep", "sla"):
        raw.pop(block)
    summary = simulate(scenario_from_mapping(raw, REPO)).summary
    assert summary["notes"] == [ABOVE_POOL]
    assert describe("summary.json", "notes") is not None
    raw["engine"]["kv_capacity_tokens"] = 800_000
    assert simulate(scenario_from_mapping(raw, REPO)).summary["notes"] == []


def test_sweep_prints_each_note_once_and_its_report_has_them(tmp_path, cli) -> None:
    raw = measured()
    raw["sweep"] = {**raw["sweep"], "load": {"users": [2]}, "variants": raw["sweep"]["variants"][:2]}
    path = write_yaml(tmp_path / "sweep.yaml", raw)
    status, _out, err = cli("sweep", path, "--out", tmp_path / "out", "--workers", "1", "--quiet")
    assert status == 0 and err.count("specplan: note:") == 0  # --quiet prints nothing
    status, _out, err = cli("sweep", path, "--out", tmp_path / "out", "--workers", "1")
    assert status == 0 and err.count(f"specplan: note: {ABOVE_POOL}\n") == 1  # 4 points, one note
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Notes" in report and ABOVE_POOL in report


def test_plan_prints_each_note_once_and_plan_md_has_them(tmp_path, cli) -> None:
    raw = measured(horizon={"duration_s": 20, "warmup_s": 2})  # 4 requests/s: 60+ in the window
    raw["sweep"] = {"variants": raw["sweep"]["variants"][:2]}
    raw["workload"]["arrivals"] = {"kind": "poisson", "rate_per_s": 4.0}
    raw["workload"]["output_tokens"] = {"kind": "fixed", "value": 32}
    path = write_yaml(tmp_path / "plan.yaml", raw)
    status, _out, err = cli("plan", path, "--rate", "4", "--sla", "ttft_p99_s<=5", "--seeds", "2",
                            "--max-replicas", "2", "--workers", "1", "--quiet", "--out", tmp_path / "out")
    assert status == 0, err
    assert err.count(f"specplan: note: {ABOVE_POOL}\n") == 1  # 2 variants, every probe: one note
    md = (tmp_path / "out" / "plan.md").read_text()
    assert f"## Notes\n\n- {ABOVE_POOL}\n" in md
