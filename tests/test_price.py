"""One step price: what a policy's Θ uses is what the engine charges, and both are the profile's.

A hypothesis property drives the real decode core over random batches,
profiles (linear, a sawtooth table, a table with a KV-context axis),
prefill modes and throughput-maximising policies. At every step it checks
that (1) the Θ the policy computed for the B it chose equals its expected
tokens divided by the step time the engine charges at that B, and (2)
that charge is drafting (the drafter's model) + the profile's own
`step_ms(B, context)` (at the B the engine's CUDA graphs pad it to) + host
time (the engine's share of a plain step when it drafts) + the overhead the
policy pays, each recomputed here from the scenario rather than from the
quote. Drafting is for the whole block, or for the fewer positions an
asynchronous policy knew it could verify (`draft_width`).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplan.hwprofiles import load_profile
from specplan.simulator.engine.assembly import assemble
from tests.conftest import make_scenario
from tests.drive import drive

PROFILES = {
    "linear": {"kind": "linear", "base_ms": 9.0, "per_token_ms": 0.04},
    "sawtooth": {"kind": "table", "tokens": [1, 16, 32, 48, 64, 65, 72, 96, 128, 129, 160, 256],
                 "step_ms": [8.0, 8.0, 8.1, 8.2, 8.3, 10.5, 10.5, 10.6, 10.8, 13.4, 13.5, 14.0]},
    "context": "builtin:h100-llama2-7b",
}
THETA_POLICIES = ("dspark-greedy", "dspark-global", "dspark-async", "goodput", "oracle")


@st.composite
def cases(draw):
    profile = draw(st.sampled_from(sorted(PROFILES)))
    prefill = draw(st.sampled_from([{"mode": "disaggregated", "tokens_per_s": 1e12},
                                    {"mode": "chunked", "chunk_tokens": draw(st.integers(8, 64))}]))
    scenario = make_scenario(
        seed=draw(st.integers(0, 10_000)),
        hardware={"profile": PROFILES[profile]},
        engine={"max_batch_requests": draw(st.integers(1, 24)), "kv_capacity_tokens": 10**7, "prefill": prefill,
                "max_step_tokens": draw(st.integers(40, 256)),
                "scheduling_overhead_ms": draw(st.sampled_from([0.0, 0.3])),
                "host_overhead_ms": draw(st.sampled_from([0.0, 0.5])),
                "host_overhead_per_request_ms": draw(st.sampled_from([0.0, 0.01])),
                "cuda_graph": draw(st.sampled_from([None, {"engine": "vllm", "eager_overhead_ms": 1.0},
                                                    {"engine": "sglang", "max_capture_size": 12}])),
                "host": {"engine": "none", "spec_step_fraction": draw(st.sampled_from([None, 0.05]))}},
        drafter={"family": "dspark", "block_size": draw(st.integers(1, 7)),
                 "acceptance": {"preset": "qwen3-8b", "per_position": None, "domains": {"chat": 1.0},
                                "request_sigma": 0.7, "token_sigma": 2.0},
                 "confidence": {"kind": "model", "calibration": "sts", "calibration_samples": 500},
                 "latency": {"kind": "layers", "target_layers": 32, "drafter_layers": 2}},
        policy={"name": draw(st.sampled_from(THETA_POLICIES))})
    n = draw(st.integers(1, 30))
    prompts = np.array(draw(st.lists(st.integers(1, 400), min_size=n, max_size=n)))
    outputs = np.array(draw(st.lists(st.integers(1, 60), min_size=n, max_size=n)))
    return scenario, prompts, outputs


def independent_step_ms(parts, core, plan, profile) -> float:
    """The step's price from the profile and the scenario, without the quote."""
    cfg, batch = core.config, core.state.batch
    kv = batch.kv_tokens()
    context = 0
    if profile.context_tokens is not None:
        running = np.zeros(batch.n, dtype=bool)
        running[plan.rows.index] = True
        if plan.prefill_take is not None:
            running |= plan.prefill_take > 0
        context = int(kv[running].sum())
    padded, eager = padded_step(cfg, plan.verify_tokens, plan.decode_requests)
    at = context if profile.context_tokens is not None else None
    verify = float(profile.step_ms(max(padded, 1), at)) + eager
    widest, positions = plan.draft_width or (cfg.block_size, None)  # the block, or what async drafted
    draft = parts.drafter.draft_ms(plan.drafting_requests,
                                  context * plan.drafting_requests / max(plan.decode_requests, 1), widest, positions)
    host = cfg.engine.host_overhead_ms + cfg.engine.host_overhead_per_request_ms * batch.n
    if plan.drafting_requests and cfg.spec_step_fraction:  # the engine's host time: a share of the plain step
        plain, plain_eager = padded_step(cfg, plan.decode_requests, plan.decode_requests)
        host += cfg.spec_step_fraction * (float(profile.step_ms(max(plain, 1), at)) + plain_eager)
    overhead = cfg.engine.scheduling_overhead_ms if parts.policy().pays_scheduling() and plan.decode_requests else 0.0
    return draft + verify + host + overhead


