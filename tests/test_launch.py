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

import yaml

from specplan.engines import sglang, vllm
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.study.launch import launch_config, launch_files, launch_script, parallelism
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
    assert "verifies them whole" in script and "# prefill: 3 replica(s) x 8 GPU(s)" in script
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
