"""How the engines run a step (graph, piecewise or eager; DeepEP's mode), what eager costs, and their own caps.

Stories, each on a hand-made step or deployment (specplan.engines.modes, eager, caps):
SGLang's min-reduce over DP ranks sends every rank eager when one prefills;
vLLM's capture list at k = 0, 3 and 7 and which steps run full, piecewise or
none; an eager step priced from its launch count; DeepEP's auto mode; each
engine's caps and the one that binds.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from specplan.engines import NO_ENGINE, ModeSetup, StepShape, engine_traits, step_mode
from specplan.engines.caps import CapFacts
from specplan.engines.eager import (
    PUBLIC_EAGER_COST,
    eager_step_ms,
    launch_bound_ms,
    mode_step_ms,
    normal_mode_moe_ms,
)
from specplan.engines.modes import StepMode
from specplan.engines.sglang import capture_sizes as sglang_capture_sizes
from specplan.engines.vllm_capture import capture_list, default_max_capture
from specplan.errors import SpecplanError

SGLANG = engine_traits("sglang", "0.5.15")
VLLM = engine_traits("vllm", "0.24")
V4_DP4 = ModeSetup(model="deepseek-v4", capture=tuple(sglang_capture_sizes(64, True)), all_to_all="deepep")


def dp4(decode: tuple[int, ...], prefill: tuple[int, ...] = (0, 0, 0, 0), q: int = 2) -> StepShape:
    return StepShape(decode, tuple(d * q for d in decode), prefill, query_tokens=q)


# --- SGLang: the ranks' votes are min-reduced -------------------------------------------------------------


def test_a_decode_step_replays_the_graph_of_its_busiest_rank():
    mode = step_mode(SGLANG, dp4((9, 16, 0, 3)), V4_DP4)
    assert (mode.mode, mode.reason, mode.padded, mode.all_to_all) == ("graph", "decode_graph", 16, "low_latency")
    assert step_mode(SGLANG, dp4((2, 2, 11, 2)), V4_DP4).padded == 12   # 11 pads to 12 (1..8, 10..32 by 2)


def test_one_rank_prefilling_sends_every_rank_eager_and_deepep_normal():
    mode = step_mode(SGLANG, dp4((16, 16, 0, 16), prefill=(0, 0, 4096, 0)), V4_DP4)
    assert (mode.mode, mode.reason, mode.padded, mode.all_to_all) == ("eager", "rank_prefilling", None, "normal")
    assert "min-reduced" in mode.explanation


def test_a_prefill_only_step_is_eager_and_says_why():
    only_prefill = StepShape((0, 0, 0, 0), (0, 0, 0, 0), (4096, 4096, 0, 0), query_tokens=2)
    assert step_mode(SGLANG, only_prefill, V4_DP4).reason == "v4_prefill_eager"
    tp = ModeSetup(model="deepseek-v4", capture=(1, 2, 4))
    assert step_mode(SGLANG, StepShape((0,), (0,), (2048,)), tp).reason == "prefill_eager"   # TP1, no all-to-all


def test_past_the_capture_list_forced_normal_or_no_graphs_a_decode_step_is_eager():
    assert step_mode(SGLANG, dp4((57, 1, 1, 1)), V4_DP4).reason == "above_capture"          # largest is 56
    normal = ModeSetup(model="deepseek-v4", capture=V4_DP4.capture, all_to_all="deepep", deepep_mode="normal")
    assert (step_mode(SGLANG, dp4((4, 4, 4, 4)), normal).reason,
            step_mode(SGLANG, dp4((4, 4, 4, 4)), normal).all_to_all) == ("deepep_normal", "normal")
    off = ModeSetup(model="deepseek-v4", capture=(), all_to_all="megamoe")
    assert step_mode(SGLANG, dp4((4, 4, 4, 4)), off) == StepMode("eager", "graphs_off", None, "megamoe")


# --- vLLM: capture sizes and full / piecewise / none ---------------------------------------------------


def test_vllm_capture_sizes_at_k_0_3_and_7():
    assert [default_max_capture(32, k) for k in (0, 3, 7)] == [64, 256, 512]   # min(32 x (1 + k) x 2, 512)
    assert capture_list(32, 0, 8192) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    k3 = capture_list(32, 3, 8192)
    assert (k3[:4], k3[-1], all(s % 4 == 0 for s in k3), 12 in k3) == ([4, 8, 16, 24], 256, True, False)
    k7 = capture_list(32, 7, 8192)
    assert (k7[:2], k7[-2:], all(s % 8 == 0 for s in k7), 264 in k7) == ([8, 16], [496, 512], True, False)
    assert {max(capture_list(1024, k, 8192)) for k in (0, 3, 7)} == {512}          # the default max_num_seqs
    assert max(capture_list(1024, 7, 256)) == 256                                   # the token budget bounds it


def test_200_requests_of_8_tokens_run_eager_and_200_of_1_replay_a_full_graph():
    dspark = ModeSetup(model="dense", capture=tuple(capture_list(1024, 7, 8192)), max_requests=1024)
    wide = step_mode(VLLM, StepShape((200,), (1600,), (0,), query_tokens=8), dspark)
    assert (wide.mode, wide.reason) == ("eager", "above_capture")
    plain = ModeSetup(model="dense", capture=tuple(capture_list(1024, 0, 8192)), max_requests=1024)
    narrow = step_mode(VLLM, StepShape((200,), (200,), (0,)), plain)
    assert (narrow.mode, narrow.reason, narrow.padded) == ("graph", "decode_graph", 200)


def test_a_mixed_or_ragged_step_is_piecewise_and_v4_without_breakable_graphs_is_eager():
    plain = ModeSetup(model="dense", capture=tuple(capture_list(1024, 0, 8192)))
    mixed = step_mode(VLLM, StepShape((200,), (200,), (100,)), plain)
    assert (mixed.mode, mixed.reason, mixed.padded) == ("piecewise", "mixed_piecewise", 304)
    ragged = ModeSetup(model="deepseek-v4", capture=tuple(capture_list(1024, 7, 8192)))
    assert step_mode(VLLM, StepShape((20,), (100,), (0,), query_tokens=8), ragged).reason == "ragged_piecewise"
    no_breakable = ModeSetup(model="deepseek-v4", capture=ragged.capture, breakable=False)
    assert step_mode(VLLM, StepShape((4,), (32,), (8,), query_tokens=8), no_breakable).reason == "no_piecewise"
    assert step_mode(VLLM, StepShape((4,), (32,), (0,), query_tokens=8), no_breakable).mode == "graph"


def test_vllm_dp_ranks_take_the_lowest_mode_padded_to_the_busiest():
    setup = ModeSetup(model="dense", capture=tuple(capture_list(1024, 0, 8192)))
    mode = step_mode(VLLM, StepShape((10, 20, 0), (10, 20, 0), (0, 30, 0)), setup)
    assert (mode.mode, mode.reason, mode.padded) == ("piecewise", "mixed_piecewise", 56)
    high_throughput = ModeSetup(model="dense", capture=setup.capture, all_to_all="deepep", deepep_mode="normal")
    assert step_mode(VLLM, StepShape((8, 8), (8, 8), (0, 0)), high_throughput).reason == "normal_piecewise"
    with pytest.raises(SpecplanError, match="no per-step DeepEP mode"):
        step_mode(VLLM, StepShape((8, 8), (8, 8), (0, 0)), ModeSetup("dense", setup.capture, "deepep"))


# --- DeepEP's mode -----------------------------------------------------------------------------------------


def test_deepep_auto_is_normal_when_a_rank_extends_and_low_latency_otherwise():
    rule = SGLANG.all_to_all
    assert rule is not None
    assert [rule.resolve("deepep", "auto", extending) for extending in (True, False)] == ["normal", "low_latency"]
    assert rule.resolve("deepep", "low_latency", True) == "low_latency"
    assert (rule.resolve("megamoe", "auto", True), rule.resolve("none", "auto", True)) == ("megamoe", "none")
    assert normal_mode_moe_ms(10.0, rule) == pytest.approx(10.0 * 348.0 / 264.0)


# --- an eager step priced from its launch count ----------------------------------------------------------


def test_an_eager_step_costs_the_larger_of_its_kernels_and_its_launches():
    launches = launch_bound_ms(PUBLIC_EAGER_COST, "deepseek-v4", 43)
    assert launches == pytest.approx(196 * 43 * 28.5 / 1000)                     # 240.2 ms: V4's eager op cost
    assert eager_step_ms(14.0, launches) == pytest.approx(launches)              # launch-bound decode
    assert eager_step_ms(285.0, launches) == 285.0                               # kernel-bound prefill chunk
    assert launch_bound_ms(PUBLIC_EAGER_COST, "dense", 32) == pytest.approx(10 * 32 * 4.7 / 1000)
    assert launch_bound_ms(PUBLIC_EAGER_COST, "deepseek-v4", 43, per_launch_us=3.0) == pytest.approx(25.284)
    count = PUBLIC_EAGER_COST.count("deepseek-v4")
    assert abs(count.high_per_layer * 43 - 12_508) < 43 and abs(count.per_layer * 43 - 8_412) < 43   # gLLM #264
    with pytest.raises(SpecplanError, match="no public kernel count for moe"):
        launch_bound_ms(PUBLIC_EAGER_COST, "moe", 48)


def test_each_mode_prices_the_step_its_own_way():
    rule, cost = SGLANG.all_to_all, PUBLIC_EAGER_COST
    assert rule is not None
    graph = StepMode("graph", "decode_graph", 16, "low_latency")
    piecewise = StepMode("piecewise", "mixed_piecewise", 304, "none")
    eager = StepMode("eager", "rank_prefilling", None, "normal")
    assert mode_step_ms(graph, 14.0, cost, rule, "deepseek-v4", 43) == 14.0
    assert mode_step_ms(piecewise, 1.0, cost, rule, "deepseek-v4", 43) == pytest.approx((8.7 * 43 + 44) * 28.5e-3)
    assert mode_step_ms(eager, 14.0, cost, rule, "deepseek-v4", 43) == pytest.approx((196 * 43 + 43) * 28.5e-3)


def test_an_eager_v4_step_is_priced_by_its_eager_op_cost_from_a_public_pair():
    """sglang PR #24047: V4-Flash TP8 at batch 1 decoded at ~240 ms a token eager and 97.5 ms with CUDA graphs.
    An eager step of 196 kernels a layer over 43 layers at 28.5 us a kernel lasts 240.2 ms where its kernels
    take 97.5 ms (the pair itself, by hand: 8,428 x 28.5 us), and a DeepEP normal-mode step adds one exposed
    op per MoE layer (43 x 28.5 us = 1.2 ms); a dense model keeps the launcher's 4.7 us."""
    rule, cost = SGLANG.all_to_all, PUBLIC_EAGER_COST
    assert rule is not None
    count = cost.count("deepseek-v4")
    assert count.eager_op_us == 28.5 and "#24047" in count.eager_op_source
    assert count.op_us(cost) == 28.5 and cost.count("dense").op_us(cost) == 4.7
    assert count.eager_op_us == pytest.approx(240 / (196 * 43) * 1000, abs=0.05)     # the pair, by hand
    eager = StepMode("eager", "rank_prefilling", None, "low_latency")
    assert mode_step_ms(eager, 97.5, cost, rule, "deepseek-v4", 43) == pytest.approx(240.198)
    normal = StepMode("eager", "rank_prefilling", None, "normal")
    assert mode_step_ms(normal, 97.5, cost, rule, "deepseek-v4", 43) == pytest.approx(240.198 + 1.2255)
    assert mode_step_ms(eager, 300.0, cost, rule, "deepseek-v4", 43) == 300.0       # kernel-bound: its kernels
    assert launch_bound_ms(cost, "dense", 32) == pytest.approx(1.504)


