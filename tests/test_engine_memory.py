"""The engine's memory fraction turned into KV tokens through the profile's memory model, by each engine's rule.

Stories: a built-in's header re-sizes its pool at another fraction as the
package's own memory model does (vLLM's rule: the fraction less the profiled
peak); SGLang's --mem-fraction-static covers weights and KV only, so a scenario
silent on KV tokens runs with the fraction less the weights; the rules agree
with what the engines logged in public issues; a real launch line is never
refused (the V4-Pro DP8 cookbook line at 0.835; a fraction the model says
leaves nothing runs with a note); a stated KV figure past the engine's pool is
noted, refused only past what the GPUs could hold at all; summary.json says
where the KV came from.
"""

from __future__ import annotations

import pytest

from specplan.engines.caps import PROFILED_PEAK as VLLM_RULE
from specplan.engines.sglang_caps import WEIGHTS_AND_KV as SGLANG_RULE
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import MemoryModel, memory_model
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.memory import engine_kv_pool, memory_fraction
from specplan.simulator.scenario.spec import Engine

V4_PRO_B200 = ["hardware.profile=builtin:b200-deepseek-v4-pro-dp8ep8-sglang", "engine.name=sglang",
               "drafter.latency.path=builtin:b200-deepseek-v4-pro-dp8ep8-sglang-mtp",
               "engine.kv_capacity_tokens=null"]
BALANCED = "benchmarks/published/sglang-cookbook-v4-flash-b200-fp4-balanced/scenario.yaml"
DP4 = "builtin:b200-deepseek-v4-flash-dp4ep4-sglang-mtp"
SILENT = ["engine.kv_capacity_tokens=null"]


def test_the_header_re_sizes_the_pool_as_the_packages_memory_model_does():
    """At 0.8 of GPU memory the header's breakdown gives the tokens aiconfigurator-core's own estimate gives."""
    estimate_kv_cache = pytest.importorskip("aiconfigurator_core.sdk.memory",
                                            reason="the aic extra (make test installs it)").estimate_kv_cache
    model = memory_model(load_profile("builtin:b200-deepseek-v4-pro-tp8ep8-sglang"))
    assert model is not None and model.resizable and model.fraction == 0.9
    package = estimate_kv_cache("deepseek-ai/DeepSeek-V4-Pro", "b200_sxm", "sglang", "0.5.14", max_num_tokens=8192,
                                max_batch_size=2048, memory_fraction_kind="of_total", memory_fraction_value=0.8,
                                tp_size=8, moe_tp_size=1, moe_ep_size=8)["total_kv_size_tokens"]
    assert model.tokens_at(0.8) == pytest.approx(package, rel=2e-3)
    assert model.tokens_at(0.9) == model.tokens == 10_710_487


def test_a_pool_without_a_breakdown_stays_as_stated_and_one_the_weights_leave_none_of_is_none():
    assert MemoryModel(1_000, 0.9).tokens_at(0.5) == 1_000
    model = MemoryModel(1_000, 0.9, gpu_gib=80.0, not_kv_gib=62.0, weights_gib=50.0)
    assert model.tokens_at(0.7) is None                       # 56 GiB less 62 not KV: nothing, by vLLM's count
    assert model.tokens_at(0.7, SGLANG_RULE) == 1_000 * 6 // 10   # 56 - 50 = 6 GiB at 100 tokens per GiB
    assert model.tokens_at(0.6, SGLANG_RULE) is None
    assert model.most_tokens == 3_000                         # the whole 80 GiB less the 50 of weights


def test_sglangs_rule_gives_the_minimum_fraction_sglang_printed_for_v4_pro_on_h200():
    """SemiAnalysisAI/InferenceX #2128 (DeepSeek-V4-Pro FP8, 8 x H200, TP8): 'Load weight end. ... avail mem=12.25
    GB, mem usage=125.65 GB'; --mem-fraction-static 0.88 leaves no KV pool and SGLang names 0.9113 as the least
    fraction that does. f x (free before loading) - weights is zero there, and below zero at 0.88."""
    free_before, weights = 12.25 + 125.65, 125.65
    assert SGLANG_RULE.kv_gib(0.9113, free_before, weights, not_kv_gib=float("nan")) == pytest.approx(0.0, abs=0.02)
    assert SGLANG_RULE.kv_gib(0.88, free_before, weights, not_kv_gib=float("nan")) < 0
    # the old count (the fraction less everything that is not KV) would have refused 0.9113 as well
    assert VLLM_RULE.kv_gib(0.9113, free_before, weights, not_kv_gib=weights + 4.2) < 0


