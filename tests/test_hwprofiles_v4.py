"""DeepSeek-V4 built-ins from AIConfigurator's tables: verify-shaped rules, drafters, provenance, limits.

The V4 attention modules (CSA with its indexer, HCA) get the MLA split with
the query tokens folded into heads, the indexer's extra query tokens from
its own table, and a linear head scale past the native count; drafters read
a sliding window. Figures written out below come from the models' configs
(hidden sizes, ranks, expert counts) and the GPUs' HBM bandwidths.
"""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.builtins import AIC_BUILTINS

needs_aic = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                               reason="aiconfigurator-core (the 'aic' extra) is not installed")
V4 = sorted(name for name in AIC_BUILTINS if "deepseek-v4" in name)
PRO, FLASH = "deepseek-ai/DeepSeek-V4-Pro", "deepseek-ai/DeepSeek-V4-Flash"


def pricer(model: str, system: str, q: int, tp: int = 8, dp: int = 1, drafter=None):
    from specplan.hwprofiles.aiconfigurator import (
        AicTarget,
        VerifyPricer,
        attention_window,
        compile_target,
        drafter_ops,
    )

    compiled = compile_target(AicTarget(model, system, tp=tp, ep=8, dp=dp), 512, q, 0.9)
    ops = list(compiled.ops) if drafter is None else drafter_ops(compiled, drafter)
    return compiled, VerifyPricer(compiled, ops, q, attention_window(ops) if drafter else 0)


@pytest.mark.slow("regenerates built-in profiles from AIConfigurator's kernel database")
@needs_aic
def test_the_issue_command_now_writes_a_v4_pro_profile(cli, tmp_path) -> None:
    status, _out, err = cli("profile", "--source", "aiconfigurator", "--model", PRO, "--system", "b300_sxm",
                           "--tp", "8", "--ep", "8", "--max-tokens", "64", "--total-context", "0,65536",
                           "--out", tmp_path / "p.csv")
    assert status == 0, err
    text = (tmp_path / "p.csv").read_text()
    assert "DeepSeek-V4 attention (HCA x 31 + CSA x 30 layers" in text
    assert "# part.routed_experts:" in text and "# part.shared_down:" in text and "# table: parts" in text


@pytest.mark.slow("runs AIConfigurator's compiled step estimator")
@needs_aic
def test_one_token_per_request_is_the_estimators_own_v4_decode() -> None:
    from specplan.hwprofiles.aiconfigurator import engine_handle

    compiled, one = pricer(FLASH, "b200_sxm", 1)
    assert one.indexer is None                    # one query token: the module's own indexer call
    handle = engine_handle(compiled, list(compiled.ops))
    everything = list(range(len(compiled.ops)))
    for b in (1, 16, 128):
        estimator = sum(e[1] for e in handle.evaluate_generation_ops(everything, batch_size=b, s=1025, x=None))
        assert one.plain_ms(b) + one.attention_ms(b, b * 1024) == pytest.approx(estimator, rel=1e-9)


@pytest.mark.slow("runs AIConfigurator's compiled step estimator")
@needs_aic
def test_a_v4_verify_reads_each_cache_once_and_adds_the_indexers_query_tokens() -> None:
    _, verify = pricer(FLASH, "b200_sxm", 4)      # 32 requests x 4 query tokens
    _, decodes = pricer(FLASH, "b200_sxm", 1)     # 128 one-token requests, each its own cache
    assert verify.csa_layers == 21 and verify.indexer is not None
    assert verify.attention_ms(128, 32 * 16384) < decodes.attention_ms(128, 128 * 16384)
    extra = verify.indexer.ms(32, 4, 16388) - verify.indexer.ms(32, 1, 16388)
    assert extra > 0 and verify.indexer_ms(128, 32 * 16384) == pytest.approx(21 * extra)
    # the indexer's table: 4 query rows per request cost more than 1, batch 1024 more than 1
    assert verify.indexer.ms(1024, 4, 0) > verify.indexer.ms(1024, 1, 0)


@needs_aic
def test_heads_past_the_native_count_scale_the_read_linearly() -> None:
    """TP1 (data-parallel attention): 128 local heads x 4 query tokens > 128 native heads."""
    _, dp = pricer(PRO, "b300_sxm", 4, tp=1, dp=8)
    assert dp.wide == [] and [scale for _, scale in dp.overflow] == [4.0, 4.0]
    _, tp = pricer(PRO, "b300_sxm", 4)
    assert tp.overflow == [] and len(tp.wide) == 2  # 16 heads x 4 = 64 <= 128: inside the table
    index, _ = dp.overflow[0]
    native = dp.ms([index], 8, 4100) - dp.ms([index], 8, 4)
    assert native > 0
    assert dp.read_ms(8, 4096) == pytest.approx(
        sum(4.0 * (dp.ms([i], 8, 4100) - dp.ms([i], 8, 4)) for i, _ in dp.overflow))


