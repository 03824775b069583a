"""A plan says what it planned (issue 32, item 9).

A decode plan behind a four-replica prefill pool with a prefix cache used
to answer `"gpus": 5` and nothing else. Every plan output now says, per
variant and per probe, how many GPUs decode and how many prefill, that the
pool was held fixed, how busy it was, and the prefix cache's hit rate; a
plan without a pool says so by its nulls.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.scenario.study import Bound
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.files import write_plan_files
from specplan.simulator.study.plan.plan_json import capacity_json
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.tables import plan_table
from specplan.simulator.study.plan.target import Target
from tests.test_sweep import BASE


def reused_prefixes(path, requests: int = 240, seconds: float = 40.0) -> str:
    """A Mooncake-format trace: steady arrivals whose prompts share one of four 2-block prefixes."""
    lines = []
    for i, t in enumerate(np.linspace(0.0, seconds, requests, endpoint=False)):
        prefix = [100 + 2 * (i % 4), 101 + 2 * (i % 4)]
        lines.append(json.dumps({"timestamp": float(t) * 1000, "input_length": 1536, "output_length": 30,
                                 "hash_ids": [*prefix, 1000 + i]}))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def pooled_plan(tmp_path):
    raw = copy.deepcopy(BASE)
    del raw["sweep"], raw["sla"]
    raw["horizon"] = {"duration_s": 40, "warmup_s": 4}
    raw["workload"] = {"arrivals": {"kind": "trace", "path": reused_prefixes(tmp_path / "t.jsonl"),
                                    "format": "mooncake"}}
    raw["cluster"] = {"replicas": 1, "prefill": {
        "replicas": 4, "router": "cache_aware", "max_batch_tokens": 4096, "kv_bytes_per_token": 1024,
        "link": {"gbps": 100.0, "latency_ms": 0.1}, "prefix_cache": {"block_tokens": 512, "capacity_tokens": 65536},
        "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.01}}}
    target = Target("rate_scale", 1.0, (Bound("tps_user_p10", ">=", 10.0),), seeds=1)
    return plan_capacity(raw, target, RunOptions(workers=1, out_dir=tmp_path / "plan"))


def test_every_plan_output_says_which_gpus_prefill_and_which_decode(tmp_path):
    plan = pooled_plan(tmp_path)
    (row,) = capacity_json(plan)["variants"]
    assert (row["replicas"], row["gpus"], row["gpus_decode"], row["gpus_prefill"]) == (1, 5, 1, 4)
    assert row["prefill_pool"] == "held fixed" and 0 < row["prefill_busy_share"] < 1
    assert 0.4 < row["prefix_cache_hit_rate"] < 0.7  # two blocks of three hit, once each prefix is cached
    files = write_plan_files(plan, tmp_path / "plan")
    probes = pd.read_csv(files["probes.csv"])
    assert probes[["gpus_decode", "gpus_prefill"]].values.tolist() == [[1, 4]]
    assert probes["prefill_pool"].tolist() == ["held fixed"]
    assert probes["prefill_busy_share"].iloc[0] == pytest.approx(row["prefill_busy_share"])
    assert probes["prefix_cache_hit_rate"].iloc[0] == pytest.approx(row["prefix_cache_hit_rate"])
    said = "5 GPU(s): 1 decode + 4 prefill (the prefill pool held fixed, busy"
    assert said in plan_table(plan) and said in files["plan.md"].read_text()
    assert "prefix-cache hit rate" in files["plan.md"].read_text()