def test_vllms_rule_gives_the_kv_memory_vllm_logged():
    """vllm-project/vllm #13061 (DeepSeek-R1-Distill-Qwen-14B, 2 x RTX 4090, gpu_memory_utilization 0.98): weights
    13.9476 GB, non-torch 0.25 GiB, activation peak 0.19 GiB, 23.08 GiB requested per GPU: 'the rest of the memory
    reserved for KV Cache is 8.69GiB'."""
    requested, not_kv = 23.08, 13.9476 + 0.25 + 0.19
    assert VLLM_RULE.kv_gib(0.98, requested / 0.98, 13.9476, not_kv) == pytest.approx(8.69, abs=0.01)


def test_sglang_logged_the_kv_bytes_per_token_the_v3_built_in_counts():
    """sgl-project/sglang PR #11309 (DeepSeek-V3.2-Exp on 8 x B200, DP8 attention, fp8 MLA cache): 'KV Cache is
    allocated. #tokens: 1462784, KV size: 54.52 GB' at 0.8, the MLA part alone. V3.2 stores 656 bytes a layer
    (512 fp8 + 16 of scales + 128 of bf16 rope) where V3's fp8 cache stores 576; the V3 built-in's memory model
    counts 576 x 61 bytes a token, so the logged pool, re-counted at 576 a layer, is the built-in's tokens per
    GiB within 0.5%."""
    model = memory_model(load_profile("builtin:h200-deepseek-v3-tp8ep8-vllm"))
    assert model is not None and model.tokens_per_gib is not None
    logged_per_gib = 1_462_784 / 54.52                  # SGLang prints GiB as "GB"
    assert model.tokens_per_gib == pytest.approx(logged_per_gib * 656 / 576, rel=5e-3)


def test_a_silent_scenario_runs_with_the_pool_sglang_leaves_at_its_memory_fraction():
    scenario = load_scenario(BALANCED, SILENT)
    profile = load_profile(scenario.hardware.profile)
    model = memory_model(profile)
    assert model is not None and model.weights_gib is not None
    fraction = memory_fraction(scenario.engine, _serving(scenario, profile), profile, 1)
    assert fraction == pytest.approx(0.806, abs=1e-3)   # B200, DP4 attention, its chunk and graphs, DeepEP buffers
    per_gib = model.tokens / (0.9 * model.gpu_gib - model.not_kv_gib)
    expected = per_gib * (fraction * model.gpu_gib - model.weights_gib)   # the fraction less the weights alone
    assert scenario.engine.kv_capacity_tokens == pytest.approx(expected, abs=1)
    assert scenario.engine.kv_capacity_tokens > model.tokens   # more than the package's count at 0.9


def test_the_cookbooks_v4_pro_dp8_launch_line_loads_with_the_pool_sglang_gives_it():
    """Issue 45: --mem-fraction-static 0.835 on 8 B200s with DP8 attention was refused ('the weights (160.789 GiB)
    leave no KV pool'); 160.8 GiB was weights + activations + runtime, and SGLang's fraction holds weights and KV
    only: 0.835 x 180 - 119.86 = 30.44 GiB of KV per GPU."""
    scenario = load_scenario("scenarios/deepseek-v4-pro.yaml", [*V4_PRO_B200, "engine.memory_fraction=0.835"])
    model = memory_model(load_profile(scenario.hardware.profile))
    assert model is not None and model.tokens_per_gib is not None
    assert scenario.engine.kv_capacity_tokens == pytest.approx(model.tokens_per_gib * (0.835 * 180 - 119.86), abs=1)
    assert not scenario.notes


