"""Reading a deployment's own runs: one reader per tool, each a MeasuredRun per run, one line on a bad file.

    sglang.bench_serving    JSONL, one result object per line (`--output-file`; python/sglang/bench_serving.py,
                            `benchmark()`'s `result` dict): max_concurrency, completed, total_input_tokens,
                            total_output_tokens, output_throughput, mean_tpot_ms, mean_ttft_ms
    vllm bench serve        one JSON object (`--save-result`; vllm/benchmarks/serve.py: `benchmark()`'s result
                            with `main`'s setup keys): endpoint_type / backend, num_prompts, max_concurrency,
                            completed, total_input_tokens, total_output_tokens, output_throughput,
                            mean_tpot_ms, mean_ttft_ms
    aiperf                  profile_export_aiperf.json: per metric {unit, avg, p50, ...}
                            (output_token_throughput, time_to_first_token, inter_token_latency,
                            input_sequence_length, output_sequence_length, request_count) and
                            input_config.loadgen.concurrency
    genai-perf              profile_export_genai_perf.json (genai_perf/export_data/json_exporter.py: the
                            statistics with `input_config`, the command's arguments: concurrency, num_prompts)
    SGLang server log       `Decode batch. #running-req: N, #token: T, token usage: U, ..., gen throughput
                            (token/s): X, #queue-req: Q` lines, grouped by N (the median X of each N is one
                            figure, `decode_tok_s`), and `Prefill batch. #new-seq: S, #new-token: K,
                            #cached-token: C` lines, which give the prompts' mean length
                            ((K + C) / S summed over lines)

genai-perf's and aiperf's `inter_token_latency` is (latency - TTFT) / (output tokens - 1) per request: the
bench tools' TPOT, read as mean_tpot_ms. vLLM's Prometheus scrapes are read by
specplan.simulator.drafters.vllm_metrics (`specplan fit --metrics`), which fits the drafter's acceptance.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from specplan.errors import SpecplanError
from specplan.simulator.study.fit.runs import MeasuredRun

LOG_DECODE = re.compile(r"Decode batch[.,]\s*(.*)")
LOG_PREFILL = re.compile(r"Prefill batch[.,]\s*(.*)")
LOG_FIELD = re.compile(r"(#?[a-z][a-z \-]*?(?: \([^)]*\))?):\s*([-+0-9.eE]+|True|False)")
LOG_OUTPUT_TOKENS = 256   # a log's decode level is simulated at this output length (its steady decode rate)


class FitInputError(SpecplanError):
    """A run file that cannot be read as the tool writes it."""


def read_runs(path: str | Path) -> list[MeasuredRun]:
    """Every run in `path`, whichever tool wrote it (told apart by content)."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise FitInputError(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if LOG_DECODE.search(text):
        return read_sglang_log(text, path)
    stripped = text.strip()
    if not stripped:
        raise FitInputError(f"{path}: empty")
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [read_object(whole, path, path.name)]
    if whole is not None:
        raise FitInputError(f"{path}: expected a JSON object (a result file) or JSON lines, got {type(whole).__name__}")
    runs = []
    for number, line in enumerate(stripped.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise FitInputError(f"{path}:{number}: not a JSON line (and no 'Decode batch.' log lines in the "
                                "file)") from None
        if not isinstance(record, dict):
            raise FitInputError(f"{path}:{number}: expected a JSON object per line")
        runs.append(read_object(record, f"{path}:{number}", f"{path.name}:{number}"))
    return runs


def read_object(record: dict[str, Any], path: Path | str, name: str) -> MeasuredRun:
    """One result object: genai-perf / aiperf (metric dicts), vllm bench serve or sglang.bench_serving."""
    if isinstance(record.get("output_token_throughput"), dict):
        return read_perf_export(record, path, name)
    if "endpoint_type" in record or ("num_prompts" in record and "total_token_throughput" in record):
        return read_bench(record, path, name, "vllm_bench_serve")
    if "output_throughput" in record and ("random_input_len" in record or "backend" in record):
        return read_bench(record, path, name, "sglang_bench_serving")
    raise FitInputError(f"{path}: not a result file of sglang.bench_serving, vllm bench serve, aiperf or genai-perf "
                        "(no output_throughput / output_token_throughput)")


def number(record: dict[str, Any], key: str, path: Path | str, *, positive: bool = True) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (positive and value <= 0):
        raise FitInputError(f"{path}: {key}: expected a positive number, got {value!r}")
    return float(value)


def read_bench(record: dict[str, Any], path: Path | str, name: str, client: str) -> MeasuredRun:
    """sglang.bench_serving's and vllm bench serve's result: the same keys for what the fit reads."""
    completed = int(number(record, "completed", path))
    concurrency = record.get("max_concurrency")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1):
        raise FitInputError(f"{path}: max_concurrency: expected a whole number >= 1 or null, got {concurrency!r}")
    rate = record.get("request_rate", "inf")
    if rate not in ("inf", None) and not (isinstance(rate, (int, float)) and math.isinf(rate)):
        raise FitInputError(f"{path}: request_rate {rate}: the fit simulates runs at request rate inf (a "
                            "concurrency-bound client); a paced run is not read")
    figures = {"output_throughput": number(record, "output_throughput", path),
               "mean_tpot_ms": number(record, "mean_tpot_ms", path),
               "mean_ttft_ms": number(record, "mean_ttft_ms", path)}
    prompts = int(record.get("num_prompts") or completed)
    return MeasuredRun(name, client, int(concurrency or prompts), prompts,
                       round(number(record, "total_input_tokens", path) / completed),
                       round(number(record, "total_output_tokens", path) / completed), figures)


