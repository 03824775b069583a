"""The engine's memory fraction turned into KV tokens through the profile's memory model.

Stories: a built-in's header re-sizes its pool at another fraction as the
package's own memory model does; a scenario silent on KV tokens runs with the
pool SGLang leaves at its mem_fraction_static (vLLM's 0.9 leaves the stated
pool); `engine.memory_fraction` moves it; a KV figure past what the GPUs hold
is refused; summary.json says where the KV came from.
"""

from __future__ import annotations

import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import MemoryModel, memory_model
from specplan.simulator.engine.simulation import simulate
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.memory import engine_kv_pool, memory_fraction
from specplan.simulator.scenario.spec import Engine

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


def test_a_pool_without_a_breakdown_stays_as_stated_and_weights_that_leave_none_are_refused():
    assert MemoryModel(1_000, 0.9).tokens_at(0.5) == 1_000
    with pytest.raises(Exception, match="leave no KV pool"):
        MemoryModel(1_000, 0.9, gpu_gib=80.0, not_kv_gib=60.0).tokens_at(0.7)


def test_a_silent_scenario_runs_with_the_pool_sglang_leaves_at_its_memory_fraction():
    scenario = load_scenario(BALANCED, SILENT)
    profile = load_profile(scenario.hardware.profile)
    model = memory_model(profile)
    assert model is not None
    fraction = memory_fraction(scenario.engine, _serving(scenario, profile), profile, 1)
    assert fraction == pytest.approx(0.806, abs=1e-3)   # B200, DP4 attention, its chunk and graphs, DeepEP buffers
    expected = model.tokens * (fraction * model.gpu_gib - model.not_kv_gib) / (0.9 * model.gpu_gib - model.not_kv_gib)
    assert scenario.engine.kv_capacity_tokens == pytest.approx(expected, abs=1)
    assert 0.8 * model.tokens < scenario.engine.kv_capacity_tokens < 0.9 * model.tokens


def test_engine_memory_fraction_moves_the_pool_and_vllms_default_keeps_the_stated_one():
    low = load_scenario(BALANCED, [*SILENT, "engine.memory_fraction=0.7"]).engine.kv_capacity_tokens
    high = load_scenario(BALANCED, [*SILENT, "engine.memory_fraction=0.95"]).engine.kv_capacity_tokens
    stated = memory_model(load_profile(load_scenario(BALANCED).hardware.profile)).tokens
    assert low < stated < high
    vllm = load_scenario("scenarios/deepseek-v4-flash.yaml", SILENT)
    assert vllm.engine.kv_capacity_tokens == memory_model(load_profile(vllm.hardware.profile)).tokens


def test_kv_tokens_past_what_the_gpus_hold_are_refused_in_one_line(cli):
    stated = memory_model(load_profile(load_scenario(BALANCED).hardware.profile)).tokens
    status, out, err = cli("check", BALANCED, "--set", f"engine.kv_capacity_tokens={stated + 1}")
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert "engine.kv_capacity_tokens" in err and f"{stated:,}" in err
    status, _, _ = cli("check", BALANCED, "--set", f"engine.kv_capacity_tokens={stated + 1}",
                       "--set", "engine.memory_fraction=0.95")
    assert status == 0


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
