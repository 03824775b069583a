"""Behavioural stories of the replica engine, each small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.engine.simulation import simulate
from tests.conftest import make_scenario

CERTAIN = {"family": "mtp", "block_size": 2,
           "acceptance": {"per_position": {"chat": [1.0, 1.0]}, "domains": {"chat": 1.0}},
           "latency": {"kind": "fixed", "ms": 1.0}}


def one_user(**changes):
    base = dict(
        horizon={"requests": 1, "warmup_s": 0},
        hardware={"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 1.0}},
        engine={"max_batch_requests": 4, "kv_capacity_tokens": 100_000,
                "prefill": {"mode": "disaggregated", "tokens_per_s": 1000}, "scheduling_overhead_ms": 0.5},
        drafter=CERTAIN,
        policy={"name": "static", "params": {"length": 2}},
        workload={"arrivals": {"kind": "closed_loop", "users": 1, "think_s": 0},
                  "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 7}},
    )
    base.update(changes)
    return simulate(make_scenario(**base))


def test_step_time_is_drafting_plus_verify_plus_overhead():
    result = one_user()
    req = result.requests.iloc[0]
    assert req["first_token_s"] == pytest.approx(0.1)  # 100 prompt tokens at 1000 tokens/s
    # 6 more tokens, 3 per step (2 accepted drafts + bonus): 2 steps of 1 + (10 + 3·1) + 0.5 ms.
    assert req["finish_s"] == pytest.approx(0.1 + 2 * 0.0145)
    assert list(result.steps["emitted_tokens"]) == [3, 3]
    assert req["steps"] == 2 and req["accepted_tokens"] == 4 and req["verified_tokens"] == 4


def test_last_step_emits_only_what_is_left():
    result = one_user(workload={"arrivals": {"kind": "closed_loop", "users": 1, "think_s": 0},
                                "prompt_tokens": {"kind": "fixed", "value": 100},
                                "output_tokens": {"kind": "fixed", "value": 6}})
    assert list(result.steps["emitted_tokens"]) == [3, 2]
    assert result.requests.iloc[0]["generated_tokens"] == 6


def test_disaggregated_prefill_queues_fifo():
    result = one_user(horizon={"requests": 2, "warmup_s": 0},
                      workload={"arrivals": {"kind": "closed_loop", "users": 2, "think_s": 0},
                                "prompt_tokens": {"kind": "fixed", "value": 100},
                                "output_tokens": {"kind": "fixed", "value": 4}})
    ttft = sorted(result.requests["ttft_s"])
    assert ttft == pytest.approx([0.1, 0.2])


def test_chunked_prefill_shares_the_step_budget():
    result = one_user(engine={"max_batch_requests": 4, "kv_capacity_tokens": 100_000,
                              "prefill": {"mode": "chunked", "chunk_tokens": 40}})
    steps = result.steps
    assert list(steps["prefill_tokens"][:3]) == [40, 40, 20]
    assert list(steps["decode_requests"][:3]) == [0, 0, 0]
    req = result.requests.iloc[0]
    assert req["first_token_s"] == pytest.approx(steps["end_s"][2])
    # prompt chunks are priced by the profile like any other tokens: 10 + 40·1 ms, no drafting
    assert steps["verify_ms"][0] == pytest.approx(50.0)
    assert steps["draft_ms"][0] == 0.0
    assert req["generated_tokens"] == 7


def test_kv_capacity_bounds_the_batch():
    result = simulate(make_scenario(
        engine={"max_batch_requests": 16, "kv_capacity_tokens": 2 * (200 + 50 + 3) + 10},
        workload={"arrivals": {"kind": "closed_loop", "users": 6, "think_s": 0},
                  "prompt_tokens": {"kind": "fixed", "value": 200}, "output_tokens": {"kind": "fixed", "value": 50}},
    ))
    assert result.steps["batch_requests"].max() == 2
    assert result.summary["requests_rejected"] == 0


def test_request_too_large_for_kv_is_rejected_with_reason():
    result = simulate(make_scenario(engine={"max_batch_requests": 4, "kv_capacity_tokens": 100}))
    assert (result.requests["status"] == "rejected").all()
    assert result.requests["reject_reason"].str.startswith("kv_capacity").all()


@pytest.mark.parametrize("router", ["round_robin", "least_loaded", "random"])
def test_routers_spread_requests(router):
    result = simulate(make_scenario(cluster={"replicas": 3, "router": router},
                                    workload={"arrivals": {"kind": "poisson", "rate_per_s": 30}}))
    counts = np.bincount(result.requests["replica"], minlength=3)
    assert counts.min() > 0.2 * counts.sum()
    if router == "round_robin":
        assert counts.max() - counts.min() <= 1


def test_warmup_is_excluded_from_the_window():
    early = simulate(make_scenario(horizon={"duration_s": 20, "warmup_s": 0})).summary
    late = simulate(make_scenario(horizon={"duration_s": 20, "warmup_s": 10})).summary
    assert late["window_s"] == pytest.approx(10)
    assert late["tokens_generated"] < early["tokens_generated"]


def test_no_speculation_emits_one_token_per_step():
    result = one_user(drafter={"family": "none", "block_size": 0}, policy={"name": "none", "params": {}})
    assert (result.steps["emitted_tokens"] == 1).all()
    assert (result.steps["draft_ms"] == 0).all()
    assert result.summary["mean_accepted_per_step"] == 1.0


def test_attention_context_counts_the_rows_the_forward_runs():
    from simulator.engine.batch import attention_context

    kv = np.array([100, 40, 10, 0])             # two decoding rows, one taking a chunk, one waiting
    decode = np.array([True, True, False, False])
    take = np.array([0, 0, 16, 0])
    assert attention_context(kv, decode, take, padded=False) == 150
    assert attention_context(kv, decode, take, padded=True) == 2 * 100 + 1 * 10
    assert attention_context(kv[:2], None, None, padded=True) == 200
    assert attention_context(kv[:0], None, None, padded=True) == 0
