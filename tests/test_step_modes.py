"""Steps as the engines run them, in the simulator: each step's mode decided by its engine's rule and priced so.

Stories on hand-made profiles (a 4-layer DeepSeek-V4 model line, so an eager
step launches 196 x 4 kernels at V4's eager 28.5 us: 22.344 ms) and the built-ins: an
eager step priced from its launch count; SGLang's min-reduced graph votes in a
driven DP step where one rank prefills (every rank eager, steps.csv says so);
DeepEP's normal mode; vLLM's ragged lengths running piecewise; the summary's
mode shares; the engine's own caps (a cap that binds, named in the summary;
`max_batch_requests: auto`; the SWA pool; the all-to-all's tokens per rank);
SGLang capturing its slot count past its own list.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from specplan.engines.sglang import with_slots
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import device_facts, model_facts
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.price.pricer import StepPricer
from specplan.simulator.engine.step_modes import CaptureModes, EngineModes, Unmodelled
from tests.conftest import BASE, make_scenario, merged
from tests.drive import drive

LAUNCH_MS = 196 * 4 * 28.5 / 1000         # 22.344 ms: every kernel of a 4-layer V4 step run by the host
SYNC_MS = 4 * 28.5 / 1000                 # DeepEP normal: one host sync per layer
PROMPT_LAUNCH_MS = 196 * 4 * 4.7 / 1000   # 3.685 ms: a step carrying prompt tokens, at the launcher's 4.7 us
PROMPT_SYNC_MS = 4 * 4.7 / 1000
NORMAL = 348.0 / 264.0                    # DeepEP normal over low-latency MoE block (DeepGEMM PR #383)
NO_DRAFTS = {"policy": {"name": "none"}}


def v4_profile(tmp_path: Path, ranks: int = 1) -> str:
    """A 4-layer DeepSeek-V4 step: the MoE block 0.5 + 0.001·B, the rest 0.5 + 0.002·B (B split over `ranks`
    attention ranks, the file's layout); it names its model and GPUs as a built-in's header does."""
    tokens = [1, 512, 1024, 8192]
    shared = [0.5 + 0.001 * b for b in tokens]
    own = [0.5 + 0.002 * b for b in tokens]
    layout = f"TP1 EP{ranks} DP{ranks} ({ranks} GPUs)"
    lines = ["# format: specplan-profile/1", "# name: v4-hand", "# source: a hand-made test table",
             f"# device: NVIDIA B200 180GB x {ranks} ({layout})", f"# parallelism: {layout}",
             "# model: deepseek-ai/DeepSeek-V4-Flash (4 layers, hidden 4096, DeepSeek-V4 attention, MoE 256 experts "
             "top-6)", "# statistic: exact", "# extrapolation: none", "tokens,step_ms",
             *(f"{b},{s + o:.6f}" for b, s, o in zip(tokens, shared, own, strict=True)),
             "# table: parts", "tokens,dispatch_ms,routed_experts_ms,combine_ms,norms_ms",
             *(f"{b},0,{s:.6f},0,{o:.6f}" for b, s, o in zip(tokens, shared, own, strict=True))]
    path = tmp_path / f"v4-{ranks}.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def kernels_ms(tokens: float) -> float:
    return 1.0 + 0.003 * tokens


def moe_ms(tokens: float) -> float:
    return 0.5 + 0.001 * tokens


def sglang(profile: str, **engine) -> dict:
    return {"hardware": {"profile": profile},
            "engine": {"name": "sglang", "max_batch_requests": 8, **engine}, **NO_DRAFTS}


# --- the profile's facts -----------------------------------------------------------------------------------


def test_a_profile_header_names_the_models_family_and_layers_and_its_gpus(tmp_path):
    facts = model_facts(load_profile(v4_profile(tmp_path)))
    assert (facts.family, facts.layers) == ("deepseek-v4", 4)
    flash = load_profile("builtin:b200-deepseek-v4-flash-dp4ep4-sglang")
    assert (model_facts(flash).layers, model_facts(flash).family) == (43, "deepseek-v4")
    device = device_facts(flash)
    assert (device.gpu, device.memory_gib, device.tp, device.dp, device.ep) == ("B200", 180.0, 1, 4, 4)
    assert model_facts(load_profile("builtin:h200-deepseek-v3-tp8ep8-vllm")).family == "moe"
    assert model_facts(load_profile("builtin:h200-llama3.1-8b-vllm")).family == "dense"
    assert device_facts(load_profile("builtin:b300-deepseek-v4-flash-tp1-vllm")).memory_gib == pytest.approx(268.6,
                                                                                                           abs=0.1)
    assert model_facts(load_profile(make_scenario().hardware.profile)) is None


# --- an eager step priced from its launch count -------------------------------------------------------------


def test_an_eager_step_is_priced_from_its_launch_count(tmp_path):
    """8 requests decode on one GPU whose graphs stop at 4 requests: the first steps run eager, and a forward of
    1.024 ms of kernels lasts the host's 196 x 4 kernels of 28.5 us; once 3 requests are left, the graph of 4."""
    plans = []
    scenario = make_scenario(**sglang(v4_profile(tmp_path), cuda_graph={"engine": "sglang", "capture_sizes": [1, 2, 4]}))
    driven = drive(scenario, np.full(8, 100), np.array([3, 3, 3, 3, 3, 30, 30, 30]),
                   on_plan=lambda core, plan: plans.append(plan))
    steps = driven.steps.frame()
    first = steps.iloc[0]
    assert (first["decode_requests"], first["mode"], first["mode_reason"]) == (8, "eager", "above_capture")
    assert first["verify_ms"] == pytest.approx(LAUNCH_MS)                     # max(1.024 ms of kernels, 22.344)
    assert plans[0].quote.verify_ms(8) == pytest.approx(max(kernels_ms(8), LAUNCH_MS))
    small = steps[steps["decode_requests"] == 3].iloc[0]                     # 3 requests replay the graph of 4
    assert (small["mode"], small["mode_reason"]) == ("graph", "decode_graph")
    assert small["verify_ms"] == pytest.approx(kernels_ms(4))
    # a profile that names no model keeps the assumed surcharge past the list
    linear = make_scenario(engine={"max_batch_requests": 8, "cuda_graph": {"engine": "sglang", "capture_sizes": [4],
                                                                           "eager_overhead_ms": 2.0}}, **NO_DRAFTS)
    frame = drive(linear, np.full(8, 100), np.full(8, 3)).steps.frame()
    assert frame.iloc[0]["verify_ms"] == pytest.approx(10.0 + 0.05 * 8 + 2.0)
    assert isinstance(assemble(linear).config.model, type(None))


def test_which_rule_an_engine_runs_by_is_chosen_at_assembly(tmp_path):
    def rule(**changes):
        parts = assemble(make_scenario(**changes))
        return StepPricer(parts.profile, parts.drafter.draft_ms, parts.config, False).modes

    assert isinstance(rule(), Unmodelled)                                                         # no capture list
    assert isinstance(rule(engine={"cuda_graph": {"engine": "vllm"}}), CaptureModes)              # no engine's rule
    assert isinstance(rule(**sglang(v4_profile(tmp_path), cuda_graph={"engine": "sglang"})), EngineModes)


# --- SGLang: one rank prefilling sends every rank eager -----------------------------------------------------


def dp2_scenario(tmp_path: Path, **engine) -> dict:
    """SGLang, DP2 attention, separate prefill batches in chunks of 1,000 (500 per rank), graphs."""
    settings = {"max_batch_requests": 8, "kv_capacity_tokens": 1_000_000,
                "prefill": {"mode": "chunked", "chunk_tokens": 1000, "schedule": "separate"},
                "dp_attention": {"ranks": 2, "balance": "round_robin"}, "cuda_graph": {"engine": "sglang"}}
    return sglang(v4_profile(tmp_path, ranks=2), **{**settings, **engine})


def test_one_rank_prefilling_sends_every_rank_eager_in_a_driven_step(tmp_path):
    """Requests 0 and 1 (short prompts) go to ranks 0 and 1, request 2's 3,000-token prompt to rank 0: while rank 0
    computes it in chunks of 500, rank 1 decodes, and every rank runs the step eager (the ranks' graph votes
    are min-reduced), DeepEP in normal mode; once no rank prefills, the decode graph in low-latency mode."""
    plans = []
    scenario = make_scenario(**dp2_scenario(tmp_path, all_to_all={"backend": "deepep"}))
    driven = drive(scenario, np.array([100, 100, 3000]), np.array([40, 40, 40]),
                   on_plan=lambda core, plan: plans.append(plan))
    steps = driven.steps.frame()
    beside = steps[(steps["prefill_tokens"] > 0) & (steps["decode_requests"] > 0)]
    assert len(beside) >= 3
    assert set(zip(beside["mode"], beside["mode_reason"], beside["all_to_all"], strict=True)) == {
        ("eager", "rank_prefilling", "normal")}
    decode = steps[steps["prefill_tokens"] == 0]
    assert set(zip(decode["mode"], decode["mode_reason"], decode["all_to_all"], strict=True)) == {
        ("graph", "decode_graph", "low_latency")}
    alone = steps[(steps["prefill_tokens"] > 0) & (steps["decode_requests"] == 0)]
    assert set(alone["mode_reason"]) == {"v4_prefill_eager"}                 # both ranks prefill: V4 prefill eager
    # the price, by hand: a step where rank 0 prefills 500 tokens and rank 1 decodes 1 request is the MoE block
    # over its 501 tokens + the slower rank's own part (rank 0's 2 x 500 on the decode profile), which the
    # host's launches exceed; then one host sync per layer for DeepEP's normal dispatch
    plan = next(p for p in plans if p.prefill_tokens == 500 and p.decode_requests == 1)
    kernels = moe_ms(501) + (0.5 + 0.002 * 2 * 500)
    assert plan.mode.reason == "rank_prefilling"
    assert plan.quote.verify_ms(501) == pytest.approx(max(kernels, PROMPT_LAUNCH_MS) + PROMPT_SYNC_MS)


def test_a_prefill_containing_step_pays_its_mode_not_the_decode_graphs_padding(tmp_path):
    """The prefill path of a per-rank quote is priced explicitly in its mode: kernel-bound steps pay their kernels
    (no padding, no surcharge), launch-bound ones the host's launches."""
    parts = assemble(make_scenario(**dp2_scenario(tmp_path)))
    pricer = StepPricer(parts.profile, parts.drafter.draft_ms, parts.config, False)
    from specplan.simulator.engine.price.rank_load import StepLoad
    zero = np.zeros(2, dtype=np.int64)
    big = StepLoad(np.array([0, 3]), zero, zero.astype(float), np.array([4000, 0]), np.array([4000.0**2, 0.0]),
                   zero.astype(float))
    quote = pricer.quote(4, 3, 0, 0, 0, load=big, prefill_tokens=4000)
    assert quote.mode.reason == "rank_prefilling"
    kernels = moe_ms(4003) + 0.5 + 0.002 * 8000
    # 21.0 ms of kernels over the 3.7 ms a step carrying prompt tokens takes to launch (the launcher's 4.7 us a
    # kernel: engines/eager.py), so the step is kernel-bound (no padding to a decode graph either way)
    assert kernels > PROMPT_LAUNCH_MS and quote.verify_ms(4003) == pytest.approx(kernels)
    assert quote.verify_ms(3) >= PROMPT_LAUNCH_MS


def extend_quote(tmp_path: Path, **graph) -> object:
    """Rank 0 prefills 500 prompt tokens while rank 1 decodes 3 requests (DP2, no DeepEP): an eager extend step
    whose kernels (the MoE block over 503 tokens + rank 0's 2 x 500 on the decode profile: 3.503 ms) are under
    its launches at the launcher's 4.7 us a kernel (3.685 ms)."""
    parts = assemble(make_scenario(**dp2_scenario(tmp_path, cuda_graph={"engine": "sglang", **graph})))
    pricer = StepPricer(parts.profile, parts.drafter.draft_ms, parts.config, False)
    from specplan.simulator.engine.price.rank_load import StepLoad
    zero = np.zeros(2, dtype=np.int64)
    load = StepLoad(np.array([0, 3]), zero, zero.astype(float), np.array([500, 0]), np.array([500.0**2, 0.0]),
                    zero.astype(float))
    return pricer.quote(4, 3, 0, 0, 0, load=load, prefill_tokens=500)


def test_the_extend_op_key_prices_an_extend_step_at_its_figure_where_launches_bind(tmp_path):
    """engine.cuda_graph.extend_op_us = t: a launch-bound step carrying prompt tokens lasts k x L x t (196 kernels a
    layer, 4 layers); unset, the launcher's 4.7 us (today's rule)."""
    kernels = moe_ms(503) + 0.5 + 0.002 * 1000
    today = extend_quote(tmp_path)
    assert today.mode.reason == "rank_prefilling" and kernels < PROMPT_LAUNCH_MS
    assert today.verify_ms(503) == pytest.approx(PROMPT_LAUNCH_MS)
    for t in (9.1, 28.5):
        quote = extend_quote(tmp_path, extend_op_us=t)
        assert quote.mode == today.mode and quote.verify_ms(503) == pytest.approx(196 * 4 * t / 1000)
    low = extend_quote(tmp_path, extend_op_us=1.0)                      # 0.784 ms of launches: kernel-bound
    assert low.verify_ms(503) == pytest.approx(kernels)


def test_the_extend_op_key_leaves_a_decode_step_at_its_familys_figure(tmp_path):
    """An eager decode step (8 requests past a capture list of 4) keeps V4's 28.5 us a kernel whatever the key."""
    def eager_decode(**graph) -> float:
        scenario = make_scenario(**sglang(v4_profile(tmp_path), cuda_graph={"engine": "sglang", "capture_sizes": [1, 2, 4],
                                                                             **graph}))
        parts = assemble(scenario)
        quote = StepPricer(parts.profile, parts.drafter.draft_ms, parts.config, False).quote(8, 8, 0, 0, 0)
        assert (quote.mode.mode, quote.mode.reason) == ("eager", "above_capture")
        return quote.verify_ms(8)

    assert eager_decode() == pytest.approx(LAUNCH_MS)
    assert eager_decode(extend_op_us=9.1) == eager_decode(extend_op_us=1.0) == pytest.approx(LAUNCH_MS)


@pytest.mark.parametrize("profile", ["none", "builtin:h200-deepseek-v3-tp8ep8-vllm"])
def test_an_extend_op_cost_nothing_prices_by_launches_is_refused_in_one_line(tmp_path, cli, profile):
    """A profile naming no model (no mode rule reads it) or an MoE family without a public kernel count: the key
    would move nothing, so `check` refuses it (exit 2, one line)."""
    engine = {"name": "sglang", "cuda_graph": {"engine": "sglang", "extend_op_us": 9.1}}
    raw = {"engine": engine} if profile == "none" else {"hardware": {"profile": profile}, "engine": engine}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(merged(BASE, raw)))
    status, out, err = cli("check", path)
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert "engine.cuda_graph.extend_op_us" in err and "launches" in err


