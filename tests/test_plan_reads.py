"""What a plan's tables and refusals say (issue 39, "also fix").

The table shows the bound that sets the answer, not tokens/s/user whatever
binds; a search table shows the prefill pool's busy share and the prefix
cache's hit rate; "not sure" names the statistic, the size and the bound
(no "1 or 0 replica(s)"); a fixed prefill pool whose queue alone misses a
TTFT bound is named at the first probe; a closed loop of 10¹² users is one
estimate of arrivals whatever the drafter; a refused plan leaves no folder
it created; `--merge` of a schedule into variants that each run their own
is refused.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import yaml

from specplan.simulator.scenario.study import Bound
from specplan.simulator.study.keepup import FALLS_BEHIND
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.probe import Probe
from specplan.simulator.study.plan.replica_search import ReplicaSizing
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.tables import plan_table, search_table
from specplan.simulator.study.plan.target import Target
from tests.conftest import REPO
from tests.test_planner import h100_mtp1
from tests.test_search_plan import searched  # noqa: F401  (the module's search, reused)
from tests.test_sweep import BASE, write_yaml

TPS, TTFT = Bound("tps_user_p10", ">=", 30.0), Bound("ttft_p99_s", "<=", 5.0)


def probe(replicas: int, tps: tuple[float, float], ttft: tuple[float, float], keep_up: str = "keeps up") -> Probe:
    return Probe(replicas=replicas, meets_sla=TPS.holds(tps[0]) and TTFT.holds(ttft[0]) and keep_up == "keeps up",
                 tps_user=tps[0], tps_user_ci95=tps[1], throughput_per_gpu=1000.0, ttft_p99_s=ttft[0],
                 backlog_growth=0.0, gpus=8 * replicas, keep_up=keep_up,
                 runs=({"gpus": 8 * replicas},), stats={TPS.key: tps, TTFT.key: ttft}, simulated=replicas)


def plan_of(*probes: Probe, replicas: int) -> CapacityPlan:
    target = Target("rate_per_s", 20.0, (TPS, TTFT), seeds=3)
    return CapacityPlan(target, [ReplicaSizing("v", replicas, 8, list(probes))], RunOptions())


def test_the_table_shows_the_bound_that_sets_the_answer():
    # one fewer misses TTFT (tokens/s/user passes there): TTFT binds, and the table reads it, not tps p10
    plan = plan_of(probe(1, (60.0, 2.0), (9.0, 1.0)), probe(2, (90.0, 3.0), (3.2, 0.4)), replicas=2)
    header, row = plan_table(plan).splitlines()[1:3]
    assert "binding bound" in header and "tok/s/user p10" not in header
    assert "ttft_p99_s<=5" in row and "3.20 ± 0.40" in row and "1: 9.0 ± 1.0" in row
    # one fewer fell behind: the bound with the least slack at the answer
    plan = plan_of(probe(1, (33.0, 2.0), (4.0, 1.0), FALLS_BEHIND), probe(2, (32.0, 3.0), (0.2, 0.1)), replicas=2)
    row = plan_table(plan).splitlines()[2]
    assert "tps_user_p10>=30" in row and "1: falls behind" in row


def test_not_sure_names_the_statistic_the_size_and_the_bound():
    plan = plan_of(probe(1, (60.0, 2.0), (4.1, 1.3)), replicas=1)
    text = plan_table(plan)
    assert "not sure: ttft_p99_s 4.1 ± 1.3 at 1 replica holds its bound (<= 5) inside its 95% interval" in text
    assert "0 replica" not in text and "replica(s)" not in text


@pytest.mark.slow("a deployment search of two GPU types (the search tests' own, about 20 s)")
def test_a_search_table_shows_the_pools_busy_share_and_the_hit_rate(searched):  # noqa: F811
    plan, _ = searched
    header = search_table(plan).splitlines()[1]
    assert "prefill busy" in header and "hit rate" in header


def bursty_pool(tmp_path) -> str:
    """One decode replica behind one prefill replica held fixed, fed bursts of 60 prompts every 30 s."""
    times = sorted([float(t) for t in np.arange(0, 120, 0.5)] + [30.0 * k + 0.01 * i for k in range(4) for i in range(60)])
    lines = [json.dumps({"timestamp": t * 1000, "input_length": 1536, "output_length": 30, "hash_ids": [i]})
             for i, t in enumerate(times)]
    (tmp_path / "bursty.jsonl").write_text("\n".join(lines) + "\n")
    raw = copy.deepcopy(BASE)
    del raw["sweep"], raw["sla"]
    raw["horizon"] = {"duration_s": 120, "warmup_s": 5}
    raw["workload"] = {"arrivals": {"kind": "trace", "path": str(tmp_path / "bursty.jsonl"), "format": "mooncake"}}
    raw["cluster"] = {"replicas": 1, "prefill": {
        "replicas": 1, "router": "least_loaded", "max_batch_tokens": 4096, "kv_bytes_per_token": 1024,
        "link": {"gbps": 100.0, "latency_ms": 0.1}, "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.02}}}
    return str(write_yaml(tmp_path / "pool.yaml", raw))


@pytest.mark.slow("a capacity plan behind a prefill pool on a 120 s trace, two seeds (about 8 s)")
def test_a_fixed_pool_whose_queue_misses_ttft_is_named_at_the_first_probe(tmp_path):
    target = Target("rate_scale", 1.0, (Bound("ttft_p99_s", "<=", 0.5), Bound("tps_user_p10", ">=", 10.0)), seeds=2)
    plan = plan_capacity(bursty_pool(tmp_path), target, RunOptions(workers=1), PlanOptions(max_replicas=8))
    (variant,) = plan.variants
    assert variant.replicas is None and [p.replicas for p in variant.probes] == [1]  # not probed up to 8
    busy = variant.probes[0].mean("prefill_busy_share")
    assert busy < 0.5  # far from saturated: its bursts, not its load, queue it
    assert "grow cluster.prefill.replicas" in variant.unmet and "without its queue" in variant.unmet


def test_a_closed_loop_of_a_trillion_users_is_one_estimate_whatever_the_command(cli):
    default = REPO / "scenarios" / "default.yaml"
    _, _, planned = cli("plan", default, "--users", 10**12, "--sla-tps", 10, "--quiet")
    _, _, ran = cli("run", default, "--set", f"workload.arrivals.users={10**12}", "--out", "unused")
    counts = [line.split(" arrivals")[0].rsplit(" ", 1)[-1] for line in (planned, ran)]
    assert counts[0] == counts[1] == "1e+12"


def test_a_plan_refused_after_its_probes_ran_leaves_no_folder_it_created(cli, tmp_path):
    path = write_yaml(tmp_path / "short.yaml", h100_mtp1(3, 1))
    out = tmp_path / "plan"
    status, _, err = cli("plan", path, "--rate", 70, "--sla-tps", 50, "--seeds", 1, "--quiet", "--out", out)
    assert status == 2 and "too short to judge" in err and not out.exists()
    out.mkdir()  # a folder that was there before is the user's probe cache: kept, and said so
    status, _, err = cli("plan", path, "--rate", 70, "--sla-tps", 50, "--seeds", 1, "--quiet", "--out", out)
    assert status == 2 and f"stay in {out / 'probes'}/" in err and any((out / "probes").iterdir())


def test_merging_a_schedule_into_variants_that_run_their_own_is_refused(cli, tmp_path):
    raw = copy.deepcopy(BASE)
    raw["sweep"] = {"variants": [
        {"label": "A", "policy": {"name": "length-schedule", "params": {"schedule": {4: 3, 16: 1}}}},
        {"label": "B", "policy": {"name": "length-schedule", "params": {"schedule": {8: 1, 16: 1}}}}]}
    del raw["sla"]
    path = write_yaml(tmp_path / "two-schedules.yaml", raw)
    (tmp_path / "schedule.yaml").write_text(yaml.safe_dump(
        {"policy": {"name": "length-schedule", "params": {"schedule": {2: 3, 8: 2, 16: 1}}}}))
    status, out, err = cli("plan", path, "--users", 4, "--sla-tps", 10, "--merge", tmp_path / "schedule.yaml")
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "policy.params.schedule does not apply: every variant" in err