def test_a_v4_step_carrying_prompt_tokens_keeps_the_launchers_cost():
    """The 28.5 us figure is a decode pair's; sglang PR #25052 measured TTFT 66 ms for one 1,024-token prompt on
    4 x B200 DP4, where that figure would price the eager prefill step alone at 240 ms. A step carrying prompt
    tokens pays the launcher's 4.7 us a kernel: 8,428 x 4.7 us = 39.6 ms (and 43 x 4.7 us per normal-mode sync)."""
    cost = PUBLIC_EAGER_COST
    count = cost.count("deepseek-v4")
    assert count.op_us(cost, extending=True) == 4.7 and count.op_us(cost, extending=False) == 28.5
    assert launch_bound_ms(cost, "deepseek-v4", 43, extending=True) == pytest.approx(196 * 43 * 4.7e-3)
    assert launch_bound_ms(cost, "deepseek-v4", 43) == pytest.approx(240.198)


# --- the engine's own caps -------------------------------------------------------------------------------


def b200_dp4(**changes) -> CapFacts:
    facts = dict(gpu_memory_gib=180.0, tp=4, dp=4, model="deepseek-v4", query_tokens=2, all_to_all="deepep",
                 kv_pool_tokens=34_000_000, request_tokens=9216)
    return CapFacts(**{**facts, **changes})


