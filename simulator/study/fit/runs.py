"""A measured benchmark run as the fit reads it: how it was driven, and the figures it published.

A run is simulated as the tool drove it (specplan.traces.bench_client): `num_prompts` prompts behind a
semaphore of `concurrency`, request rate inf, every prompt `input_tokens` long and every output
`output_tokens` long (the run's means: a random dataset's spread around them is not in its result file).
Its figures, in the units the tools print:

    output_throughput   output tokens per second over the benchmark's duration (tok/s)
    mean_tpot_ms        mean time per output token after the first (ms)
    mean_ttft_ms        mean time to first token (ms)
    decode_tok_s        a server log's generation throughput at `concurrency` running requests
                        (SGLang's `gen throughput (token/s)`), compared with concurrency x 1000 / TPOT
    batch_latency_ms    a static batch's (a replication step case's, benchmarks/fit_devset.py) whole latency
    batch_ttft_ms       and its prefill to the last first token (ms): times, fitted like TPOT; no reader of
                        `specplan fit` gives them
"""

from __future__ import annotations

from dataclasses import dataclass, field

METRICS = ("output_throughput", "mean_tpot_ms", "mean_ttft_ms", "decode_tok_s", "batch_latency_ms", "batch_ttft_ms")
FIT_METRICS = ("output_throughput", "mean_tpot_ms", "decode_tok_s",   # what host time and the scale are fitted on
               "batch_latency_ms", "batch_ttft_ms")


@dataclass(frozen=True)
class MeasuredRun:
    """One run: its file (and place in it), the tool, how it was driven, and its published figures."""

    name: str
    client: str                 # sglang_bench_serving, vllm_bench_serve, aiperf, genai_perf, sglang_log
    concurrency: int
    num_prompts: int
    input_tokens: int
    output_tokens: int
    figures: dict[str, float] = field(default_factory=dict)

    @property
    def bench_client(self) -> str:
        """Whose client and metric definitions the simulated run follows (the bench client's `client`)."""
        return "sglang" if self.client.startswith("sglang") else "vllm"
