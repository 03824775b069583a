"""Conservation, as properties over small random scenarios (hypothesis).

Every arrived request is completed, still in the system, or rejected with a
reason (counted by reason in the summary), behind a prefill pool or not;
completed requests emitted exactly their requested output tokens;
per step and per request, accepted ≤ verified ≤ block size; and the
requests' step counters add up to the steps' (decoding request-steps,
verified and accepted drafts), whatever the policy.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.core.request_log import REJECT_REASONS, TTFT_PARTS
from tests.conftest import make_scenario


@st.composite
def small_scenarios(draw):
    gamma = draw(st.integers(1, 4))
    prefill = draw(st.sampled_from([
        {"mode": "disaggregated", "tokens_per_s": draw(st.sampled_from([2_000, 50_000])),
         "first_token": draw(st.sampled_from(["decode", "prefill"]))},
        {"mode": "chunked", "chunk_tokens": draw(st.sampled_from([16, 256]))},
        "pool",
    ]))
    pool = None
    if prefill == "pool":  # a prefill pool in front of the decode replicas replaces the engine's prefill stage
        prefill = {"mode": "disaggregated", "tokens_per_s": 1e12}
        pool = {"replicas": draw(st.integers(1, 2)), "link": {"gbps": 50.0, "latency_ms": 1.0},
                "kv_bytes_per_token": 131072, "max_batch_tokens": 256,
                "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.01}}
    horizon = draw(st.sampled_from([{"duration_s": 6.0, "warmup_s": 1.0}, {"requests": 25, "warmup_s": 0.0}]))
    return make_scenario(
        seed=draw(st.integers(0, 10_000)),
        horizon=horizon,
        cluster={"replicas": draw(st.integers(1, 3)),
                 "router": draw(st.sampled_from(["round_robin", "least_loaded", "random"])), "prefill": pool},
        engine={"max_batch_requests": draw(st.integers(1, 8)),
                "kv_capacity_tokens": draw(st.sampled_from([300, 900, 100_000])),
                "prefill": prefill, "max_step_tokens": draw(st.sampled_from([64, 512])),
                "budget": draw(st.sampled_from(["defer", "truncate"])),
                "dp_attention": draw(st.sampled_from([None, {"ranks": 2}])),
                "cuda_graph": draw(st.sampled_from([None, {"engine": "vllm"}, {"engine": "sglang"}]))},
        drafter={"block_size": gamma,
                 "acceptance": {"per_position": {"chat": [0.8] * gamma},
                                "request_sigma": draw(st.sampled_from([0.0, 0.7])),
                                "token_sigma": draw(st.sampled_from([0.0, 0.7]))}},
        policy=draw(st.sampled_from([{"name": "static", "params": {"length": draw(st.integers(0, gamma))}},
                                     {"name": "dspark-async"}, {"name": "threshold", "params": {"threshold": 0.5}},
                                     {"name": "dspark-greedy", "params": {"bypass": {}}}])),
        workload={"arrivals": {"kind": "poisson", "rate_per_s": draw(st.sampled_from([2.0, 20.0]))},
                  "prompt_tokens": {"kind": "lognormal", "median": 120, "sigma": 0.8, "max": 700},
                  "output_tokens": {"kind": "lognormal", "median": 30, "sigma": 0.8, "max": 300}},
    )


@pytest.mark.slow("many random scenarios (hypothesis)")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_scenarios())
def test_conservation(scenario):
    result = simulate(scenario)
    req, steps = result.requests, result.steps
    gamma = scenario.drafter.block_size
    status = req["status"]
    assert set(status) <= {"completed", "queued", "prefill", "transfer", "running", "rejected"}
    s = result.summary
    assert s["requests_arrived"] == s["requests_completed"] + s["requests_running"] + s["requests_rejected"]
    rejected = req[status == "rejected"]
    assert (rejected["reject_reason"] != "").all()
    assert (req.loc[status != "rejected", "reject_reason"] == "").all()
    assert sum(s[f"requests_rejected_{reason}"] for reason in REJECT_REASONS) == s["requests_rejected"]
    done = req[status == "completed"]
    assert (done["generated_tokens"] == done["output_tokens"]).all()
    assert (done["finish_s"] >= done["first_token_s"]).all()
    assert (done["first_token_s"] >= done["arrival_s"]).all()
    answered = req[req["first_token_s"].notna()]   # TTFT's parts add up, in every prefill mode
    np.testing.assert_allclose(answered[list(TTFT_PARTS)].sum(axis=1), answered["ttft_s"], rtol=0, atol=1e-9)
    assert (answered[list(TTFT_PARTS)] >= -1e-12).all().all()
    assert (req["accepted_tokens"] <= req["verified_tokens"]).all()
    assert (req["verified_tokens"] <= req["steps"] * gamma).all()
    drafts = steps["verify_tokens"] - steps["prefill_tokens"] - steps["decode_requests"]
    assert (steps["accepted_tokens"] <= drafts).all()
    assert (drafts <= steps["decode_requests"] * gamma).all()
    assert int(req["steps"].sum()) == int(steps["decode_requests"].sum())
    assert int(req["verified_tokens"].sum()) == int(drafts.sum())
    assert int(req["accepted_tokens"].sum()) == int(steps["accepted_tokens"].sum())
    limit = scenario.engine.max_step_tokens
    assert (steps["verify_tokens"] <= limit).all()
    assert (steps["batch_requests"] <= scenario.engine.max_batch_requests).all()
    if scenario.horizon.requests is not None:
        assert s["requests_running"] == 0
        assert s["requests_arrived"] == scenario.horizon.requests
    if scenario.horizon.requests is not None:  # drained: every token is in the log
        total = int(steps["emitted_tokens"].sum())
        if scenario.engine.prefill.stage_first_token:  # the prefill stage emitted the first token, not a step
            total += int(req["first_token_s"].notna().sum())
        assert total == int(req["generated_tokens"].sum())
    assert np.isfinite(s["throughput_tokens_per_s"])