def test_sglang_lists_its_caps_for_v4_flash_dp4_on_b200():
    report = SGLANG.caps.report(b200_dp4())
    assert [(c.name, c.requests_per_rank, c.kind) for c in report.caps] == [
        ("max_running_requests", 64, "admission"),        # 256 server-wide over 4 DP ranks
        ("kv_pool", 3689, "admission"),                   # 34,000,000 // 9,216
        ("swa_pool", 8843, "admission"),                  # (3,400,000 − 4,096) // (128 x 3)
        ("deepep_tokens_per_rank", 64, "admission"),      # 128 tokens // (1 + 1)
        ("cuda_graph_max_bs", 64, "graph")]               # 512, no graph past the rank's 64 slots
    assert report.tightest.name == "max_running_requests" and report.binding(64) is None
    assert report.binding(65).name == "max_running_requests"


def test_the_cap_that_binds_is_named():
    mtp3 = SGLANG.caps.report(b200_dp4(query_tokens=4))                    # MTP 3-1-4: 128 // 4 = 32 per rank
    assert mtp3.binding(64).name == "deepep_tokens_per_rank"
    assert SGLANG.caps.report(b200_dp4(query_tokens=4, overrides={"deepep_tokens_per_rank": 1024})).binding(64) is None
    small = b200_dp4(gpu_memory_gib=80.0, tp=1, dp=1, all_to_all="none", kv_pool_tokens=200_000, request_tokens=2048)
    swa = SGLANG.caps.report(small)                                        # (20,000 − 8,192) // 384 = 30
    assert (swa.named("swa_pool").requests_per_rank, swa.binding(40).name) == (30, "swa_pool")
    with pytest.raises(SpecplanError, match="unknown cuda_graph_bs"):
        SGLANG.caps.report(b200_dp4(overrides={"cuda_graph_bs": 8}))


