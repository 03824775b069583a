"""The winner's launch configuration: vLLM / SGLang flags and the TensorRT-LLM schedule, checked by hand.

Flag names as the engines' argument parsers spell them (vLLM EngineArgs / SpeculativeConfig methods 'mtp',
'eagle3', 'dflash', 'dspark', enable_adaptive_verification (vllm #47808),
num_speculative_tokens_per_batch_size (vllm #32374); SGLang ServerArgs --tp-size, --dp-size,
--enable-dp-attention, --ep-size, --speculative-algorithm NEXTN / EAGLE3 / DFLASH / DSPARK,
--speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens,
--speculative-dspark-block-size, --disaggregation-mode).
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess

import pytest
import yaml

from specplan.engines import sglang, vllm
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.study.launch import (
    launch_config,
    launch_files,
    launch_script,
    parallelism,
    scenario_launch,
)
from tests.conftest import BASE, REPO

LLAMA = {"model": "meta-llama/Meta-Llama-3.1-8B (32 layers, ...)", "parallelism": "TP1 EP1 DP1 (1 GPU)"}
V4 = {"model": "deepseek-ai/DeepSeek-V4-Flash (43 layers, ...)", "parallelism": "TP1 EP8 DP8 (8 GPUs)"}


def scenario(**changes):
    raw = copy.deepcopy(BASE)
    for key, value in changes.items():
        raw[key] = value
    return scenario_from_mapping(raw, REPO)


def script_of(launch, engine: str) -> str:
    return launch_script(launch, engine)[1]


def last_line(text: str) -> list[str]:
    return shlex.split([line for line in text.splitlines() if line and not line.startswith("#")][-1])


def test_aggregated_mtp_1_on_vllm():
    s = scenario(drafter={**BASE["drafter"], "block_size": 1}, policy={"name": "mtp-1"},
                 engine={**BASE["engine"], "max_batch_requests": 128,
                         "prefill": {"mode": "chunked", "chunk_tokens": 2048}})
    launch = launch_config(s, LLAMA)
    assert vllm.args(launch, "aggregated") == [
        "vllm", "serve", "meta-llama/Meta-Llama-3.1-8B", "--tensor-parallel-size", "1", "--max-num-seqs", "128",
        "--max-num-batched-tokens", "2048", "--no-enable-prefix-caching",
        "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']
    assert sglang.args(launch, "aggregated") == [
        "python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Meta-Llama-3.1-8B", "--tp-size", "1",
        "--max-running-requests", "128", "--chunked-prefill-size", "2048", "--disable-radix-cache",
        "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "2"]
    script = script_of(launch, "vllm")
    assert last_line(script) == vllm.args(launch, "aggregated")
    assert "# aggregated: 1 replica(s) x 1 GPU(s) (TP1 EP1 DP1)" in script


def test_disaggregated_dspark_with_dp_attention_on_sglang():
    pool = {"replicas": 3, "link": {"gbps": 400}, "kv_bytes_per_token": 1000}
    s = scenario(drafter={**BASE["drafter"], "family": "dspark", "block_size": 3,
                          "confidence": {"kind": "perfect"}},
                 policy={"name": "dspark-async"}, cluster={"replicas": 2, "router": "round_robin", "prefill": pool},
                 engine={"max_batch_requests": 64, "kv_capacity_tokens": 1_000_000})
    launch = launch_config(s, V4)
    assert launch.roles() == [("prefill", 3), ("decode", 2)]
    assert sglang.args(launch, "decode") == [
        "python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V4-Flash", "--tp-size", "1",
        "--dp-size", "8", "--enable-dp-attention", "--ep-size", "8", "--max-running-requests", "64",
        "--disable-radix-cache", "--disaggregation-mode", "decode", "--speculative-algorithm", "DSPARK",
        "--speculative-draft-model-path", "$DRAFT_MODEL", "--speculative-dspark-block-size", "3"]
    assert sglang.args(launch, "prefill")[-2:] == ["--disaggregation-mode", "prefill"]  # no drafter on prefill
    decode = vllm.args(launch, "decode")
    assert decode[decode.index("--data-parallel-size") + 1] == "8" and "--enable-expert-parallel" in decode
    assert json.loads(decode[decode.index("--kv-transfer-config") + 1]) == {"kv_connector": "NixlConnector",
                                                                            "kv_role": "kv_both"}
    assert json.loads(decode[decode.index("--speculative-config") + 1]) == {
        "method": "dspark", "model": "$DRAFT_MODEL", "num_speculative_tokens": 3, "enable_adaptive_verification": True}
    script = script_of(launch, "sglang")
    assert "SGLang cannot run dspark-async" in script and "# prefill: 3 replica(s) x 8 GPU(s)" in script
    assert "PR #47808" in script_of(launch, "vllm") and "vLLM 0.25" in script_of(launch, "vllm")


def test_dspark_at_a_fixed_length_runs_without_adaptive_verification():
    s = scenario(drafter={**BASE["drafter"], "family": "dspark", "confidence": {"kind": "perfect"}},
                 policy={"name": "static", "params": {"length": 3}})
    launch = launch_config(s, LLAMA)
    args = vllm.args(launch, "aggregated")
    assert json.loads(args[args.index("--speculative-config") + 1]) == {
        "method": "dspark", "model": "$DRAFT_MODEL", "num_speculative_tokens": 3}
    assert not [line for line in script_of(launch, "vllm").splitlines() if "DSpark" in line]


def test_the_script_runs_in_sh_with_the_drafter_expanded(tmp_path):
    s = scenario(drafter={**BASE["drafter"], "family": "eagle3", "block_size": 3}, policy={"name": "static",
                                                                                        "params": {"length": 3}})
    text = script_of(launch_config(s, LLAMA), "vllm").replace("vllm serve", "printf '%s\\n' vllm serve")
    path = tmp_path / "launch.sh"
    path.write_text(text)
    out = subprocess.run(["sh", str(path)], capture_output=True, text=True, env={"DRAFT_MODEL": "me/eagle3-8b"},
                         check=True).stdout.splitlines()
    assert json.loads(out[out.index("--speculative-config") + 1]) == {
        "method": "eagle3", "model": "me/eagle3-8b", "num_speculative_tokens": 3}
    missing = subprocess.run(["sh", str(path)], capture_output=True, text=True, env={})
    assert missing.returncode != 0 and "set DRAFT_MODEL" in missing.stderr


def test_a_tuned_schedule_writes_trtllm_yaml():
    s = scenario(policy={"name": "length-schedule", "params": {"schedule": {"4": 3, "16": 2, "64": 1}}})
    files = launch_files(launch_config(s, LLAMA))
    assert yaml.safe_load(files["trtllm.yaml"]) == {
        "speculative_config": {"max_draft_len": 3, "draft_len_schedule": {4: 3, 16: 2, 64: 1}}}
    assert "trtllm.yaml" not in launch_files(launch_config(scenario(), LLAMA))


def test_a_tuned_schedule_runs_on_vllm_as_batch_size_ranges():
    s = scenario(policy={"name": "length-schedule", "params": {"schedule": {"4": 3, "16": 2, "64": 1}}},
                 engine={**BASE["engine"], "max_batch_requests": 128})
    launch = launch_config(s, LLAMA)
    args = vllm.args(launch, "aggregated")
    config = json.loads(args[args.index("--speculative-config") + 1])
    assert config["num_speculative_tokens"] == 3
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 4, 3], [5, 16, 2], [17, 64, 1], [65, 128, 0]]
    assert "PR #32374" in script_of(launch, "vllm") and "no per-batch-size length table" in script_of(launch, "sglang")


def test_policies_no_engine_runs_say_what_the_line_serves():
    s = scenario(policy={"name": "goodput"})
    script = script_of(launch_config(s, LLAMA), "vllm")
    assert "policy goodput has no flag in vLLM or SGLang: this serves a fixed" in script


def test_parallelism_reads_the_provenance_line():
    assert parallelism("TP8 EP8 DP1 (8 GPUs)") == parallelism("TP8 EP8") and parallelism(None).tp == 1
    assert (parallelism("TP2 EP1 DP4").tp, parallelism("TP2 EP1 DP4").dp) == (2, 4)


def agentic(overrides: tuple[str, ...] = ()):
    from specplan.simulator.study.points import read_source, validated

    raw, folder, name = read_source(str(REPO / "scenarios" / "agentic.yaml"), list(overrides))
    return validated(raw, folder, name, "")


def test_an_sglang_plan_with_a_host_tier_carries_hicache_and_the_memory_fraction():
    """Issue 45 item 9: the SGLang line of a deployment with a host tier turns HiCache on at the planned ratio and
    states the memory fraction the plan priced the pool at (the engine's own rule, as memory.py computes it)."""
    from specplan.hwprofiles import load_profile
    from specplan.simulator.engine.config import serving_traits
    from specplan.simulator.scenario.memory import memory_fraction

    s = agentic()
    launch = scenario_launch(s)
    line = sglang.args(launch, "aggregated")
    profile = load_profile(s.hardware.profile)
    priced = memory_fraction(s.engine, serving_traits(s.engine, profile), profile, s.drafter.block_size)
    assert launch.engine == "sglang" and priced is not None
    assert line[line.index("--mem-fraction-static") + 1] == f"{priced:g}"
    assert "--enable-hierarchical-cache" in line and line[line.index("--hicache-ratio") + 1] == "8"
    assert line[line.index("--hicache-write-policy") + 1] == "write_through"
    assert line[line.index("--max-running-requests") + 1] == "32"
    assert line[line.index("--chunked-prefill-size") + 1] == "8192"
    assert int(line[line.index("--cuda-graph-max-bs") + 1]) == 32   # the capture list stops at the 32 slots
    assert "--disable-radix-cache" not in line
    assert "64 GB/s per attention rank" in launch_script(launch)[1]   # the link is the machine's: said, not a flag


def test_a_host_tier_given_in_gb_is_the_same_ratio_to_sglang_and_gib_to_vllm():
    s = agentic(("engine.prefix_cache.host={capacity_gb: 500, gbytes_per_s: 64}",))
    launch = scenario_launch(s)
    assert launch.host_tier.gib == pytest.approx(500e9 / (1 << 30))
    line = vllm.args(launch, "aggregated")
    assert line[line.index("--kv-offloading-size") + 1] == f"{500e9 / (1 << 30):.4g}"
    assert line[line.index("--kv-offloading-backend") + 1] == "native"
    ratio = float(sglang.args(launch, "aggregated")[sglang.args(launch, "aggregated").index("--hicache-ratio") + 1])
    assert 0 < ratio < 8   # 500 GB is less than 8x this pool's GPU cache


def test_an_sglang_deployment_prints_no_vllm_serve():
    """Issue 45 item 9: the lines come from the engine the plan priced: SGLang's only, no `vllm serve`."""
    launch = scenario_launch(agentic())
    label, script = launch_script(launch)
    assert label.startswith("SGLang") and "python -m sglang.launch_server" in script
    assert list(launch_files(launch)) == ["launch-sglang.sh"]
    assert not any("vllm serve" in text for text in launch_files(launch).values())


def test_sglang_says_in_one_line_it_cannot_run_the_async_policy_and_what_it_serves():
    dspark = scenario_from_mapping({**copy.deepcopy(BASE), "engine": {**BASE["engine"], "name": "sglang"},
                                    "drafter": {**BASE["drafter"], "family": "dspark", "block_size": 3,
                                                "confidence": {"kind": "perfect"}},
                                    "policy": {"name": "dspark-async"}}, REPO)
    script = launch_script(launch_config(dspark, LLAMA))[1]
    said = [line for line in script.splitlines() if "cannot run" in line]
    assert len(said) == 1 and "dspark-async" in said[0] and "static with length 3" in said[0]


def test_every_planned_setting_reaches_the_vllm_line():
    s = scenario(engine={**BASE["engine"], "name": "vllm", "memory_fraction": 0.85,
                         "prefill": {"mode": "chunked", "chunk_tokens": 2048}, "cuda_graph": {"max_capture_size": 64},
                         "dp_attention": {"ranks": 2},
                         "all_to_all": {"backend": "deepep", "mode": "low_latency"}})
    line = vllm.args(launch_config(s, LLAMA), "aggregated")
    assert line[line.index("--gpu-memory-utilization") + 1] == "0.85"
    assert line[line.index("--data-parallel-size") + 1] == "2"
    # vLLM's max_num_seqs and max_num_batched_tokens are one DP rank's: the replica's 16 and 2048 over 2 ranks
    assert line[line.index("--max-num-seqs") + 1] == "8" and line[line.index("--max-num-batched-tokens") + 1] == "1024"
    assert line[line.index("--all2all-backend") + 1] == "deepep_low_latency"
    assert json.loads(line[line.index("--compilation-config") + 1]) == {"max_cudagraph_capture_size": 64}
    assert list(launch_files(launch_config(s, LLAMA))) == ["launch-vllm.sh"]


def test_plan_without_a_search_writes_and_prints_the_winners_script(tmp_path, cli):
    """Issue 45 item 9: `plan` (no search: block) writes the winning variant's launch script and prints it."""
    from tests.test_sweep import BASE as SWEEP

    raw = copy.deepcopy(SWEEP)
    del raw["sla"]
    raw["engine"] = {**raw["engine"], "name": "sglang", "memory_fraction": 0.8}
    raw["horizon"] = {"duration_s": 30, "warmup_s": 1}
    raw["sweep"] = {"variants": [{"label": "plain", "drafter": {"family": "none", "block_size": 0},
                                  "policy": {"name": "none"}},
                                 {"label": "MTP-1", "policy": {"name": "mtp-1"}}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, out, _ = cli("plan", path, "--users", "4", "--sla", "tps_user_p10>=5", "--seeds", "1", "--quiet",
                         "--out", tmp_path / "plan")
    assert status == 0
    script = (tmp_path / "plan" / "launch-sglang.sh").read_text()
    assert "--mem-fraction-static 0.8" in script and not (tmp_path / "plan" / "launch-vllm.sh").exists()
    assert "python -m sglang.launch_server" in out and "vllm serve" not in out
    assert "launch-sglang.sh" in (tmp_path / "plan" / "plan.md").read_text()


def test_an_engine_without_a_launch_script_is_said_in_one_line():
    from specplan.simulator.study.launch import launch_text

    s = scenario(engine={**BASE["engine"], "name": "trtllm"})
    text = launch_text(launch_config(s, LLAMA))
    assert text.startswith("launch (trtllm): no launch script for this engine") and "\n" not in text
    tuned = scenario(engine={**BASE["engine"], "name": "trtllm"},
                     policy={"name": "length-schedule", "params": {"schedule": {"4": 3, "16": 2}}})
    assert "its files: trtllm.yaml" in launch_text(launch_config(tuned, LLAMA))
    assert list(launch_files(launch_config(tuned, LLAMA))) == ["trtllm.yaml"]


def test_the_plans_winner_is_the_fewest_gpus_then_the_most_tokens_per_gpu():
    import math

    from specplan.simulator.study.plan.planner import fewest_gpus
    from specplan.simulator.study.plan.probe import Probe
    from specplan.simulator.study.plan.replica_search import ReplicaSizing

    def sizing(label, gpus, per_gpu, met=True):
        probe = Probe(replicas=2, meets_sla=met, tps_user=1.0, tps_user_ci95=math.nan, throughput_per_gpu=per_gpu,
                      ttft_p99_s=0.1, backlog_growth=0.0, gpus=gpus)
        return ReplicaSizing(label, 2 if met else None, gpus // 2, [probe])

    assert fewest_gpus([sizing("none", 16, 44), sizing("MTP-1", 16, 49), sizing("DSpark-5", 16, 54)]) == 2
    assert fewest_gpus([sizing("a", 16, 90), sizing("b", 8, 10)]) == 1
    assert fewest_gpus([sizing("a", 8, 10, met=False)]) is None