# --- DeepEP's normal mode -----------------------------------------------------------------------------------


def test_deepep_normal_runs_decode_eager_and_pays_its_moe_at_normal_mode_cost(tmp_path):
    scenario = make_scenario(**sglang(v4_profile(tmp_path), cuda_graph={"engine": "sglang"},
                                      all_to_all={"backend": "deepep", "mode": "normal"}))
    parts = assemble(scenario)
    pricer = StepPricer(parts.profile, parts.drafter.draft_ms, parts.config, False)
    quote = pricer.quote(8, 8, 0, 0, 0)
    assert (quote.mode.mode, quote.mode.reason, quote.mode.all_to_all) == ("eager", "deepep_normal", "normal")
    # 8 tokens: kernels 1.024 ms with the MoE block (0.508 ms) x 348/264, under the launches; one sync per layer
    assert quote.verify_ms(8) == pytest.approx(max(kernels_ms(8) + (NORMAL - 1) * moe_ms(8), LAUNCH_MS) + SYNC_MS)
    # 4,000 tokens: the normal-mode MoE counts in the kernels, still under V4's eager dispatch (22.3 ms)
    kernels = kernels_ms(4000) + (NORMAL - 1) * moe_ms(4000)
    assert kernels < LAUNCH_MS and quote.verify_ms(4000) == pytest.approx(LAUNCH_MS + SYNC_MS)


