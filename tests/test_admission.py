"""Admission: whether a request can ever fit is one rule, and every path that admits requests calls it.

The rule (specplan.simulator.engine.intake.kv_misfit): a request whose
footprint (prompt + output + the draft block) exceeds the most KV one
request may hold (the whole cache, or one attention rank's under
data-parallel attention) is rejected on arrival, with its reason; every
other request can be served. The paths: a replica's own submission, the
prefill pool in front of decode replicas, the reference engine
(validation/), and the split and sampled cluster runs built from them.
Every arrived request ends completed or rejected (or is still being served
when the horizon ends), and summary.json counts the rejections by reason.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from specplan.simulator.engine.cluster.simulation import Simulation, simulate
from specplan.simulator.engine.core.request_log import Status
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.study.split import simulate_sampled
from tests.conftest import BASE, REPO, make_scenario
from tests.drive import drive

# The story of issue 30, as a new user tried it: Llama-3.1-8B with data-parallel attention over 2
# ranks (20,000 KV tokens each) behind a prefill pool, prompts up to 30,000 tokens.
STALL = {
    "name": "dp-attention-behind-a-prefill-pool",
    "seed": 1,
    "horizon": {"duration_s": 60, "warmup_s": 0},
    "hardware": {"profile": "builtin:h200-llama3.1-8b-vllm"},
    "cluster": {"replicas": 1, "prefill": {"replicas": 1, "profile": "builtin:h200-llama3.1-8b-vllm-prefill",
                                           "link": {"gbps": 400, "latency_ms": 0.5}, "model": "llama3-8b"}},
    "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 40_000,
               "dp_attention": {"ranks": 2, "max_batch_requests": 32, "max_step_tokens": 256}},
    "drafter": {"family": "none", "block_size": 0},
    "policy": {"name": "none"},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 2},
                 "prompt_tokens": {"kind": "lognormal", "median": 6000, "sigma": 0.8, "max": 30_000},
                 "output_tokens": {"kind": "fixed", "value": 200}},
}
RANK_KV = 20_000


def test_a_request_larger_than_one_rank_is_rejected_not_left_blocking_the_decode_queue() -> None:
    result = simulate(scenario_from_mapping(copy.deepcopy(STALL), REPO))
    req, s = result.requests, result.summary
    need = req["prompt_tokens"] + req["output_tokens"]
    rejected = req["status"] == "rejected"
    assert rejected.any() and not (need <= RANK_KV)[rejected].any()        # too large for a rank: rejected ...
    assert (need > RANK_KV)[~rejected].sum() == 0                           # ... and only those
    assert req.loc[rejected, "reject_reason"].str.startswith("kv_capacity").all()
    # nothing waits for good: whatever arrived more than 10 s before the end has completed or was rejected
    early = req["arrival_s"] < s["simulated_s"] - 10
    assert set(req.loc[early, "status"]) <= {"completed", "rejected"}, req.loc[early, "status"].value_counts()
    assert s["requests_rejected_kv_capacity"] == s["requests_rejected"] == int(rejected.sum())
    assert s["requests_completed"] + s["requests_rejected"] + s["requests_running"] == s["requests_arrived"]


@pytest.mark.parametrize("pool", [False, True], ids=["replica", "prefill-pool"])
def test_every_simulator_path_admits_exactly_what_fits_one_rank(pool: bool) -> None:
    raw = copy.deepcopy(BASE)
    raw["engine"].update(kv_capacity_tokens=4000, dp_attention={"ranks": 2, "kv_capacity_tokens": 1000})
    if pool:
        del raw["engine"]["prefill"]
        raw["cluster"]["prefill"] = {"replicas": 1, "link": {"gbps": 100.0, "latency_ms": 1.0},
                                     "kv_bytes_per_token": 131072}
    sim = Simulation(scenario_from_mapping(raw, REPO))
    block = sim.config.block_size
    sim.submit(1000 - block - 50, 50, 0)       # exactly one rank's cache
    sim.submit(1000 - block - 49, 50, 0)       # one token more
    assert sim.log["status"][1] == Status.REJECTED and sim.log["status"][0] != Status.REJECTED
    assert sim.log.reject_reason[1].startswith("kv_capacity")


def test_the_reference_engine_admits_by_the_same_rule() -> None:
    pytest.importorskip("torch", reason="the reference engine needs torch (the 'profile' extra)")
    from specplan.hwprofiles.modelshape import ModelShape
    from specplan.hwprofiles.profile import linear_profile
    from specplan.validation.engine import ReferenceEngine
    from specplan.validation.runner import TorchRunner

    scenario = make_scenario(
        engine={"max_batch_requests": 4, "kv_capacity_tokens": 400, "prefill": {"mode": "chunked", "chunk_tokens": 64},
                "dp_attention": {"ranks": 2}},
        drafter={"family": "dflash", "block_size": 3})
    shape = ModelShape(name="micro", hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, vocab=512)
    runner = TorchRunner(shape, max_requests=4, capacity_tokens=256, block_size=3, seed=1, threads=1)
    engine = ReferenceEngine(scenario, runner, linear_profile(2.0, 0.05, max_tokens=64))
    engine.submit(200 - 3 - 10, 10, 0)         # one rank's cache (400 / 2) exactly
    engine.submit(200 - 3 - 9, 10, 0)          # one token more: the whole cache would hold it, a rank cannot
    assert engine.log["status"][0] != Status.REJECTED and engine.log["status"][1] == Status.REJECTED
    assert engine.log.reject_reason[1].startswith("kv_capacity")


def test_admission_under_dp_attention_keeps_the_engine_total_as_preemption_does() -> None:
    """Ranks of 3,000 KV tokens in an engine of 4,000: admission fills no more than preemption keeps."""
    scenario = make_scenario(engine={"kv_capacity_tokens": 4000, "max_batch_requests": 32,
                                     "dp_attention": {"ranks": 2, "kv_capacity_tokens": 3000}})
    held: list[int] = []
    drive(scenario, np.full(40, 500), np.full(40, 200), on_plan=lambda core, _plan: held.append(core.state.footprint))
    assert max(held) <= scenario.engine.kv_capacity_tokens


def test_a_sampled_fleet_counts_its_rejections_by_reason() -> None:
    scenario = make_scenario(cluster={"replicas": 4, "router": "random"}, engine={**BASE["engine"],
                             "kv_capacity_tokens": 400},
                             workload={**BASE["workload"], "prompt_tokens": {"kind": "lognormal", "median": 300,
                                                                             "sigma": 0.5, "max": 900}},
                             horizon={"duration_s": 10, "warmup_s": 1})
    s = simulate_sampled(scenario, 2).summary
    assert s["requests_rejected"] > 0
    assert s["requests_rejected_kv_capacity"] == s["requests_rejected"]
