"""Step cases: a static batch's published figures predicted by the step price alone, no scheduler in between.

A step case (`kind: step` in source.yaml, published.py) is what `bench_one_batch_server`,
`bench_one_batch`, `vllm bench latency` or an engine's per-step log line measured:
a batch of `concurrency` requests, each with `input_len` prompt tokens and
`output_len` output tokens (its workload's; a log line's figure gives the batch's
KV tokens instead), run together from the first prefill to the last token. Its
scenario.yaml names the engine (profile, graphs, data-parallel ranks, prefill
chunking) as a serving case's does, without speculation; `StepRunner` prices
each figure with `step_price.StaticBatch` and nothing else:

    step_itl                  bench_one_batch_server's ITL: (latency − TTFT) / output_len, i.e. the decode steps
                              1 .. output_len − 1 (the rows holding input_len + i KV tokens at step i) over
                              output_len tokens (its TTFT is the batch's last first token, sgl-project/sglang
                              PR #19223: throughputs over `last_ttft` and `latency - last_ttft`)
    batch_ttft                the batch's prefill, to the last request's first token (bench_one_batch_server's TTFT)
    batch_median_ttft         the median request's first token (a client's TTFT p50 over a batch sent at once)
    batch_latency             batch_ttft + every decode step (`vllm bench latency`'s latency, bench_one_batch's)
    batch_output_throughput   requests × output_len / batch_latency (an offline batch's output tok/s)
    batch_input_throughput    requests × input_len / batch_ttft (bench_one_batch_server's input throughput: a
                              row whose TTFT column is not published still gives its prefill this way)
    batch_total_throughput    requests × (input_len + output_len) / batch_latency (an offline batch's total tok/s,
                              prompt and output tokens over the batch's wall time)
    gen_throughput            a log line (`Decode batch. #running-req: N, #token: T, ... gen throughput`):
                              N / one decode step of N rows holding T / N KV tokens each

A step case is predicted, never calibrated, by replicate.py: it is priced with
no params (Params(): the scenario's own host time, scale 1), left out of the
calibration's groups and out of every serving statistic (stats.py keeps the two
levels of evidence apart), and the report sets each serving cell beside its
nearest step case (stats.responsibility). Given a calibration's params (as
benchmarks/fit_devset.py fits them), its figures take them the way a serving
case's do, through the one override path (case_runner.calibrated_scenario): host
time per step as `engine.host_overhead_ms` (so it adds to every prefill and decode
step), the verify scale as scaled profiles (so it multiplies the step's kernels).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from specplan.simulator.study.replication.case_runner import Params, calibrated_scenario
from specplan.simulator.study.replication.published import Case, Figure
from specplan.simulator.study.replication.step_price import StaticBatch


class StepRunner:
    """A step case's figures priced by its engine's step model (CaseRunner's interface: scenario, predict, modes)."""

    def __init__(self, case: Case, out_dir: Path) -> None:
        self.case, self.out_dir = case, out_dir
        self.batches: dict[tuple[str, str, tuple[str, ...], Params], StaticBatch] = {}
        self.decodes: dict[tuple[str, str, int, tuple[str, ...], Params], np.ndarray] = {}

    def workload(self, name: str) -> dict[str, Any]:
        return dict(self.case.source.get("workloads", {}).get(name) or {})

    def lengths(self, figure: Figure) -> tuple[int, int]:
        """The workload's (input_len, output_len) (published.check_step_workloads checked them when the case was
        read)."""
        spec = self.workload(figure.workload)
        return int(spec["input_len"]), int(spec["output_len"])

    def scenario(self, figure: Figure, arm: str, params: Params | None = None, extra: tuple[str, ...] = ()) -> Any:
        """The case's scenario with the workload's and the arm's overrides (a step case has no load to set), at
        `params` (None: Params(), the scenario's own terms)."""
        overrides = [*map(str, self.workload(figure.workload).get("overrides", [])),
                     *map(str, self.case.source["arms"][arm] or []), *extra]
        return calibrated_scenario(self.case, overrides, params or Params(), self.out_dir)

    def batch(self, figure: Figure, arm: str, params: Params | None = None, extra: tuple[str, ...] = ()) -> StaticBatch:
        key = (figure.workload, arm, extra, params or Params())
        if key not in self.batches:
            self.batches[key] = StaticBatch.of(self.scenario(figure, arm, params, extra))
        return self.batches[key]

    def predict(self, figure: Figure, params: Params | None = None, extra: tuple[str, ...] = ()) -> float:
        """The figure's predicted value in its metric's unit (ms, or tok/s) at a calibration's `params` (None: the
        scenario's own terms, as replicate.py predicts it)."""
        batch = self.batch(figure, figure.arm, params, extra)
        requests = figure.concurrency
        if figure.metric == "gen_throughput":
            assert figure.context_tokens is not None  # published.context requires it
            return 1000.0 * requests / batch.decode_step_ms(requests, max(1, round(figure.context_tokens / requests)))
        input_len, output_len = self.lengths(figure)
        if figure.metric == "batch_median_ttft":
            return float(np.median(batch.first_tokens_ms(requests, input_len)))
        prefill = batch.prefill_ms(requests, input_len)
        if figure.metric == "batch_input_throughput":
            return 1000.0 * requests * input_len / prefill
        key = (figure.workload, figure.arm, requests, extra, params or Params())
        if key not in self.decodes:
            self.decodes[key] = decode_steps_ms(batch, requests, input_len, output_len)
        decode = self.decodes[key]
        if figure.metric == "step_itl":
            return float(decode.sum()) / output_len
        if figure.metric == "batch_ttft":
            return prefill
        latency = prefill + float(decode.sum())
        if figure.metric == "batch_latency":
            return latency
        if figure.metric == "batch_total_throughput":
            return 1000.0 * requests * (input_len + output_len) / latency
        return 1000.0 * requests * output_len / latency  # batch_output_throughput

    def modes(self, figure: Figure, params: Params | None = None) -> dict[str, Any]:
        """A serving run's mode shares have no meaning for one static batch: none are reported."""
        return {}


def decode_steps_ms(batch: StaticBatch, requests: int, input_len: int, output_len: int) -> np.ndarray:
    """Every decode step of the batch: step i (1 .. output_len − 1) with each row holding input_len + i KV tokens."""
    return np.array([batch.decode_step_ms(requests, input_len + i) for i in range(1, output_len)])


def is_step(case: Case) -> bool:
    return case.kind == "step"