# --- vLLM: ragged per-request lengths run piecewise ----------------------------------------------------------


def vllm(tmp_path: Path, policy: dict) -> dict:
    return {"hardware": {"profile": v4_profile(tmp_path)},
            "engine": {"name": "vllm", "max_batch_requests": 8, "cuda_graph": {"engine": "vllm"}},
            "policy": policy, "horizon": {"duration_s": 3, "warmup_s": 0.5},
            "workload": {"arrivals": {"kind": "closed_loop", "users": 8, "think_s": 0}}}


def test_vllm_runs_a_policys_ragged_lengths_piecewise_and_fixed_lengths_as_a_full_graph(tmp_path):
    ragged = simulate(make_scenario(**vllm(tmp_path, {"name": "dspark-async"}))).steps
    fixed = simulate(make_scenario(**vllm(tmp_path, {"name": "static", "params": {"length": 3}}))).steps
    assert set(ragged["mode_reason"]) == {"ragged_piecewise"}
    assert set(fixed["mode_reason"]) == {"decode_graph"}
    # piecewise: at least attention's 8.7 kernels per layer and the 5 graph pieces launched (0.19 ms), here under
    # the kernels; past vLLM's largest size (min(8 x 4 x 2, 512) = 64 tokens) a step would run eager
    parts = assemble(make_scenario(**vllm(tmp_path, {"name": "dspark-async"})))
    pricer = StepPricer(parts.profile, parts.drafter.draft_ms, parts.config, False, modes=None)
    quote = pricer.quote(8, 8, 8, 0, 3)
    assert pricer.graphs.largest == 64
    assert (quote.mode_at(64).mode, quote.mode_at(65).reason) == ("graph", "above_capture")
    assert quote.verify_ms(65) == pytest.approx(LAUNCH_MS)
    assert quote.verify_ms(30) == pytest.approx(kernels_ms(32))             # a full graph of 32 tokens


