"""The responsible mode, cap or rule of a miss: one ablation at a time, on a hand-made case.

The hand-made case runs SGLang-style separate prefill batches (its decoding
requests wait for every prompt chunk) and its "published" TPOT is, by
construction, what the same engine gives with prompt chunks mixed into decode
steps: the prediction misses by more than 30%, and of the ablations that apply
only the prefill schedule brings it back, so it is named. Where no ablation
moves |error| by 5 points the step price is named, with the run's records.
"""

from __future__ import annotations

import json

import pytest
import yaml

from specplan.simulator.engine.assembly import assemble
from specplan.simulator.scenario import load_scenario
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.attribution import (
    ATTRIBUTE_AT,
    STEP_PRICE,
    Setting,
    extend_op,
    extend_op_added,
    needs_attribution,
    verdict,
)
from specplan.simulator.study.replication.case_runner import CaseRunner, Params
from specplan.simulator.study.replication.published import read_case
from specplan.simulator.study.replication.replicate import ReplicationAsk, replicate
from tests.conftest import REPO

SCENARIO = {
    "name": "attribution-hand-made", "seed": 3, "horizon": {"requests": 24},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.001, "max_tokens": 8192},
                 "gpus_per_replica": 1},
    "cluster": {"replicas": 1},
    "engine": {"max_batch_requests": 8, "kv_capacity_tokens": 1_000_000,
               "prefill": {"mode": "chunked", "chunk_tokens": 256, "schedule": "separate"}},
    "drafter": {"family": "none", "block_size": 0},
    "policy": {"name": "none"},
    "workload": {"arrivals": {"kind": "bench_client", "num_prompts": 24, "max_concurrency": 4, "client": "vllm"},
                 "prompt_tokens": {"kind": "fixed", "value": 4000}, "output_tokens": {"kind": "fixed", "value": 40}},
}
SOURCE = {"title": "hand-made attribution case (not a measurement)", "repository": "none",
          "reference": "synthetic: its TPOT is the mixed schedule's", "engine": {"name": "synthetic", "version": "0"},
          "model": "none", "gpus": {"type": "cpu", "count": 1}, "parallelism": {"tp": 1}, "client": "vllm",
          "arms": {"none": []}, "workloads": {"fixed-4000-40": {"num_prompts": 24}}}


def hand_made_case(folder, tpot_ms: float):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    (folder / "source.yaml").write_text(yaml.safe_dump(SOURCE))
    (folder / "published.csv").write_text("workload,arm,metric,value,unit,concurrency,note\n"
                                          f"fixed-4000-40,none,median_tpot,{tpot_ms:.6f},ms,4,the mixed schedule's\n")
    return read_case(folder)


def test_the_rule_that_moves_a_miss_back_is_named_responsible(tmp_path):
    probe = hand_made_case(tmp_path / "probe", 1.0)
    runner = CaseRunner(probe, tmp_path / "out")
    mixed = runner.predict(probe.figures[0], Params(), ("engine.prefill.schedule=mixed",))
    separate = runner.predict(probe.figures[0], Params())
    assert separate / mixed - 1 > ATTRIBUTE_AT        # the hand-made case is a miss by construction

    case = hand_made_case(tmp_path / "case", mixed)
    result = replicate([case], ReplicationAsk(attribute=True), RunOptions(out_dir=tmp_path / "out"))
    row = result.rows.iloc[0]
    assert row["predicted_error"] == pytest.approx(separate / mixed - 1, rel=1e-6)
    assert row["responsible"] == "prefill_schedule"
    assert "mixed into decode steps" in row["responsible_reason"]
    assert row["responsible_reason"].endswith(("-> +0%", "-> -0%"))
    entry = json.loads((tmp_path / "out" / "replication.json").read_text())["attribution"][0]
    assert entry["responsible"] == "prefill_schedule" and abs(entry["ablation_errors"]["prefill_schedule"]) < 1e-6
    # without --attribute the record has no such column
    plain = replicate([case], None, RunOptions(out_dir=tmp_path / "plain"))
    assert "responsible" not in plain.rows


def test_where_no_rule_moves_the_miss_the_step_price_is_named_with_the_records():
    summary = {"mode_reason_time_share.decode_graph": 0.4, "mode_reason_time_share.rank_prefilling": 0.6,
               "engine_cap_binding": "max_running_requests"}
    found = verdict(-0.5, {"host_cycle": -0.48, "rank_balance": -0.52}, {"host_cycle": "x", "rank_balance": "y"},
                    summary)
    assert found.responsible == STEP_PRICE
    assert "the closest, host_cycle: |error| -2 points" in found.reason
    assert "most step time rank_prefilling 60%, cap binding max_running_requests" in found.reason
    # an ablation that overshoots to the other side is judged by |error|: -50% -> +44% is 6 points better, -> +47% only 3
    assert verdict(-0.5, {"graph_modes": 0.44}, {"graph_modes": "g"}, {}).responsible == "graph_modes"
    assert verdict(-0.5, {"graph_modes": 0.47}, {"graph_modes": "g"}, {}).responsible == STEP_PRICE


def test_only_predicted_serving_figures_past_the_bound_are_attributed():
    base = {"level": "serving", "status": "ok", "metric": "median_tpot"}
    assert needs_attribution({**base, "predicted_error": -0.31})
    assert not needs_attribution({**base, "predicted_error": 0.29})
    assert not needs_attribution({**base, "predicted_error": 0.5, "level": "step"})
    assert not needs_attribution({**base, "predicted_error": 0.5, "status": "database lacks: x"})
    assert not needs_attribution({**base, "predicted_error": float("nan")})


V4_CELL = REPO / "benchmarks" / "published" / "sglang-cookbook-v4-flash-b300-fp4-low-latency" / "scenario.yaml"


def test_the_extend_ablations_set_the_two_readings_of_the_eager_pair_where_launches_price_a_step(tmp_path):
    """An extend step's host cost per kernel, at the family's eager decode figure (28.5 us) and at the same pair
    read with launches added to the kernels (16.9 us), on a DeepSeek-V4 SGLang cell; nowhere else (a profile that
    names no model), and not where the scenario sets it already."""
    v4 = load_scenario(V4_CELL)
    setting = Setting(v4, assemble(v4), {})
    assert extend_op(setting)[0] == ("engine.cuda_graph.extend_op_us=28.5",)
    assert extend_op_added(setting)[0] == ("engine.cuda_graph.extend_op_us=16.9",)
    assert "instead of the launcher's 4.7" in extend_op_added(setting)[1]
    own = load_scenario(V4_CELL, ["engine.cuda_graph.extend_op_us=9.1"])
    assert extend_op(Setting(own, assemble(own), {})) is None
    linear = hand_made_case(tmp_path / "linear", 1.0)
    plain = CaseRunner(linear, tmp_path / "out").scenario(linear.figures[0], "none", Params())
    assert extend_op(Setting(plain, assemble(plain), {})) is None