def test_a_fraction_the_model_says_leaves_nothing_runs_with_a_note_not_a_refusal(cli):
    over = [*V4_PRO_B200, "engine.memory_fraction=0.6"]    # 108 GiB, below the 119.9 GiB of weights
    scenario = load_scenario("scenarios/deepseek-v4-pro.yaml", over)
    model = memory_model(load_profile(scenario.hardware.profile))
    assert scenario.engine.kv_capacity_tokens == model.tokens
    assert len(scenario.notes) == 1 and "weights (119.9 GiB per GPU)" in scenario.notes[0]
    status, out, err = cli("check", "scenarios/deepseek-v4-pro.yaml", *[a for kv in (*over, "sweep=null") for a in ("--set", kv)])
    assert status == 0 and "ok" in out
    assert [line for line in err.splitlines() if line.startswith("specplan: note:") and "memory fraction 0.6" in line]


def test_engine_memory_fraction_moves_the_pool_and_vllms_default_keeps_the_stated_one():
    low = load_scenario(BALANCED, [*SILENT, "engine.memory_fraction=0.7"]).engine.kv_capacity_tokens
    high = load_scenario(BALANCED, [*SILENT, "engine.memory_fraction=0.95"]).engine.kv_capacity_tokens
    stated = memory_model(load_profile(load_scenario(BALANCED).hardware.profile)).tokens
    assert low < stated < high
    vllm = load_scenario("scenarios/deepseek-v4-flash.yaml", SILENT)
    assert vllm.engine.kv_capacity_tokens == memory_model(load_profile(vllm.hardware.profile)).tokens


def test_kv_tokens_past_the_engines_pool_are_noted_and_past_what_the_gpus_hold_refused_in_one_line(cli):
    pool = load_scenario(BALANCED, SILENT).engine.kv_capacity_tokens
    status, out, err = cli("check", BALANCED, "--set", f"engine.kv_capacity_tokens={pool + 1}")
    assert status == 0 and "ok" in out
    assert "specplan: note: engine.kv_capacity_tokens" in err and f"{pool:,}" in err
    most = memory_model(load_profile(load_scenario(BALANCED).hardware.profile)).most_tokens
    status, out, err = cli("check", BALANCED, "--set", f"engine.kv_capacity_tokens={most + 1}")
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert "engine.kv_capacity_tokens" in err and f"{most:,}" in err and "at all" in err


def test_the_summary_says_the_kv_came_from_the_memory_model_at_the_engines_fraction():
    scenario = load_scenario(BALANCED, [*SILENT, "horizon.duration_s=3", "horizon.warmup_s=1",
                                        "workload.arrivals.num_prompts=8", "workload.arrivals.max_concurrency=4",
                                        "workload.arrivals.warmup_requests=0"])
    summary = simulate(scenario).summary
    assert summary["kv_capacity_source"] == "profile memory model"
    assert summary["kv_capacity_tokens"] == scenario.engine.kv_capacity_tokens
    assert summary["engine_mem_fraction_static"] == pytest.approx(0.806, abs=1e-3)


def test_a_profile_without_a_memory_model_has_no_engine_pool():
    profile = load_profile("builtin:synthetic-h200-llama3-8b")
    assert memory_model(profile) is None
    assert engine_kv_pool(Engine(max_batch_requests=8), _serving_none(), profile, 0) is None


def _serving(scenario, profile):
    from specplan.hwprofiles.facts import serving_engine
    return serving_engine(scenario.engine.name, scenario.engine.version, profile)


def _serving_none():
    from specplan.engines import NO_ENGINE
    return NO_ENGINE


def test_a_run_prints_the_pool_and_the_fraction_it_ran_with(cli, tmp_path):
    status, out, _ = cli("run", BALANCED, "--out", tmp_path, *[a for kv in (*SILENT, "horizon.duration_s=2",
                         "horizon.warmup_s=0.5", "workload.arrivals.num_prompts=4",
                         "workload.arrivals.max_concurrency=2", "workload.arrivals.warmup_requests=0")
                                                            for a in ("--set", kv)])
    assert status == 0
    line = next(line for line in out.splitlines() if "KV pool" in line)
    assert "at the engine's memory fraction 0.806" in line and "tokens per replica" in line