@needs_aic
def test_a_v4_drafter_reads_a_sliding_window_of_its_own_layers() -> None:
    from specplan.hwprofiles.aiconfigurator import AicDrafter

    _, dspark = pricer(PRO, "b300_sxm", 6, drafter=AicDrafter(layers=3, moe=True))
    assert dspark.window == 128 and dspark.csa_layers == 0 and dspark.indexer is None
    assert dspark.attention_ms(60, 10 * 200) == pytest.approx(dspark.attention_ms(60, 10 * 100_000))
    assert dspark.attention_ms(60, 10 * 16) < dspark.attention_ms(60, 10 * 128)


@pytest.mark.parametrize("name", [n for n in V4 if n.endswith(("-dspark", "-mtp"))][:6])
def test_committed_drafters_stop_growing_with_context_past_the_window(name: str) -> None:
    profile = load_profile(f"builtin:{name}")
    q = 6 if name.endswith("-dspark") else 1
    dp = int(re.search(r"-dp(\d+)", name)[1]) if "-dp" in name else 1
    requests = np.ceil(np.ceil(profile.tokens / dp) / q)
    deep = profile.context_tokens[1:-1]               # 16k and 64k rows
    wide = (deep[0] / dp / requests) >= 128           # both rows past the window
    np.testing.assert_allclose(profile.step_ms_table[1][wide], profile.step_ms_table[2][wide], rtol=1e-6)


# weights a GPU must read every step, whatever the batch (a lower bound): per layer the attention
# projections it cannot skip (wq_a, wq_b, wkv; FP8), the shared expert (FP8) and top-6 of the routed
# experts spread over the EP ranks, + the bf16 LM head; tensor-parallel parts divided by TP (both read
# from the name: tpN / dpN attention, epN experts; a bare tpN is EP1), the experts' bytes from the file's dtype.
CONFIG = {"pro": dict(layers=61, hidden=7168, q_lora=1536, heads=128, inter=3072),
          "flash": dict(layers=43, hidden=4096, q_lora=1024, heads=64, inter=2048)}
HBM_BYTES_PER_S = {"h100": 3.35e12, "h200": 4.8e12, "b200": 8.0e12, "b300": 8.0e12, "gb200": 8.0e12, "gb300": 8.0e12}


def weight_floor_ms(name: str, dtype: str) -> float:
    c = CONFIG["pro" if "-v4-pro-" in name else "flash"]
    topology = re.search(r"-(tp|dp)(\d+)(?:ep(\d+))?-", name)
    assert topology, name
    tp = 1 if topology[1] == "dp" else int(topology[2])
    ep = int(topology[3] or 1)
    layers = 1 if name.endswith("-mtp") else 3 if name.endswith("-dspark") else c["layers"]
    attention = c["hidden"] * c["q_lora"] + c["q_lora"] * c["heads"] * 512 + c["hidden"] * 512
    expert = 3 * c["hidden"] * c["inter"]
    expert_bytes = 1.0 if "MoE fp8_block" in dtype else 0.5     # FP8 experts, else FP4 (MXFP4 or NVFP4)
    per_layer = attention / tp + expert / tp + 6 / ep * expert * expert_bytes
    lm_head = 129280 * c["hidden"] * 2 / tp
    return (layers * per_layer + lm_head) / HBM_BYTES_PER_S[name.split("-")[0]] * 1e3


@pytest.mark.parametrize("name", V4)
def test_no_v4_step_beats_the_weights_it_must_read(name: str) -> None:
    profile = load_profile(f"builtin:{name}")
    assert profile.step_ms_table.min() >= weight_floor_ms(name, profile.provenance["dtype"]), name