def stat(record: dict[str, Any], key: str, path: Path | str) -> float:
    """A genai-perf / aiperf metric's mean (its `avg`)."""
    entry = record.get(key)
    if not isinstance(entry, dict):
        raise FitInputError(f"{path}: {key}: expected a metric object with 'avg', got {entry!r}")
    return number(entry, "avg", path)


def read_perf_export(record: dict[str, Any], path: Path | str, name: str) -> MeasuredRun:
    """aiperf's profile_export_aiperf.json or genai-perf's profile_export_genai_perf.json."""
    config = record.get("input_config")
    if not isinstance(config, dict):
        raise FitInputError(f"{path}: input_config: missing (the export's command settings: its concurrency)")
    loadgen = config.get("loadgen")
    aiperf = isinstance(loadgen, dict)
    settings: dict[str, Any] = loadgen if isinstance(loadgen, dict) else config
    concurrency = settings.get("concurrency")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise FitInputError(f"{path}: input_config{'.loadgen' if aiperf else ''}.concurrency: expected a whole "
                            f"number >= 1, got {concurrency!r}")
    count = record.get("request_count")
    prompts = int(stat(record, "request_count", path)) if isinstance(count, dict) else \
        int(settings.get("request_count") or settings.get("num_prompts") or 0)
    if prompts < 1:
        raise FitInputError(f"{path}: no request count (request_count, or num_prompts in input_config)")
    figures = {"output_throughput": stat(record, "output_token_throughput", path),
               "mean_tpot_ms": stat(record, "inter_token_latency", path),
               "mean_ttft_ms": stat(record, "time_to_first_token", path)}
    return MeasuredRun(name, "aiperf" if aiperf else "genai_perf", concurrency, prompts,
                       round(stat(record, "input_sequence_length", path)),
                       round(stat(record, "output_sequence_length", path)), figures)


def log_fields(body: str) -> dict[str, float]:
    """'#running-req: 64, #token: 1234, gen throughput (token/s): 3456.7' -> {'#running-req': 64.0, ...}."""
    out = {}
    for key, value in LOG_FIELD.findall(body):
        if value in ("True", "False"):
            continue
        out[key.strip()] = float(value)
    return out


def read_sglang_log(text: str, path: Path) -> list[MeasuredRun]:
    """A server log's decode levels: per #running-req, the median generation throughput (one figure each)."""
    levels: dict[int, list[float]] = {}
    tokens: dict[int, list[float]] = {}
    seqs = prompt_tokens = 0.0
    for number_, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue  # a comment (a saved log's notes), not a server line
        decode, prefill = LOG_DECODE.search(line), LOG_PREFILL.search(line)
        if decode:
            fields = log_fields(decode.group(1))
            running, rate = fields.get("#running-req"), fields.get("gen throughput (token/s)")
            if running is None or rate is None:
                raise FitInputError(f"{path}:{number_}: a 'Decode batch.' line without #running-req or gen "
                                    "throughput (token/s)")
            if running >= 1 and rate > 0:
                levels.setdefault(int(running), []).append(rate)
                tokens.setdefault(int(running), []).append(fields.get("#token", fields.get("#full token", 0.0)))
        elif prefill:
            fields = log_fields(prefill.group(1))
            if "#new-seq" not in fields or "#new-token" not in fields:
                raise FitInputError(f"{path}:{number_}: a 'Prefill batch.' line without #new-seq or #new-token")
            seqs += fields["#new-seq"]
            prompt_tokens += fields["#new-token"] + fields.get("#cached-token", 0.0)
    if not levels:
        raise FitInputError(f"{path}: no 'Decode batch.' line with running requests and a generation throughput")
    runs = []
    for running in sorted(levels):
        context = float(np.median(tokens[running])) / running
        prompt = round(prompt_tokens / seqs) if seqs else max(1, round(context - LOG_OUTPUT_TOKENS / 2))
        runs.append(MeasuredRun(f"{path.name}@{running}", "sglang_log", running, 4 * running, max(prompt, 1),
                                LOG_OUTPUT_TOKENS, {"decode_tok_s": float(np.median(levels[running]))}))
    return runs
