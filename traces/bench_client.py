"""A serving benchmark client in simulated time: `vllm bench serve` / `sglang.bench_serving`.

Both tools (vllm/benchmarks/serve.py, python/sglang/bench_serving.py) build
a fixed list of prompts, then, with `--request-rate inf` and
`--max-concurrency c`, create one task per prompt at once behind a
semaphore of c: a request is sent the moment another finishes, in list
order. `benchmark_duration` runs from just before the first send to the
last completion. Warm-up requests reuse the first prompt and finish before
the benchmark starts (the client's engine row in specplan.engines says how:
vLLM `--num-warmups` at the same concurrency; SGLang `--warmup-requests` all
at once, output capped at 32 tokens, then a one-second pause, which changes
nothing in a simulated run).

`start_bench_client` runs that client; its `BenchRun` says which requests
are measured (ids from `first_measured` on) and when the benchmark's clock
started, for the metrics (specplan.simulator.engine.records.bench_metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import simpy

from specplan.engines import engine_traits
from specplan.traces.spec import BenchClientArrivals

Submit = Callable[[int, int, int], simpy.Event]


@dataclass
class BenchRun:
    """The measured part of a benchmark client's run."""

    client: str
    first_measured: int         # request ids below this are warm-up requests
    prompts: int
    max_concurrency: int
    start_s: float = 0.0        # the benchmark's clock starts here (after the warm-ups)


def start_bench_client(env: simpy.Environment, spec: BenchClientArrivals, next_request: Callable[[], tuple],
                       submit: Submit) -> BenchRun:
    """Draw the prompt list, then run warm-ups and the benchmark (see the module docstring)."""
    prompts = [next_request() for _ in range(spec.num_prompts)]
    run = BenchRun(spec.client, spec.warmup_requests, spec.num_prompts, spec.max_concurrency)
    env.process(bench_client(env, spec, prompts, submit, run))
    return run


def warmup_requests(spec: BenchClientArrivals, first: tuple[int, int, int]) -> tuple[list[tuple[int, int, int]], int]:
    """The warm-up requests (copies of the first prompt, output capped as the client caps it) and how many run
    at once (all together, or at the benchmark's concurrency), as the client's engine row says."""
    client = engine_traits(spec.client).client
    assert client is not None  # the workload's client is one with a benchmark client (its Literal)
    prompt, output, domain = first
    cap = output if client.warmup_output_cap is None else min(output, client.warmup_output_cap)
    width = max(spec.warmup_requests, 1) if client.warmup_at_once else spec.max_concurrency
    return [(prompt, cap, domain)] * spec.warmup_requests, width


def bench_client(env: simpy.Environment, spec: BenchClientArrivals, prompts: list[tuple[int, int, int]],
                 submit: Submit, run: BenchRun) -> Generator[simpy.Event, Any, None]:
    """Warm-ups to completion, then the prompts behind the concurrency semaphore."""
    warmups, width = warmup_requests(spec, prompts[0])
    if warmups:
        yield from semaphore_round(env, warmups, width, submit)
    run.start_s = env.now
    yield from semaphore_round(env, prompts, spec.max_concurrency, submit)


def semaphore_round(env: simpy.Environment, requests: list[tuple[int, int, int]], width: int,
                    submit: Submit) -> Generator[simpy.Event, Any, None]:
    """Send `requests` in order, at most `width` in flight; returns when all have completed."""
    queue = iter(requests)

    def worker() -> Generator[simpy.Event, Any, None]:
        for request in queue:
            yield submit(*request)

    workers = [env.process(worker()) for _ in range(min(width, len(requests)))]
    yield simpy.AllOf(env, workers)
