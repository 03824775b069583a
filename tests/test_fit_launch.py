"""Issue 48: the deployment given as its launch line (`vllm serve ...`, `python -m sglang.launch_server ...`) is
read into a scenario through the engines' own flags, the inverse of the launchers."""

from __future__ import annotations

import pytest
import yaml

from specplan.engines.launch_line import LaunchLineError, scenario_of_launch
from specplan.simulator.scenario import load_scenario, scenario_from_mapping
from tests.conftest import REPO

VLLM = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 --max-num-seqs 128 "
        "--max-num-batched-tokens 4096 --gpu-memory-utilization 0.85 --port 8000")
SGLANG = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash --tp 4 --dp 4 "
          "--enable-dp-attention --max-running-requests 256 --chunked-prefill-size 16384 "
          "--speculative-algorithm NEXTN --speculative-num-steps 1 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 2 --mem-fraction-static 0.82 --host 0.0.0.0")


def test_a_vllm_line_is_its_engine_caps_and_budget(tmp_path):
    raw, used, ignored = scenario_of_launch(VLLM, "builtin:h200-llama3.1-8b-vllm")
    engine = raw["engine"]
    assert (engine["name"], engine["max_batch_requests"], engine["max_step_tokens"], engine["memory_fraction"]) == \
        ("vllm", 128, 4096, 0.85)
    assert engine["prefill"] == {"mode": "chunked", "chunk_tokens": 4096} and raw["hardware"]["gpus_per_replica"] == 1
    assert ignored == ["--port"] and "--max-num-seqs" in used
    scenario = scenario_from_mapping(raw, tmp_path)
    assert scenario.engine.max_batch_requests == 128 and scenario.drafter.family == "none"


def test_an_sglang_dp_attention_line_with_mtp(tmp_path):
    raw, _, ignored = scenario_of_launch(SGLANG, "builtin:b200-deepseek-v4-flash-dp4ep4-sglang")
    assert raw["engine"]["dp_attention"] == {"ranks": 4} and raw["hardware"]["gpus_per_replica"] == 4
    assert raw["engine"]["prefill"]["chunk_tokens"] == 16384 and raw["engine"]["memory_fraction"] == 0.82
    assert raw["drafter"] == {"family": "mtp", "block_size": 1} and raw["policy"] == {"name": "mtp-1"}
    assert ignored == ["--host"]
    raw["drafter"]["acceptance"] = {"preset": "deepseek-v3"}   # a launch line does not say how often drafts pass
    scenario = scenario_from_mapping(raw, tmp_path)
    assert scenario.engine.dp_attention.ranks == 4 and scenario.policy.name == "mtp-1"


@pytest.mark.parametrize("line, said", [
    ("docker run vllm", "expected 'vllm serve MODEL"),
    ("vllm serve m --max-num-seqs lots", "--max-num-seqs lots: expected a whole number"),
    ("vllm serve m --speculative-config {nope", "not valid JSON"),
    ("python -m sglang.launch_server --speculative-algorithm MAGIC", "--speculative-algorithm MAGIC"),
])
def test_a_bad_line_is_one_line(line, said):
    with pytest.raises(LaunchLineError, match=said):
        scenario_of_launch(line, "builtin:h200-llama3.1-8b-vllm")


def test_fit_reads_a_launch_line_and_writes_its_scenario(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(tmp_path / "cache"))
    runs = REPO / "scenarios" / "own-runs" / "runs"
    status, _, err = cli("fit", runs / "c4.json", runs / "c16.jsonl", runs / "c64.json", "--launch", VLLM,
                         "--profile", "builtin:h200-llama3.1-8b-vllm", "--out", tmp_path / "fit")
    assert status == 0, err
    assert "not modelled: --port" in err
    written = load_scenario(tmp_path / "fit" / "deployment.yaml")
    assert written.engine.max_batch_requests == 128
    assert yaml.safe_load((tmp_path / "fit" / "calibration.yaml").read_text())["deployment"]["engine"] == "vllm"
    status, _, err = cli("fit", runs / "c4.json", "--launch", VLLM, "--out", tmp_path / "fit2")
    assert status == 2 and "--launch needs --profile" in err