def test_a_v4_pro_scenario_runs_on_the_built_ins_and_the_measured_preset() -> None:
    """End to end: DP8/EP8 on B300, DSpark-5 priced by its drafter file, acceptance from InferenceX."""
    from specplan.simulator.engine.cluster.simulation import simulate
    from tests.conftest import make_scenario

    base = "builtin:b300-deepseek-v4-pro-dp8ep8-vllm"
    runs = {}
    for family, block, drafter in (("dspark", 5, "-dspark"), ("mtp", 1, "-mtp")):
        scenario = make_scenario(
            seed=3, horizon={"duration_s": 10, "warmup_s": 1},
            hardware={"profile": base, "gpus_per_replica": 8},
            engine={"max_batch_requests": 64, "kv_capacity_tokens": 1_000_000},
            drafter={"family": family, "block_size": block,
                     "latency": {"kind": "profile", "path": base + drafter},
                     "acceptance": {"preset": "deepseek-v4-pro", "domains": {"code": 1.0}}},
            policy={"name": "static", "params": {"length": block}},
            workload={"arrivals": {"kind": "closed_loop", "users": 16, "think_s": 0.2}})
        runs[family] = simulate(scenario).summary
    for family, summary in runs.items():
        assert summary["tokens_generated"] > 0 and summary["gpus"] == 8, family
        assert 0 < summary["draft_share_of_step"] < 0.2, family
    # tokens per verify step: InferenceX's AL 3.61 at k = 5 (DSpark) and 1.79 at k = 1 (MTP), with spread
    assert runs["dspark"]["mean_accepted_per_step"] == pytest.approx(3.61, rel=0.05)
    assert runs["mtp"]["mean_accepted_per_step"] == pytest.approx(1.79, rel=0.05)


# the built-ins issue 36 added: V4-Pro where users run it, the 4-B200 MTP / DSpark pair, the dense drafters
NEW_V4_PRO = ["gb300-deepseek-v4-pro-tp4-sglang", "gb300-deepseek-v4-pro-tp4-sglang-mtp",
              "gb300-deepseek-v4-pro-tp4-sglang-dspark", "gb300-deepseek-v4-pro-tp4ep4-sglang",
              "gb300-deepseek-v4-pro-tp4ep4-sglang-mtp", "gb300-deepseek-v4-pro-tp4ep4-sglang-dspark",
              "b200-deepseek-v4-pro-dp8ep8-sglang-megamoe"]
NEW_PREFILL = ["b200-deepseek-v4-pro-tp8ep8-sglang-prefill", "b300-deepseek-v4-pro-tp8ep8-sglang-prefill",
               "gb300-deepseek-v4-pro-tp8ep8-sglang-prefill", "b300-deepseek-v4-pro-dp8ep8-sglang-prefill",
               "gb300-deepseek-v4-pro-dp8ep8-sglang-prefill", "gb300-deepseek-v4-pro-tp4-sglang-prefill",
               "gb300-deepseek-v4-pro-tp4ep4-sglang-prefill"]
NEW_OTHER = ["b200-deepseek-v4-flash-tp4-sglang-dspark", "b200-deepseek-v4-flash-tp4ep4-sglang-mtp",
             *(f"{target}-vllm-drafter-{n}l" for target in ("h100-llama3.1-8b", "h200-qwen3-8b") for n in (5, 2, 1))]


@pytest.mark.parametrize("name", NEW_V4_PRO + NEW_PREFILL + NEW_OTHER)
def test_each_new_built_in_says_where_every_figure_comes_from(name: str) -> None:
    from specplan.hwprofiles.builtins import PREFILL_BUILTINS
    from specplan.hwprofiles.physical import check_profile

    assert name in AIC_BUILTINS or name in PREFILL_BUILTINS
    meta = load_profile(f"builtin:{name}").provenance
    for key in ("device", "model", "dtype", "source", "database", "backend", "parallelism", "license", "statistic",
                "token_grid", "kv_capacity_tokens"):
        assert meta.get(key), (name, key)
    assert "NVIDIA AIConfigurator" in meta["source"] and "aiconfigurator-core 0.12.0" in meta["package"]
    if "-prefill" in name:
        assert meta["phase"] == "prefill" and "prefill_profile(AicTarget('deepseek-ai/DeepSeek-V4-Pro'" in meta["source"]
    else:
        parts = [k for k in meta if k.startswith("part.")]
        assert parts and all(re.search(r"ms, [\d.]+% of the step, [^;]+; ", meta[k]) for k in parts), name
    if "deepseek-v4" in name:
        family = "Pro" if "-v4-pro-" in name else "Flash"
        assert meta["attention_data"].startswith(f"DeepSeek-V4-{family}'s own attention-module rows"), name
        assert meta["roofline_peaks"] and meta["physical_rule"] and check_profile(load_profile(f"builtin:{name}"))
    if name.endswith("-megamoe"):
        for part in ("dispatch", "routed_experts", "combine"):
            assert "public microbenchmark: deepgemm_pr316 deep_gemm_megamoe w4a8 mean" in meta[f"part.{part}"]
    if "-drafter-" in name:
        layers = int(name[-2])
        assert meta["what"].startswith(f"drafter forward: {layers} dense decoder layer") and f"--drafter-layers {layers}" in meta["source"]
