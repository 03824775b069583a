"""A trace's shape in numbers: count, span, rate, burstiness, length percentiles, block reuse.

`trace_stats(TraceFile)` streams the file once (readers.py) and returns a
`TraceStats`; `specplan trace-stats` prints it (or its `as_json()`), and
plots.py draws its rate over time and length distributions. Gap moments are
accumulated online (Welford), the peak 1-minute rate with a sliding
window; only the per-request lengths (for exact percentiles) and the
per-minute counts are kept. A trace with prompt block hashes (Mooncake's
`hash_ids`) also gives its block reuse (`BlockReuse`): the share of block
references seen earlier in the trace (what an unbounded block cache would
hold) and the share that extend a prompt's leading run of seen blocks (what
a prefix cache can skip), the first numbers a prefix-cache plan needs.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from specplan.traces.errors import TraceError
from specplan.traces.readers import TraceFile, TraceReader

MINUTE_S = 60.0


@dataclass
class TraceStats:
    """Summary of one trace; `minute_counts[i]` is the number of requests in minute i."""

    path: str
    format: str
    requests: int
    span_s: float
    rate_per_s: float
    interarrival_mean_s: float
    interarrival_cv: float
    peak_1min_rate_per_s: float
    bad_lines: int
    failed_requests: int
    minute_counts: np.ndarray
    prompt_lengths: np.ndarray
    output_lengths: np.ndarray
    blocks: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "requests": self.requests,
            "span_s": self.span_s,
            "rate_per_s": self.rate_per_s,
            "interarrival_mean_s": self.interarrival_mean_s,
            "interarrival_cv": self.interarrival_cv,
            "peak_1min_rate_per_s": self.peak_1min_rate_per_s,
            "prompt_tokens": percentiles(self.prompt_lengths),
            "output_tokens": percentiles(self.output_lengths),
            "blocks": self.blocks,
            "bad_lines": self.bad_lines,
            "failed_requests": self.failed_requests,
        }


def percentiles(lengths: np.ndarray) -> dict[str, float]:
    if lengths.size == 0:
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan, "max": math.nan}
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {"mean": float(lengths.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99),
            "max": int(lengths.max())}


class GapMoments:
    """Running mean and variance of inter-arrival gaps (Welford)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, gap_s: float) -> None:
        self.n += 1
        delta = gap_s - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (gap_s - self.mean)

    def cv(self) -> float:
        if self.n < 2 or self.mean <= 0:
            return math.nan
        return math.sqrt(self.m2 / (self.n - 1)) / self.mean


class BlockReuse:
    """Block references, distinct blocks, and those seen before (anywhere, and as a prompt's leading run)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.requests = self.references = self.repeated = self.prefix = 0

    def add(self, blocks: tuple[int, ...]) -> None:
        self.requests += 1
        self.references += len(blocks)
        leading = True
        for block in blocks:
            hit = block in self.seen
            self.repeated += hit
            leading = leading and hit
            self.prefix += leading
            self.seen.add(block)

    def as_json(self) -> dict[str, Any] | None:
        if not self.requests:
            return None
        share = (lambda n: n / self.references) if self.references else (lambda n: math.nan)
        return {"requests_with_blocks": self.requests, "block_references": self.references,
                "distinct_blocks": len(self.seen), "repeated_block_share": share(self.repeated),
                "prefix_reuse_share": share(self.prefix)}


def trace_stats(file: TraceFile) -> TraceStats:
    """Read `file` once and summarise it."""
    reader = TraceReader(file)
    prompts, outputs, minutes = array("q"), array("q"), array("q")
    gaps = GapMoments()
    reuse = BlockReuse()
    window: deque[float] = deque()
    peak, last_s = 0, 0.0
    for row in reader:
        if prompts:
            gaps.add(row.time_s - last_s)
        last_s = row.time_s
        prompts.append(row.prompt_tokens)
        outputs.append(row.output_tokens)
        if row.blocks is not None:
            reuse.add(row.blocks)
        count_minute(minutes, int(row.time_s // MINUTE_S))
        window.append(row.time_s)
        while window[0] <= row.time_s - MINUTE_S:
            window.popleft()
        peak = max(peak, len(window))
    if not prompts:  # refused as a replay refuses it (readers.TraceReader.first)
        skipped = f" ({reader.bad_lines} bad lines skipped)" if reader.bad_lines else ""
        raise TraceError(f"{file.path}: no requests in the trace{skipped}")
    return TraceStats(
        path=file.path, format=file.format, requests=len(prompts), span_s=last_s,
        rate_per_s=1.0 / gaps.mean if gaps.n and gaps.mean > 0 else math.nan,
        interarrival_mean_s=gaps.mean if gaps.n else math.nan, interarrival_cv=gaps.cv(),
        peak_1min_rate_per_s=peak / MINUTE_S, bad_lines=reader.bad_lines,
        failed_requests=reader.failed_requests, minute_counts=np.frombuffer(minutes, dtype=np.int64).copy(),
        prompt_lengths=np.frombuffer(prompts, dtype=np.int64).copy(),
        output_lengths=np.frombuffer(outputs, dtype=np.int64).copy(), blocks=reuse.as_json(),
    )


def count_minute(minutes: array, index: int) -> None:
    while len(minutes) <= index:
        minutes.append(0)
    minutes[index] += 1
