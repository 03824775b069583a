"""Behavioural stories of the replica engine, each small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplan.engines import StepMode
from specplan.simulator.engine.batch import (
    COLUMNS,
    PREFILL_LEFT,
    RANK,
    REMAINING,
    RID,
    Batch,
    attention_context,
)
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.core.step import StepPlan, StepTiming
from specplan.simulator.engine.records.step_log import StepLog, StepRecord
from tests.conftest import make_scenario
from tests.drive import drive

CERTAIN = {"family": "mtp", "block_size": 2,
           "acceptance": {"per_position": {"chat": [1.0, 1.0]}, "domains": {"chat": 1.0}},
           "latency": {"kind": "fixed", "ms": 1.0}}


def one_user(**changes):
    base = dict(
        horizon={"requests": 1, "warmup_s": 0},
        hardware={"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 1.0}},
        # the stage streams the first token (first_token: prefill), so every decode step below is the rest's
        engine={"max_batch_requests": 4, "kv_capacity_tokens": 100_000, "scheduling_overhead_ms": 0.5,
                "prefill": {"mode": "disaggregated", "tokens_per_s": 1000, "first_token": "prefill"}},
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
    # 6 more tokens, 3 per step (2 accepted drafts + bonus): 2 steps of 1 + (10 + 3·1) ms; a static
    # length needs no per-step decision, so the 0.5 ms scheduling overhead is not paid.
    assert req["finish_s"] == pytest.approx(0.1 + 2 * 0.014)
    assert list(result.steps["emitted_tokens"]) == [3, 3]
    assert req["steps"] == 2 and req["accepted_tokens"] == 4 and req["verified_tokens"] == 4


def test_a_policy_that_decides_from_the_drafts_pays_the_scheduling_overhead():
    greedy = one_user(policy={"name": "dspark-greedy"}).requests.iloc[0]
    hidden = one_user(policy={"name": "dspark-async", "params": {"cold_length": 2}}).requests.iloc[0]
    # flat-out profile and certain drafts: both verify the whole block; greedy pays 0.5 ms per step
    assert greedy["finish_s"] == pytest.approx(0.1 + 2 * 0.0145)
    assert hidden["finish_s"] == pytest.approx(0.1 + 2 * 0.014)


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
    kv = np.array([100, 40, 10, 0])             # two decoding rows, one taking a chunk, one waiting
    decode = np.array([True, True, False, False])
    take = np.array([0, 0, 16, 0])
    assert attention_context(kv, decode, take, padded=False) == 150
    assert attention_context(kv, decode, take, padded=True) == 2 * 100 + 1 * 10
    assert attention_context(kv[:2], None, None, padded=True) == 200
    assert attention_context(kv[:0], None, None, padded=True) == 0
    # padded queries: a step whose longest block is 5 tokens, on a profile measured at 3 per request,
    # prices its decode phase's attention at 5/3 of the padded context (the prompt chunks unchanged)
    assert attention_context(kv, decode, take, padded=True, query_scale=5 / 3) == round(200 * 5 / 3) + 10


def test_padded_queries_price_the_longest_block_of_the_step(tmp_path):
    """With engine.attention_profiled_queries, the context a step is priced at follows 1 + ℓ_max."""
    csv = tmp_path / "ctx.csv"
    rows = [f"{b},{c},{5.0 + b / 10 + c / 1000:.3f}" for c in (0, 100000) for b in (1, 64)]
    csv.write_text("# device: test\n# model: test\n# source: test\n# statistic: test\ntokens,context_tokens,step_ms\n" + "\n".join(rows))
    engine = {"max_batch_requests": 4, "kv_capacity_tokens": 100_000, "attention": "padded",
              "prefill": {"mode": "disaggregated", "tokens_per_s": 1000}}
    plain = one_user(hardware={"profile": str(csv)}, engine=engine)
    scaled = one_user(hardware={"profile": str(csv)}, engine={**engine, "attention_profiled_queries": 2})
    ratio = scaled.steps["context_tokens"].sum() / plain.steps["context_tokens"].sum()
    assert ratio == pytest.approx((1 + 2) / 2, rel=0.01)   # static length 2: blocks of 3 against 2


# ---- the token budget: defer, never shorten -----------------------------------------------------
def static_at_high_load(length: int, budget: int) -> dict:
    return simulate(make_scenario(
        horizon={"duration_s": 10, "warmup_s": 1},
        engine={"max_batch_requests": 64, "kv_capacity_tokens": 10**7, "max_step_tokens": budget,
                "prefill": {"mode": "disaggregated", "tokens_per_s": 1e9}},
        drafter={"family": "mtp", "block_size": 5,
                 "acceptance": {"preset": "deepseek-v3", "per_position": None, "domains": {"chat": 1.0}}},
        policy={"name": "static", "params": {"length": length}},
        workload={"arrivals": {"kind": "closed_loop", "users": 64, "think_s": 0.0},
                  "output_tokens": {"kind": "fixed", "value": 400}})).summary


def test_static_mtp5_at_high_concurrency_is_deferred_not_shortened():
    summary = static_at_high_load(5, budget=192)  # 192 // (1 + 5) = 32 of 64 requests per step
    assert summary["mean_verify_tokens_per_request_step"] == 6.0
    assert summary["request_steps_deferred"] > 0
    assert summary["deferred_share"] == pytest.approx(0.5, abs=0.02)
    roomy = static_at_high_load(5, budget=512)
    assert roomy["request_steps_deferred"] == 0 and roomy["mean_verify_tokens_per_request_step"] == 6.0


def test_budget_fitting_policies_choose_within_the_budget_and_defer_nothing():
    steps = simulate(make_scenario(
        horizon={"duration_s": 5, "warmup_s": 0},
        engine={"max_batch_requests": 64, "kv_capacity_tokens": 10**7, "max_step_tokens": 100},
        drafter={"family": "dspark", "block_size": 7,
                 "acceptance": {"preset": "qwen3-8b", "per_position": None, "domains": {"chat": 1.0}}},
        policy={"name": "dspark-global"},
        workload={"arrivals": {"kind": "closed_loop", "users": 64, "think_s": 0.0}})).steps
    assert steps["verify_tokens"].max() <= 100 and steps["deferred_requests"].sum() == 0


def test_anchors_beyond_the_budget_wait_for_the_next_step():
    steps = simulate(make_scenario(
        horizon={"duration_s": 5, "warmup_s": 0},
        engine={"max_batch_requests": 64, "kv_capacity_tokens": 10**7, "max_step_tokens": 40},
        drafter={"family": "none", "block_size": 0}, policy={"name": "none", "params": {}},
        workload={"arrivals": {"kind": "closed_loop", "users": 64, "think_s": 0.0}})).steps
    full = steps[steps["batch_requests"] == 64]
    assert (full["decode_requests"] == 40).all() and (full["deferred_requests"] == 24).all()


# ---- the KV rule, the same for both prefill modes -----------------------------------------------
@pytest.mark.parametrize("prefill", [{"mode": "chunked", "chunk_tokens": 512},
                                     {"mode": "disaggregated", "tokens_per_s": 1e6}])
def test_long_prompts_reserve_their_whole_prompt_at_admission(prefill):
    """2,000-token prompts, 4,116 KV tokens: two requests fit (2 × (2,000 + 50 + 3) + 10), in both modes."""
    result = simulate(make_scenario(
        horizon={"duration_s": 10, "warmup_s": 0},
        engine={"max_batch_requests": 16, "kv_capacity_tokens": 4116, "prefill": prefill},
        workload={"arrivals": {"kind": "closed_loop", "users": 8, "think_s": 0},
                  "prompt_tokens": {"kind": "fixed", "value": 2000}, "output_tokens": {"kind": "fixed", "value": 50}}))
    assert result.steps["batch_requests"].max() == 2
    assert result.summary["preemptions"] == 0


@st.composite
def kv_cases(draw):
    prefill = draw(st.sampled_from([{"mode": "disaggregated", "tokens_per_s": 1e12},
                                    {"mode": "chunked", "chunk_tokens": draw(st.integers(4, 128))}]))
    gamma = draw(st.integers(1, 5))
    n = draw(st.integers(1, 25))
    prompts = np.array(draw(st.lists(st.integers(1, 300), min_size=n, max_size=n)))
    outputs = np.array(draw(st.lists(st.integers(1, 120), min_size=n, max_size=n)))
    need = int((prompts + outputs).max()) + gamma
    ranks = draw(st.sampled_from([1, 2]))
    capacity = draw(st.integers(need, need + 2000))  # of one rank under data-parallel attention
    scenario = make_scenario(
        seed=draw(st.integers(0, 1000)),
        engine={"max_batch_requests": draw(st.integers(1, 12)), "prefill": prefill,
                "kv_capacity_tokens": capacity * ranks,
                "max_step_tokens": draw(st.integers(2 * gamma + 2, 200)),
                "budget": draw(st.sampled_from(["defer", "truncate"])),
                "dp_attention": {"ranks": ranks, "kv_capacity_tokens": capacity} if ranks > 1 else None},
        drafter={"family": "dspark", "block_size": gamma,
                 "acceptance": {"preset": "qwen3-8b", "per_position": None, "domains": {"chat": 1.0}}},
        policy=draw(st.sampled_from([{"name": "static", "params": {"length": gamma}}, {"name": "dspark-greedy"},
                                     {"name": "threshold", "params": {"threshold": 0.5}}])))
    return scenario, prompts, outputs


@settings(max_examples=60, deadline=None)
@given(case=kv_cases())
def test_the_kv_rule_holds_after_every_step(case):
    """Σ footprints (prompt + generated + γ) ≤ capacity after every step (each rank's own, under DP attention)."""
    scenario, prompts, outputs = case
    capacity = scenario.engine.kv_capacity_tokens
    dp = scenario.engine.dp_attention

    def check(core):
        state, log = core.state, core.recorders.log
        ints = state.batch.ints
        rid = ints[RID]
        prompt, generated = log["prompt_tokens"][rid], log["output_tokens"][rid] - ints[REMAINING]
        kv = state.batch.kv_tokens()
        assert state.footprint == int((prompt + generated).sum()) + state.block_size * state.batch.n
        assert state.footprint <= capacity or state.batch.n == 1
        if dp is not None:
            held = np.bincount(ints[RANK], weights=state.footprints(), minlength=dp.ranks)
            assert ((held <= dp.kv_capacity_tokens) | (np.bincount(ints[RANK], minlength=dp.ranks) == 1)).all()
        np.testing.assert_array_equal(kv, prompt - ints[PREFILL_LEFT] + generated)
        assert (kv >= 0).all() and (ints[REMAINING] > 0).all() and (ints[PREFILL_LEFT] >= 0).all()

    driven = drive(scenario, prompts, outputs, on_step=check)
    log = driven.log
    assert (log["generated_tokens"][: log.size] == outputs).all()


def test_a_fixed_length_below_the_block_drafts_only_that_length():
    """MTP modules run one per draft: static length 2 of a 5-token block pays 2 passes, not 5."""
    layers = {"kind": "layers", "target_layers": 10, "drafter_layers": 1}
    drafter = {**CERTAIN, "block_size": 5, "acceptance": {"per_position": {"chat": [1.0] * 5}, "domains": {"chat": 1.0}},
               "latency": layers}
    steps = one_user(drafter=drafter, policy={"name": "static", "params": {"length": 2}}).steps
    # one request: a drafter pass is 1/10 of a 1-token step of the linear profile (10 + 1 ms)
    assert steps["draft_ms"].tolist() == pytest.approx([2 * 1.1] * len(steps))


def test_the_batch_keeps_arrival_order_whatever_order_requests_are_admitted_in():
    """A re-prefilled request can reach the queue behind younger ones: admitted blocks are put back in order."""
    batch = Batch(block_size=2, capacity=2)

    def block(*rids: int) -> tuple[np.ndarray, np.ndarray]:
        ints = np.zeros((len(COLUMNS), len(rids)), dtype=np.int64)
        ints[RID] = rids
        return ints, np.array([[r, -r] for r in rids], dtype=float)

    for rids in ((1, 5), (9, 7), (3,), (11,)):
        batch.append(*block(*rids))
    assert batch.rids.tolist() == [1, 3, 5, 7, 9, 11]
    assert batch.acceptance[:, 0].tolist() == [1, 3, 5, 7, 9, 11]  # acceptance rows follow their requests
    batch.keep(batch.rids % 3 != 0)
    assert batch.rids.tolist() == [1, 5, 7, 11] and batch.acceptance[:, 1].tolist() == [-1, -5, -7, -11]
    batch.drop(np.array([1]))  # one row: shifted out
    assert batch.rids.tolist() == [1, 7, 11] and batch.acceptance[:, 1].tolist() == [-1, -7, -11]
    batch.drop(np.array([0, 2]))
    assert batch.rids.tolist() == [7] and batch.ints.shape == (len(COLUMNS), 1)


def test_a_step_row_puts_each_count_under_its_name():
    """StepLog writes a step's row in one place, from the plan's and the timing's named fields: every
    StepRecord field must come out under its own name (a reordered field would swap two columns)."""
    plan = StepPlan(rows=None, decode_requests=4, lengths=0, accepted=np.zeros(4, dtype=np.int64), prefill_take=None,
                    prefill_tokens=5, drafting_requests=6, verify_tokens=7, context_tokens=12, deferred_requests=10,
                    quote=None, decision=None, truncated_drafts=11,
                    mode=StepMode("eager", "rank_prefilling", None, "normal"))
    log = StepLog()
    log.add(1.5, 2, 3, plan, 8, 9, StepTiming(draft_ms=13.0, verify_ms=14.0, overhead_ms=15.0))
    (row,) = log.frame().to_dict(orient="records")
    expected = {"end_s": 1.5, "replica": 2, "batch_requests": 3, "decode_requests": 4, "prefill_tokens": 5,
                "drafting_requests": 6, "verify_tokens": 7, "emitted_tokens": 8, "accepted_tokens": 9,
                "deferred_requests": 10, "truncated_drafts": 11, "context_tokens": 12, "draft_ms": 13.0,
                "verify_ms": 14.0, "overhead_ms": 15.0, "mode": "eager", "mode_reason": "rank_prefilling",
                "all_to_all": "normal"}
    assert row == expected and list(row) == list(StepRecord._fields)
