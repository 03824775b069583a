"""The simulator's bench client written back as the tools write their results (the readers read them again).

    sglang_bench_serving_line(summary, ...)   one JSON line of sglang.bench_serving's `--output-file` (its
                                              `result` dict: arguments, then results, in its key names)
    vllm_bench_serve_json(summary, ...)       vllm bench serve's `--save-result` object (main's setup keys,
                                              then `benchmark()`'s results)

Both read the summary's bench keys (`sglang_bench_serving.*` / `vllm_bench_serve.*`, specplan's names with
units) and rename them to the tool's; per-request lists (ttfts, itls, generated_texts) are left out, as the tools
leave them out without --output-details / --save-detailed.
"""

from __future__ import annotations

import json
from typing import Any

# the tool's key <- specplan's summary key under the client's prefix
COMMON = {"duration": "duration_s", "completed": "completed", "total_input_tokens": "total_input_tokens",
          "total_output_tokens": "total_output_tokens", "request_throughput": "request_throughput_req_s",
          "output_throughput": "output_throughput_tok_s", "mean_ttft_ms": "mean_ttft_ms",
          "median_ttft_ms": "median_ttft_ms", "p99_ttft_ms": "p99_ttft_ms", "mean_tpot_ms": "mean_tpot_ms",
          "median_tpot_ms": "median_tpot_ms", "p99_tpot_ms": "p99_tpot_ms", "mean_itl_ms": "mean_itl_ms",
          "median_itl_ms": "median_itl_ms", "p99_itl_ms": "p99_itl_ms"}
SGLANG = {**COMMON, "input_throughput": None, "mean_e2e_latency_ms": "mean_e2e_latency_ms",
          "median_e2e_latency_ms": "median_e2e_latency_ms", "p99_e2e_latency_ms": "p99_e2e_latency_ms",
          "p95_itl_ms": "p95_itl_ms", "concurrency": "concurrency"}
VLLM = {**COMMON, "failed": None, "total_token_throughput": "total_token_throughput_tok_s",
        "mean_e2el_ms": "mean_e2el_ms", "median_e2el_ms": "median_e2el_ms", "p99_e2el_ms": "p99_e2el_ms"}


def renamed(summary: dict[str, Any], prefix: str, names: dict[str, str | None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tool_key, ours in names.items():
        if ours is not None and f"{prefix}.{ours}" in summary:
            out[tool_key] = summary[f"{prefix}.{ours}"]
    return out


def sglang_bench_serving_line(summary: dict[str, Any], input_len: int, output_len: int) -> str:
    """One `--output-file` line as sglang.bench_serving appends it (dataset random, range ratio 1: fixed lengths)."""
    prefix = "sglang_bench_serving"
    results = renamed(summary, prefix, SGLANG)
    results["input_throughput"] = summary[f"{prefix}.total_input_tokens"] / summary[f"{prefix}.duration_s"]
    record = {"backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
              "max_concurrency": summary[f"{prefix}.max_concurrency"], "random_input_len": input_len,
              "random_output_len": output_len, "random_range_ratio": 1.0, **results}
    return json.dumps(record) + "\n"   # request_rate inf is written as Infinity, as json.dumps writes it there


def vllm_bench_serve_json(summary: dict[str, Any], model_id: str, num_prompts: int) -> str:
    """A `--save-result` file as vllm bench serve writes it (request rate inf, one concurrency)."""
    prefix = "vllm_bench_serve"
    record = {"date": "simulated", "endpoint_type": "vllm", "backend": "vllm", "label": None, "model_id": model_id,
              "tokenizer_id": model_id, "num_prompts": num_prompts, "request_rate": "inf", "burstiness": 1.0,
              "max_concurrency": summary[f"{prefix}.max_concurrency"], "failed": 0,
              **renamed(summary, prefix, VLLM)}
    return json.dumps(record, indent=2) + "\n"
