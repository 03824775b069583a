"""Issue 48: a deployment's own runs, read as their tools write them; a malformed file is one line and exit 2.

The files under tests/data/fit/ follow each tool's source key for key (its README names the source of each).
"""

from __future__ import annotations

import json
import math

import pytest

from specplan.simulator.study.fit.readers import FitInputError, read_runs
from specplan.simulator.study.fit.writers import sglang_bench_serving_line, vllm_bench_serve_json
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "fit"


def test_sglang_bench_serving_lines_are_one_run_each():
    first, second = read_runs(DATA / "sglang_bench_serving.jsonl")
    assert (first.client, first.concurrency, first.num_prompts, first.input_tokens, first.output_tokens) == \
        ("sglang_bench_serving", 16, 64, 1024, 2048)
    assert first.figures == {"output_throughput": 2121.4, "mean_tpot_ms": 7.31, "mean_ttft_ms": 98.2}
    assert second.concurrency == 64 and second.bench_client == "sglang"


def test_a_vllm_bench_serve_result_file():
    (run,) = read_runs(DATA / "vllm_bench_serve.json")
    assert (run.client, run.bench_client, run.concurrency, run.num_prompts, run.input_tokens, run.output_tokens) == \
        ("vllm_bench_serve", "vllm", 32, 128, 1024, 1024)
    assert run.figures["mean_tpot_ms"] == 8.09 and run.figures["mean_ttft_ms"] == 88.4
    assert math.isclose(run.figures["output_throughput"], 128 * 1024 / 70.4)


def test_aiperf_and_genai_perf_exports():
    (aiperf,) = read_runs(DATA / "profile_export_aiperf.json")
    assert (aiperf.client, aiperf.concurrency, aiperf.num_prompts, aiperf.input_tokens, aiperf.output_tokens) == \
        ("aiperf", 16, 256, 2048, 512)
    assert aiperf.figures == {"output_throughput": 1848.3, "mean_tpot_ms": 8.53, "mean_ttft_ms": 61.5}
    (genai,) = read_runs(DATA / "profile_export_genai_perf.json")
    assert (genai.client, genai.concurrency, genai.num_prompts, genai.input_tokens, genai.output_tokens) == \
        ("genai_perf", 16, 100, 512, 256)
    assert genai.figures["mean_tpot_ms"] == 8.75


def test_an_sglang_log_gives_one_decode_level_per_running_count():
    """Both spellings ('Decode batch.' and 'Decode batch,' with '#full token') are read; the prompts' length is
    (new + cached tokens) / new sequences over the prefill lines: (4096 + 4096 + 16384) / 24 = 1024."""
    at8, at32 = read_runs(DATA / "sglang_server.log")
    assert (at8.concurrency, at8.input_tokens, at8.figures) == (8, 1024, {"decode_tok_s": 1006.10})
    assert (at32.concurrency, at32.figures) == (32, {"decode_tok_s": 3495.02})   # median of three lines


@pytest.mark.parametrize("name, text, said", [
    ("bad.jsonl", (DATA / "sglang_bench_serving.jsonl").read_text().splitlines()[0] + "\nnot json\n",
     "bad.jsonl:2: not a JSON line"),
    ("short.jsonl", '{"backend": "sglang", "output_throughput": 1.0}\n', "short.jsonl: completed: expected"),
    ("bad.json", json.dumps({"endpoint_type": "openai", "completed": 10, "max_concurrency": 4,
                             "output_throughput": "fast"}), "output_throughput: expected a positive number"),
    ("paced.json", json.dumps({"endpoint_type": "openai", "completed": 10, "request_rate": 4.0}), "request rate inf"),
    ("aiperf.json", json.dumps({"output_token_throughput": {"avg": 1.0}, "input_config": {"loadgen": {}}}),
     "input_config.loadgen.concurrency"),
    ("genai.json", json.dumps({"output_token_throughput": {"avg": 1.0}}), "input_config: missing"),
    ("server.log", "[x] Decode batch. #queue-req: 0,\n", "without #running-req"),
    ("other.json", json.dumps({"hello": 1}), "not a result file"),
    ("empty.json", "", "empty"),
])
def test_a_malformed_file_is_one_line(tmp_path, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(FitInputError, match=said) as caught:
        read_runs(path)
    assert "\n" not in str(caught.value)


def test_a_malformed_file_exits_2_from_the_command(tmp_path, cli):
    path = tmp_path / "broken.jsonl"
    path.write_text("{nope\n")
    status, _, err = cli("fit", path, "--scenario", REPO / "scenarios" / "default.yaml", "--out", tmp_path / "o")
    assert status == 2 and err.count("\n") == 1 and "broken.jsonl:1" in err


def test_the_simulators_bench_files_read_back(tmp_path):
    """The round trip's writers: what the simulated client measured comes back through the same readers."""
    summary = {f"{p}.{k}": v for p in ("sglang_bench_serving", "vllm_bench_serve") for k, v in {
        "duration_s": 10.0, "completed": 40, "total_input_tokens": 40 * 512, "total_output_tokens": 40 * 128,
        "request_throughput_req_s": 4.0, "output_throughput_tok_s": 512.0, "mean_ttft_ms": 20.0,
        "mean_tpot_ms": 7.5, "max_concurrency": 8}.items()}
    path = tmp_path
    (path / "s.jsonl").write_text(sglang_bench_serving_line(summary, 512, 128))
    (path / "v.json").write_text(vllm_bench_serve_json(summary, "m", 40))
    for name, client in (("s.jsonl", "sglang_bench_serving"), ("v.json", "vllm_bench_serve")):
        (run,) = read_runs(path / name)
        assert (run.client, run.concurrency, run.num_prompts, run.input_tokens, run.output_tokens) == \
            (client, 8, 40, 512, 128)
        assert run.figures == {"output_throughput": 512.0, "mean_tpot_ms": 7.5, "mean_ttft_ms": 20.0}