# --- the summary's mode shares ------------------------------------------------------------------------------


def test_the_summary_gives_the_share_of_steps_and_of_time_per_mode_and_reason(tmp_path):
    scenario = make_scenario(**{**dp2_scenario(tmp_path), "horizon": {"duration_s": 4, "warmup_s": 0.5},
                                "workload": {"arrivals": {"kind": "closed_loop", "users": 8, "think_s": 0},
                                             "prompt_tokens": {"kind": "lognormal", "median": 1500, "sigma": 0.5,
                                                               "max": 4000},
                                             "output_tokens": {"kind": "lognormal", "median": 60, "sigma": 0.6,
                                                               "max": 300}}})
    result = simulate(scenario)
    summary, steps = result.summary, result.steps
    window = steps[steps["end_s"] > 0.5]
    step_ms = window["draft_ms"] + window["verify_ms"] + window["overhead_ms"]
    for reason in ("rank_prefilling", "decode_graph"):
        hit = window["mode_reason"] == reason
        assert summary[f"mode_reason_step_share.{reason}"] == pytest.approx(hit.mean())
        assert summary[f"mode_reason_time_share.{reason}"] == pytest.approx(step_ms[hit].sum() / step_ms.sum())
    assert summary["mode_reason_step_share.rank_prefilling"] > 0.05
    assert sum(summary[f"mode_step_share.{m}"] for m in ("graph", "piecewise", "eager", "unmodelled")) == \
        pytest.approx(1.0)
    assert summary["mode_step_share.eager"] == pytest.approx((window["mode"] == "eager").mean())
    plain = simulate(make_scenario(horizon={"duration_s": 2, "warmup_s": 0.5})).summary
    assert plain["mode_step_share.unmodelled"] == 1.0 and "all_to_all_step_share.normal" not in plain