def padded_step(cfg, tokens: int, requests: int) -> tuple[int, float]:
    """The B a step of `tokens` over `requests` is priced at under the engine's CUDA graphs, and its eager cost."""
    graphs = cfg.graphs
    if graphs is None:
        return tokens, 0.0
    if cfg.graph_axis == "tokens":
        return (tokens, graphs.eager_overhead_ms) if tokens > graphs.largest else (graphs.pad(tokens), 0.0)
    if requests > graphs.largest:
        return tokens, graphs.eager_overhead_ms
    padded = graphs.pad(requests) if requests else 0
    return (tokens if requests == 0 else -(-tokens * padded // requests)), 0.0


@pytest.mark.slow("many random scenarios (hypothesis)")
@settings(max_examples=40, deadline=None)
@given(case=cases())
def test_the_theta_a_policy_maximised_is_tokens_over_the_charged_step(case):
    scenario, prompts, outputs = case
    profile = load_profile(scenario.hardware.profile)
    parts = assemble(scenario)
    checked, decided = [], []

    def check(core, plan):
        decided.append(plan.drafting_requests > 0)
        assert plan.verify_tokens <= core.config.max_step_tokens
        assert plan.step_ms == pytest.approx(independent_step_ms(parts, core, plan, profile), rel=1e-9)
        theta_choice = plan.theta_choice  # what the policy's Decision said it optimised
        if theta_choice is not None and plan.decode_requests:
            charged_ms = plan.quote.step_ms(theta_choice.verify_tokens)
            assert theta_choice.theta == pytest.approx(theta_choice.expected_tokens * 1000.0 / charged_ms, rel=1e-9)
            checked.append(theta_choice)

    driven = drive(scenario, prompts, outputs, on_plan=check)
    assert int(driven.log["generated_tokens"][: driven.log.size].sum()) == int(outputs.sum())
    if sum(decided) > 2:  # async plans from its third step on; the others at every drafting step
        assert checked


def test_a_decode_step_past_the_capture_list_pays_the_eager_surcharge_with_a_prompt_chunk_in_it():
    """Request-axis graphs (SGLang's list to 12) and chunks mixed into decode steps: a step of more than 12
    decoding requests runs eager and pays the surcharge whether or not it also computes a prompt chunk."""
    scenario = make_scenario(
        hardware={"profile": PROFILES["linear"]},
        engine={"max_batch_requests": 24, "kv_capacity_tokens": 10**7, "max_step_tokens": 256,
                "prefill": {"mode": "chunked", "chunk_tokens": 16},
                "cuda_graph": {"engine": "sglang", "max_capture_size": 12}, "host": {"engine": "none"}},
        policy={"name": "static", "params": {"length": 3}})
    profile = load_profile(scenario.hardware.profile)
    parts = assemble(scenario)
    mixed_past = []

    def check(core, plan):
        assert plan.step_ms == pytest.approx(independent_step_ms(parts, core, plan, profile), rel=1e-9)
        chunk = plan.prefill_take is not None and bool((plan.prefill_take > 0).any())
        mixed_past.append(chunk and plan.decode_requests > 12)

    drive(scenario, np.full(20, 30), np.full(20, 300), on_plan=check)
    assert any(mixed_past)


def test_a_context_profiles_quote_is_the_profile_at_the_steps_context():
    profile = load_profile("builtin:h100-llama2-7b")
    scenario = make_scenario(hardware={"profile": "builtin:h100-llama2-7b"},
                             engine={"max_batch_requests": 8, "kv_capacity_tokens": 10**7, "max_step_tokens": 256})
    driven = drive(scenario, np.full(8, 3000), np.full(8, 20))
    steps = driven.steps.frame()
    assert steps["context_tokens"].iloc[0] > 24_000 and (steps["context_tokens"] > 0).all()
    expected = profile.step_ms(steps["verify_tokens"].to_numpy(), steps["context_tokens"].to_numpy())
    np.testing.assert_allclose(steps["verify_ms"], expected, rtol=1e-12)