def test_sglang_mem_fraction_static_by_its_rule():
    # 512 + 1.5 x 16384 + 4/8 x 1024 + 2 x 512 + 3 x 512 x 4 + 1.5 x 512 x 4 + 2048 (DeepEP) = 37,888 MB
    assert SGLANG.caps.mem_fraction_static(b200_dp4()) == pytest.approx(round((184_320 - 37_888) / 184_320, 3))
    h200 = CapFacts(gpu_memory_gib=141.0, tp=8, dp=1, model="dense")      # 512 + 12,288 + 1,024 + 1,024
    assert SGLANG.caps.mem_fraction_static(h200) == pytest.approx(round((144_384 - 14_848) / 144_384, 3))
    assert VLLM.caps.mem_fraction_static(h200) == 0.9


def test_vllm_lists_its_caps_and_the_graph_reach_in_requests():
    report = VLLM.caps.report(CapFacts(gpu_memory_gib=141.0, tp=8, dp=1, model="dense", query_tokens=8))
    assert [(c.name, c.value, c.requests_per_rank) for c in report.caps] == [
        ("max_num_seqs", 1024, 1024), ("max_num_batched_tokens", 8192, 1024), ("max_cudagraph_capture_size", 512, 64)]
    a100 = VLLM.caps.report(CapFacts(gpu_memory_gib=80.0, tp=1, dp=1, model="dense", a100=True))
    assert (a100.named("max_num_seqs").value, a100.named("max_num_batched_tokens").value) == (256, 2048)
    assert a100.binding(300).name == "max_num_seqs"