# --- the engine's own caps ----------------------------------------------------------------------------------


def test_a_cap_that_binds_is_named_in_the_run_summary(tmp_path):
    """SGLang, DeepSeek-V4, DP2: 8 requests server-wide are 4 slots per rank; 16 users keep 8 requests per rank
    outstanding, so max_running_requests binds; with 4 users nothing does."""
    def run(users: int) -> dict:
        raw = {**dp2_scenario(tmp_path), "horizon": {"duration_s": 3, "warmup_s": 0.5},
               "workload": {"arrivals": {"kind": "closed_loop", "users": users, "think_s": 0},
                            "prompt_tokens": {"kind": "fixed", "value": 200},
                            "output_tokens": {"kind": "fixed", "value": 40}}}
        return simulate(make_scenario(**raw)).summary

    busy, light = run(16), run(4)
    assert (busy["engine_cap_binding"], busy["engine_cap_tightest"]) == ("max_running_requests",
                                                                         "max_running_requests")
    assert busy["engine_cap_tightest_requests_per_rank"] == 4 and busy["engine_cap_demand_per_rank"] > 6
    assert light["engine_cap_binding"] == "none" and light["engine_cap_demand_per_rank"] < 4
    assert 0 < busy["engine_mem_fraction_static"] < 1


def test_max_batch_requests_auto_takes_the_engines_own_default():
    def slots(path: str, *overrides: str) -> int:
        from specplan.simulator.scenario import load_scenario
        return load_scenario(path, ["engine.max_batch_requests=auto", *overrides]).engine.max_batch_requests

    balanced = "benchmarks/published/sglang-cookbook-v4-flash-b200-fp4-balanced/scenario.yaml"
    assert slots(balanced) == 256                                   # SGLang's DeepSeek-V4 default, server-wide
    assert slots("benchmarks/published/vllm-49369-v4-flash-dspark-b300/scenario.yaml") == 1024   # max_num_seqs
    assert slots(balanced, "engine.name=vllm", "engine.version='0.24'") == 4 * 1024                # per DP rank
    with pytest.raises(ScenarioError, match="no serving engine is known"):
        make_scenario(engine={"max_batch_requests": "auto"})
    with pytest.raises(ScenarioError, match=r"TensorRT-LLM 1\.2 has no caps"):
        make_scenario(engine={"max_batch_requests": "auto", "name": "trtllm"})
    with pytest.raises(ScenarioError, match="expected a number"):
        make_scenario(engine={"max_batch_requests": "many"})


