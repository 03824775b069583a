"""A plan that cannot be met stops early, says why, and gives no per-GPU figure (issue 32, item 6).

Stories: a closed loop of a few users asked for a speed no batch reaches
stops once more replicas stop moving the statistic (it probed up to 256);
a decode plan behind a saturated prefill pool held fixed stops after its
first probe and names the pool to grow; one seed prints no interval; and
the keep-up judge counts a request rejected for KV capacity as answered,
not outstanding, so a cluster with rejections can still keep up.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.scenario.study import Bound
from specplan.simulator.study.keepup import KEEPS_UP, judge_backlog, outstanding
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan.files import probe_lines
from specplan.simulator.study.plan.plan_json import capacity_json
from specplan.simulator.study.plan.probe import Probe
from specplan.simulator.study.plan.reach import out_of_reach
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.tables import plan_table
from specplan.simulator.study.plan.target import Target
from tests.test_sweep import BASE


def closed_loop(users: int) -> dict:
    raw = copy.deepcopy(BASE)
    del raw["sweep"], raw["sla"]
    raw["horizon"] = {"duration_s": 8, "warmup_s": 1}
    raw["workload"]["arrivals"] = {"kind": "closed_loop", "users": users, "think_s": 0.2}
    return raw


def test_an_unreachable_speed_stops_when_replicas_stop_moving_it():
    target = Target("users", 4, (Bound("tps_user_p10", ">=", 5000.0),), seeds=1)
    plan = plan_capacity(closed_loop(4), target, RunOptions(workers=1), PlanOptions(max_replicas=256))
    (variant,) = plan.variants
    assert variant.replicas is None and max(p.replicas for p in variant.probes) <= 16  # not 256
    assert variant.unmet.startswith("more replicas stopped moving the SLA statistics: tps_user_p10")
    row = capacity_json(plan)["variants"][0]
    assert row["meets_sla"] is False and row["throughput_per_gpu"] is None and row["unmet"] == variant.unmet
    table = plan_table(plan)
    assert f"not met: {variant.unmet}" in table
    assert table.splitlines()[2].split()[-1] == "—"  # no tok/s/GPU for an unmet plan (no price: no cost columns)


def test_one_seed_prints_no_interval():
    target = Target("users", 2, (Bound("tps_user_p10", ">=", 5000.0),), seeds=1)
    plan = plan_capacity(closed_loop(2), target, RunOptions(workers=1), PlanOptions(max_replicas=4))
    text = "\n".join(probe_lines(plan)) + plan_table(plan)
    assert "95% interval" not in text and "(one seed: no interval)" in text and "1 seed per probe" in text


def saturated_pool_scenario() -> dict:
    raw = copy.deepcopy(BASE)
    del raw["sweep"], raw["sla"]
    raw["horizon"] = {"duration_s": 20, "warmup_s": 2}
    raw["workload"] = {"arrivals": {"kind": "poisson", "rate_per_s": 40.0},
                       "prompt_tokens": {"kind": "fixed", "value": 2000},
                       "output_tokens": {"kind": "fixed", "value": 20}}
    raw["cluster"] = {"replicas": 1, "prefill": {
        "replicas": 1, "max_batch_tokens": 4096, "kv_bytes_per_token": 1024, "link": {"gbps": 100.0, "latency_ms": 0.1},
        "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.05}}}  # 40 × 2000 tokens at 20k/s: 4x over
    return raw


def test_a_saturated_prefill_pool_held_fixed_stops_the_plan_after_its_first_probe():
    target = Target("rate_per_s", 40.0, (Bound("ttft_p99_s", "<=", 1.0),), seeds=1)
    plan = plan_capacity(saturated_pool_scenario(), target, RunOptions(workers=1), PlanOptions(max_replicas=64))
    (variant,) = plan.variants
    assert [p.replicas for p in variant.probes] == [1]
    assert "the prefill pool (1 replica(s), held fixed) was busy" in variant.unmet
    assert variant.unmet.endswith("grow cluster.prefill.replicas")


def probe_at(replicas: int, value: float, half: float = math.nan, keep_up: str = KEEPS_UP) -> Probe:
    return Probe(replicas=replicas, meets_sla=False, tps_user=value, tps_user_ci95=half, throughput_per_gpu=1.0,
                 ttft_p99_s=0.1, backlog_growth=0.0, gpus=replicas, keep_up=keep_up,
                 stats={"tps_user_p10": (value, half)})


@pytest.mark.parametrize(("before", "after", "stops"), [
    (300.0, 301.0, True),      # flat: a gain below 2% with a gap no doubling left closes
    (300.0, 330.0, False),     # still rising by 10%
    (97.0, 98.0, False),       # flat, but the same gain at each doubling left reaches 100
])
def test_the_stop_rule_reads_the_gain_the_noise_and_the_gap(before, after, stops):
    target = Target("users", 8, (Bound("tps_user_p10", ">=", 100.0 if after < 100 else 5000.0),))
    probes = {4: probe_at(4, before), 8: probe_at(8, after)}
    assert (out_of_reach(probes, 8, target, fixed_pool=False, max_replicas=256) is not None) is stops


def test_a_gain_inside_the_seeds_interval_is_noise():
    target = Target("users", 8, (Bound("tps_user_p10", ">=", 5000.0),))
    probes = {4: probe_at(4, 300.0, half=20.0), 8: probe_at(8, 315.0, half=20.0)}
    assert out_of_reach(probes, 8, target, fixed_pool=False, max_replicas=256) is not None
    probes[8] = probe_at(8, 360.0, half=20.0)
    assert out_of_reach(probes, 8, target, fixed_pool=False, max_replicas=256) is None


def test_rejected_requests_are_answered_not_outstanding():
    rng = np.random.default_rng(3)
    arrival = np.sort(rng.uniform(0, 60, 600))
    rejected = rng.random(600) < 0.1
    finish = np.where(rejected, np.nan, arrival + 0.5)
    requests = pd.DataFrame({"arrival_s": arrival, "finish_s": finish, "admitted_s": np.where(rejected, np.nan, arrival),
                             "output_tokens": 50, "status": np.where(rejected, "rejected", "completed"),
                             "replica": 0})
    assert outstanding(requests, np.array([59.0]))[0] <= 3
    assert judge_backlog(requests, 5.0, 60.0).verdict == KEEPS_UP
