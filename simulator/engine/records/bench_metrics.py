"""A benchmark client's metrics, computed as `vllm bench serve` and `sglang.bench_serving` compute them.

From the request records (arrival = send, first_token_s, finish_s = the
last chunk) and the chunk log (tokens each request received at each decode
step), for the measured requests of a `BenchRun` (warm-ups excluded):

    duration          last completion − the benchmark's start (both tools'
                      `benchmark_duration`: just before the first send to
                      after the last task returns)
    output_throughput Σ output tokens / duration; total adds Σ input tokens;
                      `_per_gpu` divides by every GPU of the cluster
    ttft              first chunk − send, per request
    tpot              (latency − ttft) / (output tokens − 1), per request with
                      more than one output token (latency = last chunk − send)
    itl               vLLM (vllm/benchmarks/serve.py, its endpoint request
                      functions): one entry per streamed chunk after the
                      first, the gap since the previous chunk. With
                      speculative decoding a step delivers accepted + 1
                      tokens in one chunk, so vLLM's ITL is the step-to-step
                      gap of a request (larger than TPOT by τ).
                      SGLang (`async_request_sglang_generate`): each chunk's
                      gap divided by its new tokens, repeated once per token
                      (`adjust_itl`), so its ITL averages like TPOT.
    statistics        numpy's mean, median (np.median) and percentiles
                      (np.percentile, linear), as both tools call them

Which definition a client follows (ITL per chunk or per token, its
percentiles, the extras it prints) is its engine's row of the traits table
(specplan.engines, `BenchClient`), named by the workload's `client`.

A decode step is one chunk here: the simulated engine streams every step's
tokens at the step's end, which is what a client sees when detokenisation
and the HTTP stream keep up (both engines stream per step). Names in
summary.json say which tool's definitions they follow:
`vllm_bench_serve.<name>` or `sglang_bench_serving.<name>`, with units in
the name (`_ms`, `_tok_s`, `_s`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specplan.engines import engine_traits
from specplan.engines.traits import BenchClient
from specplan.simulator.engine.records.step_log import ChunkLog
from specplan.traces.bench_client import BenchRun


def measured_requests(requests: pd.DataFrame, first_measured: int) -> pd.DataFrame:
    """The benchmark's requests (not the warm-ups) that completed."""
    done = requests[(requests["request_id"] >= first_measured) & (requests["status"] == "completed")]
    return done.sort_values("request_id")


def chunk_gaps(done: pd.DataFrame, chunks: ChunkLog) -> tuple[np.ndarray, np.ndarray]:
    """Per chunk after a request's first: the gap since its previous chunk (s) and its tokens.

    A request's chunks are its first token (first_token_s) and then every
    later decode step that gave it tokens, in time order (a decode step that
    emitted the first token is the first chunk itself).
    """
    times, rids, tokens = chunks.arrays()
    ids = done["request_id"].to_numpy()
    first = np.full(int(max(ids.max(initial=0), rids.max(initial=0))) + 1, np.nan)
    first[ids] = done["first_token_s"].to_numpy(float)
    keep = times > first[rids]  # False for requests not measured (NaN)
    rid = np.concatenate([done["request_id"].to_numpy(), rids[keep]])
    t = np.concatenate([done["first_token_s"].to_numpy(float), times[keep]])
    n = np.concatenate([np.ones(len(done), dtype=np.int64), tokens[keep]])
    order = np.lexsort((t, rid))
    rid, t, n = rid[order], t[order], n[order]
    later = np.flatnonzero(rid[1:] == rid[:-1]) + 1
    return t[later] - t[later - 1], n[later]


def stats(name: str, values_s: np.ndarray, percentiles: tuple[float, ...]) -> dict[str, float]:
    """mean / median / pNN in ms of `values_s`, as numpy computes them (0 for none, as the tools do)."""
    v = values_s if values_s.size else np.zeros(1)
    out = {f"mean_{name}_ms": float(np.mean(v)) * 1e3, f"median_{name}_ms": float(np.median(v)) * 1e3}
    for p in percentiles:
        out[f"p{p:g}_{name}_ms"] = float(np.percentile(v, p)) * 1e3
    return out


def per_request(done: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TTFT, latency (both from the send) and TPOT of every measured request, in seconds."""
    ttft = (done["first_token_s"] - done["arrival_s"]).to_numpy(float)
    latency = (done["finish_s"] - done["arrival_s"]).to_numpy(float)
    output = done["output_tokens"].to_numpy()
    many = output > 1
    tpot = (latency[many] - ttft[many]) / (output[many] - 1)
    return ttft, latency, tpot


def totals(done: pd.DataFrame, start_s: float, gpus: int) -> dict[str, float]:
    """Duration, token counts and the throughputs both tools print."""
    duration = float(done["finish_s"].max() - start_s) if len(done) else 0.0
    inputs, outputs = int(done["prompt_tokens"].sum()), int(done["output_tokens"].sum())
    rate = (lambda x: x / duration) if duration > 0 else (lambda x: 0.0)
    return {"completed": len(done), "duration_s": duration, "total_input_tokens": inputs,
            "total_output_tokens": outputs, "request_throughput_req_s": rate(len(done)),
            "output_throughput_tok_s": rate(outputs), "total_token_throughput_tok_s": rate(inputs + outputs),
            "output_throughput_tok_s_per_gpu": rate(outputs) / gpus,
            "total_token_throughput_tok_s_per_gpu": rate(inputs + outputs) / gpus}


def client_metrics(done: pd.DataFrame, chunks: ChunkLog, start_s: float, gpus: int,
                   client: BenchClient) -> dict[str, float]:
    """The client's `calculate_metrics` by its definitions (`BenchClient`: ITL per chunk or per token, its
    percentiles, what it calls end-to-end latency, and the extras SGLang's prints)."""
    ttft, latency, tpot = per_request(done)
    gaps, tokens = chunk_gaps(done, chunks)
    itl = np.repeat(gaps / np.maximum(tokens, 1), tokens) if client.itl_per_token else gaps
    base = totals(done, start_s, gpus)
    out = {**base, **stats("ttft", ttft, (99,)), **stats("tpot", tpot, (99,)),
           **stats("itl", itl, client.itl_percentiles)}
    if client.extras:
        out["max_itl_ms"] = float(np.max(itl)) * 1e3 if itl.size else 0.0
    out.update(stats(client.latency_name, latency, (99,)))
    if client.extras:
        duration = base["duration_s"]
        out["concurrency"] = float(latency.sum() / duration) if duration > 0 else 0.0
    return out


def bench_summary(requests: pd.DataFrame, chunks: ChunkLog, bench: BenchRun, gpus: int) -> dict[str, Any]:
    """The client's metrics under its tool's prefix, for summary.json."""
    done = measured_requests(requests, bench.first_measured)
    client = client_traits(bench.client)
    metrics = client_metrics(done, chunks, bench.start_s, gpus, client)
    out: dict[str, Any] = {f"{client.prefix}.{key}": value for key, value in metrics.items()}
    out[f"{client.prefix}.max_concurrency"] = bench.max_concurrency
    out[f"{client.prefix}.warmup_requests"] = bench.first_measured
    return out


def client_traits(name: str) -> BenchClient:
    """The benchmark client of engine `name` (its newest row)."""
    client = engine_traits(name).client
    if client is None:
        raise ValueError(f"{name} has no benchmark client in the traits table")
    return client


def metric_key(client: str, metric: str) -> str:
    """The summary key of a client's metric: `<prefix>.<metric>`."""
    return f"{client_traits(client).prefix}.{metric}"
