"""A prefill pool of GPUs: M/D/c queueing, conservation across the two pools, TTFT's parts, GPUs counted."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from scipy import stats

from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.merge import deep_merge
from specplan.simulator.scenario.study import Bound
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.plan_json import capacity_json
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.target import Target
from tests.conftest import BASE, REPO

LINK = {"gbps": 100.0, "latency_ms": 2.0}


def pool_scenario(pool: dict, **changes) -> object:
    raw = copy.deepcopy(BASE)
    del raw["engine"]["prefill"]
    raw["cluster"]["prefill"] = {"replicas": 1, "link": LINK, "kv_bytes_per_token": 131072, **pool}
    return scenario_from_mapping(deep_merge(raw, changes), REPO)


def mdc_wait_cosmetatos(rate: float, service_s: float, c: int) -> float:
    """Mean wait in queue of M/D/c: half of M/M/c's (Erlang C), Cosmetatos's correction."""
    a, rho = rate * service_s, rate * service_s / c
    terms = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) / (1 - rho)
    erlang_c = tail / (terms + tail)
    wq_mmc = erlang_c * service_s / (c * (1 - rho))
    return 0.5 * wq_mmc * (1 + (1 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c))


def pool_waits(seed: int, rate: float, service_s: float, c: int) -> float:
    """Mean wait before prefill in a pull pool of c replicas, each prompt one step of service_s."""
    scenario = pool_scenario(
        {"replicas": c, "router": "pull", "max_batch_tokens": 64,
         "profile": {"kind": "linear", "base_ms": service_s * 1000, "per_token_ms": 0.0}},
        seed=seed, horizon={"duration_s": 300, "warmup_s": 30},
        cluster={"replicas": 2},
        hardware={"profile": {"kind": "linear", "base_ms": 1.0, "per_token_ms": 0.0}},
        drafter={"family": "none", "block_size": 0}, policy={"name": "none", "params": {}},
        workload={"arrivals": {"kind": "poisson", "rate_per_s": rate},
                  "prompt_tokens": {"kind": "fixed", "value": 64}, "output_tokens": {"kind": "fixed", "value": 1}},
    )
    req = simulate(scenario).requests
    done = req[(req["arrival_s"] > 30) & req["prefill_end_s"].notna()]
    return float((done["prefill_end_s"] - done["arrival_s"]).mean()) - service_s


@pytest.mark.slow("a statistical check: long or many simulations")
def test_a_pull_pool_at_fixed_service_is_md_c() -> None:
    rate, service_s, c = 21.0, 0.1, 3      # ρ = 0.7
    expected = mdc_wait_cosmetatos(rate, service_s, c)
    waits = np.array([pool_waits(seed, rate, service_s, c) for seed in range(6)])
    half = stats.t.ppf(0.995, waits.size - 1) * waits.std(ddof=1) / np.sqrt(waits.size)
    assert abs(waits.mean() - expected) <= half + 0.01 * expected, (waits.mean(), expected, half)
    assert half < 0.3 * expected           # so it tells M/D/c from M/M/c (twice the wait) and from JSQ


def test_every_request_is_in_exactly_one_place_across_the_two_pools() -> None:
    scenario = pool_scenario({"replicas": 2, "router": "least_loaded", "max_batch_tokens": 256,
                              "link": {"gbps": 20.0, "latency_ms": 50.0},
                              "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.05}},
                             horizon={"duration_s": 8, "warmup_s": 1},
                             engine={"kv_capacity_tokens": 3000}, cluster={"replicas": 2},
                             workload={"arrivals": {"kind": "poisson", "rate_per_s": 40},
                                       "prompt_tokens": {"kind": "fixed", "value": 400}})
    result = simulate(scenario)
    s = result.summary
    parts = (s["requests_completed"] + s["requests_in_prefill"] + s["requests_in_transfer"]
             + s["requests_at_decode"] + s["requests_rejected"])
    assert parts == s["requests_arrived"] > 0
    assert s["requests_in_prefill"] > 0 and s["requests_in_transfer"] > 0 and s["requests_at_decode"] > 0
    assert s["preemptions"] > 0                       # preempted requests went back through the pool
    req = result.requests
    done = req[req["status"] == "completed"]
    assert (done["generated_tokens"] == done["output_tokens"]).all()
    assert (done["ttft_s"] > 0).all()     # preempted ones included: each got its first token once
    assert (done["first_token_s"] <= done["finish_s"]).all()
    steps = result.prefill_steps
    assert steps["prompt_tokens"].max() <= 256
    assert (steps["prompt_tokens"].sum() >= done["prompt_tokens"].sum())


def test_ttft_is_queueing_prefill_transfer_and_the_first_decode_step() -> None:
    """One request at a time: TTFT = prefill step + bytes / bandwidth + latency + first decode step."""
    scenario = pool_scenario({"max_batch_tokens": 1000, "link": {"gbps": 8.0, "latency_ms": 3.0},
                              "profile": {"kind": "linear", "base_ms": 20.0, "per_token_ms": 0.01}},
                             hardware={"profile": {"kind": "linear", "base_ms": 7.0, "per_token_ms": 0.0}},
                             drafter={"family": "none", "block_size": 0}, policy={"name": "none", "params": {}},
                             workload={"arrivals": {"kind": "poisson", "rate_per_s": 0.5},
                                       "prompt_tokens": {"kind": "fixed", "value": 1000}})
    result = simulate(scenario)
    prefill_s = (20.0 + 0.01 * 1000) / 1000
    transfer_s = 1000 * 131072 * 8 / 8e9 + 0.003
    expected = prefill_s + transfer_s + 0.007
    ttft = result.requests["ttft_s"].dropna().to_numpy()
    alone = ttft[ttft < expected + 1e-6]     # requests that met no queue (nearly all at this load)
    assert alone.size > 0.8 * ttft.size
    assert np.allclose(alone, expected, rtol=0, atol=1e-9)
    assert result.summary["mean_kv_transfer_ms"] == pytest.approx(transfer_s * 1000)


def test_every_gpu_of_both_pools_counts_per_gpu() -> None:
    scenario = pool_scenario({"replicas": 3, "gpus_per_replica": 2,
                              "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.01}},
                             cluster={"replicas": 2}, hardware={"gpus_per_replica": 4})
    s = simulate(scenario).summary
    assert (s["gpus_prefill"], s["gpus_decode"], s["gpus_total"], s["gpus"]) == (6, 8, 14, 14)
    assert s["throughput_tokens_per_s_per_gpu"] == pytest.approx(s["throughput_tokens_per_s"] / 14)


def test_a_built_in_prefill_profile_prices_the_pool() -> None:
    scenario = pool_scenario({"profile": "builtin:h200-llama3.1-8b-vllm-prefill", "max_batch_tokens": 8192})
    s = simulate(scenario).summary
    assert s["prefill_steps"] > 0 and 5.0 < s["mean_prefill_step_ms"] < 20.0


@pytest.mark.parametrize(("pool", "changes", "message"), [
    ({"profile": "builtin:h200-llama3.1-8b-vllm"}, {}, "not a prefill-step profile"),
    ({"max_batch_tokens": 32768, "profile": "builtin:h200-llama3.1-8b-vllm-prefill"}, {},
     "beyond the profile's last measured point"),
    ({"router": "cache_aware"}, {}, "cache_aware routing needs a 'prefix_cache' block"),
    ({"model": "llama3-8b"}, {}, "give exactly one of 'model'"),
    ({}, {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 256}}}, "chunked prefill runs inside"),
    ({}, {"engine": {"prefill": {"mode": "disaggregated", "tokens_per_s": 5000}}}, "exclude each other"),
    ({"link": {"gbps": 0}}, {}, "cluster.prefill.link.gbps"),
])
def test_bad_prefill_pools_are_refused_in_one_line(pool: dict, changes: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message) as err:
        pool_scenario(pool, **changes)
    assert "\n" not in str(err.value)


def test_a_plan_counts_the_prefill_pool_in_its_gpus() -> None:
    raw = copy.deepcopy(BASE)
    del raw["engine"]["prefill"]
    raw["horizon"] = {"duration_s": 24, "warmup_s": 1}  # long enough for the keep-up test to judge
    raw["cluster"]["prefill"] = {"replicas": 2, "gpus_per_replica": 1, "link": LINK, "kv_bytes_per_token": 131072,
                                 "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.01}}
    target = Target("rate_per_s", 4.0, (Bound("tps_user_p10", ">=", 1.0),))
    row = capacity_json(plan_capacity(raw, target, RunOptions(workers=1, progress=False)))["variants"][0]
    assert row["meets_sla"] and row["gpus"] == row["replicas"] + 2