def test_the_swa_pool_and_the_all_to_alls_tokens_cap_a_rank(tmp_path):
    """SGLang, DeepSeek-V4, DP2, 20,000 KV tokens per rank: the SWA pool holds 10% of them, less a rank's prompt
    chunk (500), over 384 tokens per request (a 128-token window + 1 token, page-rounded, + a page): 3 requests a
    rank, fewer than its 4 slots; DeepEP's default 128 tokens per rank cap a rank's step unless the scenario says
    otherwise."""
    roomy = assemble(make_scenario(**dp2_scenario(tmp_path, kv_capacity_tokens=40_000,
                                                  swa_full_tokens_ratio=0.3))).config
    assert roomy.caps.named("swa_pool").requests_per_rank == (6000 - 500) // 384 == 14 and roomy.dp.requests == 4
    tight = assemble(make_scenario(**dp2_scenario(tmp_path, kv_capacity_tokens=40_000))).config
    assert tight.caps.named("swa_pool").requests_per_rank == (2000 - 500) // 384 == 3
    assert tight.dp.requests == 3
    deepep = assemble(make_scenario(**dp2_scenario(tmp_path, all_to_all={"backend": "deepep"}))).config
    assert deepep.dp.step_tokens == 128
    given = assemble(make_scenario(**dp2_scenario(tmp_path, all_to_all={"backend": "deepep", "tokens_per_rank": 64},
                                                  dp_attention={"ranks": 2, "max_step_tokens": 100}))).config
    assert given.dp.step_tokens == 64                                  # both given: the smaller binds
    kept = assemble(make_scenario(**dp2_scenario(tmp_path, dp_attention={"ranks": 2, "max_step_tokens": 1024}))).config
    assert kept.dp.step_tokens == 1024                                 # dp_attention.max_step_tokens as before


def test_a_malformed_all_to_all_block_is_one_clear_error(tmp_path):
    with pytest.raises(ScenarioError, match="a DeepEP mode needs backend deepep"):
        make_scenario(engine={"all_to_all": {"backend": "megamoe", "mode": "normal"}})
    with pytest.raises(ScenarioError, match="tokens_per_rank"):
        make_scenario(engine={"all_to_all": {"backend": "deepep", "tokens_per_rank": 0}})
    scenario = make_scenario(**{**vllm(tmp_path, {"name": "none"}), **NO_DRAFTS,
                                "engine": {"name": "vllm", "max_batch_requests": 8, "cuda_graph": {"engine": "vllm"},
                                           "all_to_all": {"backend": "deepep"}}})
    with pytest.raises(ScenarioError, match="picks one DeepEP mode per deployment"):
        assemble(scenario).core(*recorders())