def test_each_engines_memory_fraction_covers_what_its_source_says():
    """SGLang's --mem-fraction-static covers weights and KV; vLLM's gpu_memory_utilization its whole profiled peak."""
    sglang, vllm = SGLANG.caps.memory_rule, VLLM.caps.memory_rule
    assert sglang.kv_gib(0.8, gpu_gib=100.0, weights_gib=40.0, not_kv_gib=55.0) == pytest.approx(40.0)
    assert vllm.kv_gib(0.8, gpu_gib=100.0, weights_gib=40.0, not_kv_gib=55.0) == pytest.approx(25.0)
    assert vllm.kv_gib(0.5, gpu_gib=100.0, weights_gib=40.0, not_kv_gib=55.0) < 0


# --- rows and bad input -----------------------------------------------------------------------------------


def test_vllm_and_sglang_rows_carry_every_rule_and_the_others_none():
    for row in (*(engine_traits("sglang", v) for v in ("0.5.12.post1", "0.5.14", "0.5.15")), VLLM):
        assert row.execution and row.all_to_all and row.eager and row.caps and row.execution.source
    for row in (engine_traits("trtllm"), NO_ENGINE):
        assert (row.execution, row.all_to_all, row.eager, row.caps) == (None, None, None, None)
    with pytest.raises(SpecplanError, match="has no execution-mode rule"):
        step_mode(engine_traits("trtllm"), StepShape((1,), (1,), (0,)), ModeSetup("dense", (1,)))


def test_a_malformed_step_or_setup_is_one_clear_error():
    with pytest.raises(SpecplanError, match="one decode, verify and prefill count per rank"):
        StepShape((1, 2), (1,), (0, 0))
    with pytest.raises(SpecplanError, match="verifies at least its anchor"):
        StepShape((4,), (3,), (0,))
    with pytest.raises(SpecplanError, match="no token on any rank"):
        StepShape((0, 0), (0, 0), (0, 0))
    with pytest.raises(SpecplanError, match="unknown model 'llama'"):
        ModeSetup(model="llama", capture=(1,))  # type: ignore[arg-type]


def test_a_scenarios_extend_figure_replaces_the_launchers_for_extend_steps_only():
    """EagerCost.extend_op_us (engine.cuda_graph.extend_op_us): a step carrying prompt tokens pays it a kernel, a
    decode step its family's figure (V4: 28.5 us) or the launcher's (dense: 4.7 us) as before."""
    cost = replace(PUBLIC_EAGER_COST, extend_op_us=9.1)
    v4, dense = cost.count("deepseek-v4"), cost.count("dense")
    assert (v4.op_us(cost, extending=True), v4.op_us(cost)) == (9.1, 28.5)
    assert (dense.op_us(cost, extending=True), dense.op_us(cost)) == (9.1, 4.7)
    assert launch_bound_ms(cost, "deepseek-v4", 43, extending=True) == pytest.approx(196 * 43 * 9.1e-3)
    assert launch_bound_ms(cost, "deepseek-v4", 43, "attention", extending=True) == pytest.approx((8.7 * 43 + 44) * 9.1e-3)
    assert launch_bound_ms(cost, "deepseek-v4", 43) == pytest.approx(240.198)
