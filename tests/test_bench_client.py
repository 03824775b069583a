"""The benchmark client (bench_client) and its metrics, against runs computed by hand.

Every engine step of these scenarios takes 10 ms (a linear profile with no
per-token cost) and prompts are prefilled at 1000 tokens/s in FIFO order
(the first token then comes from the first decode step), so each request's
timeline can be written down.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.records.bench_metrics import (
    bench_summary,
    client_metrics,
    client_traits,
)
from specplan.simulator.engine.records.step_log import ChunkLog
from specplan.simulator.scenario import scenario_from_mapping
from specplan.traces.bench_client import BenchRun

TINY = {
    "name": "bench-tiny", "seed": 3, "horizon": {"requests": 8},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.0, "max_tokens": 512},
                 "gpus_per_replica": 2},
    "cluster": {"replicas": 1},
    "engine": {"max_batch_requests": 8, "kv_capacity_tokens": 100_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 1000}},
    "drafter": {"family": "none", "block_size": 0, "acceptance": {"preset": "qwen3-8b", "domains": {"chat": 1.0}}},
    "policy": {"name": "none"},
    "workload": {"arrivals": {"kind": "bench_client", "num_prompts": 4, "max_concurrency": 2,
                              "warmup_requests": 1, "client": "vllm"},
                 "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 3}},
}


def run(arrivals: dict | None = None):
    raw = {**TINY, "workload": {**TINY["workload"], "arrivals": {**TINY["workload"]["arrivals"], **(arrivals or {})}}}
    return simulate(scenario_from_mapping(raw, base_dir=__import__("pathlib").Path(".")))


def test_three_token_request_tpot_and_a_batch_duration_by_hand():
    """Warm-up (prompt 0): prefill 0-0.1 s, steps end 0.11 (its first token), 0.12, 0.13. The benchmark
    starts at 0.13; prompts 1 and 2 are sent at once, prefilled one after the other (done 0.23 and
    0.33); each then streams its three tokens 10 ms apart, the first at the end of its first step.
    Prompt 3 is sent when 1 ends (0.26) and waits for the prefill stage (free at 0.33; done 0.43);
    prompt 4 is sent when 2 ends (0.36; prefill done 0.53, finish 0.56). Duration 0.56 − 0.13 = 0.43 s."""
    s = run().summary
    assert s["vllm_bench_serve.completed"] == 4
    assert s["vllm_bench_serve.duration_s"] == pytest.approx(0.43)
    assert s["vllm_bench_serve.output_throughput_tok_s"] == pytest.approx(12 / 0.43)
    assert s["vllm_bench_serve.total_token_throughput_tok_s"] == pytest.approx(412 / 0.43)
    assert s["vllm_bench_serve.total_token_throughput_tok_s_per_gpu"] == pytest.approx(412 / 0.43 / 2)
    # a request that streamed 3 tokens: (latency − TTFT) / (3 − 1) = 20 ms / 2; its first step's chunk is its
    # first token, so two gaps of 10 ms follow it
    assert s["vllm_bench_serve.median_tpot_ms"] == pytest.approx(10.0)
    assert s["vllm_bench_serve.mean_itl_ms"] == pytest.approx(10.0)
    ttfts = [110, 210, 180, 180]  # prompt 1: 0.13->0.24; 2: 0.13->0.34; 3: 0.26->0.44; 4: 0.36->0.54
    assert s["vllm_bench_serve.mean_ttft_ms"] == pytest.approx(np.mean(ttfts))
    assert s["vllm_bench_serve.median_ttft_ms"] == pytest.approx(np.median(ttfts))
    assert s["vllm_bench_serve.warmup_requests"] == 1


def test_sglang_warmups_run_at_once_with_32_output_tokens_at_most():
    res = run({"client": "sglang", "warmup_requests": 3, "max_concurrency": 1})
    req = res.requests
    warm = req[req["request_id"] < 3]
    assert (warm["arrival_s"] == 0).all()          # all at once, not behind the semaphore
    assert (warm["output_tokens"] == 3).all()      # min(3, 32)
    measured = req[req["request_id"] >= 3]
    assert len(measured) == 4 and measured["arrival_s"].min() == pytest.approx(warm["finish_s"].max())
    assert res.summary["sglang_bench_serving.completed"] == 4


def test_concurrency_is_held_and_every_prompt_finishes():
    res = run({"num_prompts": 12, "max_concurrency": 3, "warmup_requests": 0})
    req = res.requests.sort_values("arrival_s")
    assert (req["status"] == "completed").all() and len(req) == 12
    events = sorted([(t, 1) for t in req["arrival_s"]] + [(t, -1) for t in req["finish_s"]],
                    key=lambda e: (e[0], e[1]))
    in_flight = np.cumsum([d for _, d in events])
    assert in_flight.max() == 3


def chunks_by_hand() -> tuple[pd.DataFrame, ChunkLog]:
    """One request sent at 1.00 s: first token at 1.10, then a speculative step gives it 3 tokens at
    1.13 and a last step 2 tokens at 1.15 (6 output tokens)."""
    requests = pd.DataFrame({"request_id": [0], "status": ["completed"], "arrival_s": [1.0],
                             "first_token_s": [1.10], "finish_s": [1.15], "prompt_tokens": [50],
                             "output_tokens": [6]})
    log = ChunkLog()
    log.add(1.13, np.array([0]), np.array([3]))
    log.add(1.15, np.array([0]), np.array([2]))
    return requests, log


def test_itl_per_chunk_for_vllm_and_per_token_for_sglang():
    requests, log = chunks_by_hand()
    v = client_metrics(requests, log, 1.0, 1, client_traits("vllm"))
    g = client_metrics(requests, log, 1.0, 1, client_traits("sglang"))
    assert v["mean_tpot_ms"] == pytest.approx(50 / 5) == g["mean_tpot_ms"]   # (0.15 − 0.10) / (6 − 1)
    assert v["mean_itl_ms"] == pytest.approx(25.0)     # chunks at +30 ms and +20 ms
    assert v["median_itl_ms"] == pytest.approx(25.0)
    assert g["mean_itl_ms"] == pytest.approx(10.0)     # 30/3 three times, 20/2 twice
    assert g["max_itl_ms"] == pytest.approx(10.0)
    assert v["mean_ttft_ms"] == pytest.approx(100.0)
    assert g["concurrency"] == pytest.approx(0.15 / 0.15)


def test_summary_names_say_which_tool():
    requests, log = chunks_by_hand()
    out = bench_summary(requests, log, BenchRun("sglang", 0, 1, 1, start_s=1.0), gpus=1)
    assert out["sglang_bench_serving.duration_s"] == pytest.approx(0.15)
    assert all(key.startswith("sglang_bench_serving.") for key in out)