def recorders():
    from specplan.simulator.engine.core.request_log import RequestLog
    from specplan.simulator.engine.records.step_log import StepLog
    return RequestLog(), StepLog()


# --- SGLang captures its slot count past its own list -------------------------------------------------------


def test_sglang_captures_the_slot_count_and_the_one_below_past_its_own_list():
    sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 161, 16)]
    assert with_slots(sizes, 64)[-4:] == [40, 56, 63, 64]       # the list runs past 64: 63 and 64 captured
    assert with_slots([1, 2, 4, 8], 64) == [1, 2, 4, 8]         # it does not: nothing added
    config = assemble(make_scenario(hardware={"profile": "builtin:b200-deepseek-v4-flash-dp4ep4-sglang",
                                              "gpus_per_replica": 4},
                                    engine={"max_batch_requests": 256, "kv_capacity_tokens": 4_000_000,
                                            "dp_attention": {"ranks": 4}, "cuda_graph": {"engine": "sglang"}},
                                    drafter={"family": "mtp", "block_size": 1},
                                    policy={"name": "mtp-1"})).config
    per_rank = (config.graphs.sizes // 4).tolist()
    assert per_rank[-3:] == [56, 63, 64] and config.graphs.largest == 256
    plain = make_scenario(engine={"cuda_graph": {"engine": "sglang"}})
    linear = EngineConfig.from_scenario(plain, load_profile(plain.hardware.profile), 3)
    assert linear.graphs.largest == 16                          # no GPU named: the engine's top is the slots


def test_a_plan_names_the_cap_that_binds_at_its_answer():
    """A capacity plan's JSON and table read the answer's runs: the cap most seeds say binds, the tightest cap
    and the demand per rank (plan_json.cap_record, plan.tables.cap_text)."""
    from specplan.simulator.study.plan.plan_json import cap_record
    from specplan.simulator.study.plan.probe import Probe
    from specplan.simulator.study.plan.tables import cap_text

    def run(binding: str, demand: float) -> dict:
        return {"engine_cap_binding": binding, "engine_cap_tightest": "swa_pool",
                "engine_cap_tightest_requests_per_rank": 30, "engine_cap_demand_per_rank": demand}

    probe = Probe(replicas=2, meets_sla=True, tps_user=50.0, tps_user_ci95=1.0, throughput_per_gpu=1000.0,
                  ttft_p99_s=1.0, backlog_growth=0.0, gpus=8,
                  runs=(run("swa_pool", 41.0), run("swa_pool", 40.0), run("none", 29.0)))
    record = cap_record(probe)
    assert record == {"binding": "swa_pool", "tightest": "swa_pool", "requests_per_rank": 30,
                      "demand_per_rank": pytest.approx(110 / 3)}
    assert cap_text(record) == "the engine's cap that binds: swa_pool (30 requests per rank; 36.7 outstanding per rank)"
    assert cap_record(Probe(replicas=1, meets_sla=True, tps_user=1.0, tps_user_ci95=0.0, throughput_per_gpu=1.0,
                            ttft_p99_s=1.0, backlog_growth=0.0, gpus=1, runs=({"policy": "none"},))) is None


def test_a_surcharge_an_eager_step_would_not_pay_is_refused_in_one_line(tmp_path, cli):
    """DeepSeek-V4 under SGLang prices an eager step by its launches: an assumed eager_overhead_ms would change
    nothing, so `check` and `run` refuse it; a profile that names no model keeps it (the test above)."""
    path = tmp_path / "v4.yaml"
    raw = sglang(v4_profile(tmp_path), cuda_graph={"engine": "sglang", "eager_overhead_ms": 14.0})
    path.write_text(yaml.safe_dump(merged(BASE, raw)))
    status, out, err = cli("check", path)
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert "engine.cuda_graph.eager_overhead_ms" in err and "launches" in err
