"""Length distributions for prompts and outputs (tokens, whole numbers ≥ 1).

workload.prompt_tokens / output_tokens specs → samplers that hand one
length at a time to the request source (the engine's workload.py), drawn in blocks
from a named stream. Kinds: fixed, lognormal, empirical (resampled from a
trace file's lengths, read once with readers.py and cached, or from inline
values) and mixture (one of the above per domain; the engine's workload.py picks the
component by the request's domain).

`role` is "prompt" or "output": the trace field an empirical distribution
resamples unless it names its `field`.
"""

from __future__ import annotations

import functools
import os
from array import array
from typing import Any

import numpy as np

from specplan.traces.errors import TraceError
from specplan.traces.readers import TraceFile, TraceReader
from specplan.traces.spec import EmpiricalLength, FixedLength, LognormalLength, MixtureLength

BLOCK = 4096


class LengthSampler:
    """Draws lengths one request at a time from a block drawn ahead (fast, same stream order)."""

    BLOCK = BLOCK

    def __init__(self, spec: Any, rng: np.random.Generator, role: str = "prompt") -> None:
        self.spec = spec
        self.rng = rng
        self.role = role
        self.buffer = np.empty(0, dtype=np.int64)
        self.pos = 0

    def next(self) -> int:
        if self.pos >= self.buffer.size:
            self.buffer = sample_lengths(self.spec, self.rng, self.BLOCK, self.role)
            self.pos = 0
        value = int(self.buffer[self.pos])
        self.pos += 1
        return value


class PairedEmpiricalSampler:
    """Prompt and output resampled from the same trace rows, keeping their correlation."""

    def __init__(self, file: TraceFile, rng: np.random.Generator) -> None:
        prompt, output = trace_lengths(file)
        self.prompt, self.output = np.maximum(prompt, 1), output
        self.rng = rng
        self.rows = np.empty(0, dtype=np.int64)
        self.pos = 0

    def next(self) -> tuple[int, int]:
        if self.pos >= self.rows.size:
            self.rows = self.rng.integers(0, self.prompt.size, BLOCK)
            self.pos = 0
        row = self.rows[self.pos]
        self.pos += 1
        return int(self.prompt[row]), int(self.output[row])


class LengthPair:
    """Prompt and output lengths for one domain: paired rows when both resample one trace."""

    def __init__(self, prompt: Any, output: Any, prompt_rng: np.random.Generator,
                 output_rng: np.random.Generator) -> None:
        shared = shared_trace(prompt, output)
        self.paired = PairedEmpiricalSampler(shared, prompt_rng) if shared is not None else None
        self.prompt = LengthSampler(prompt, prompt_rng, "prompt")
        self.output = LengthSampler(output, output_rng, "output")

    def next(self) -> tuple[int, int]:
        if self.paired is not None:
            return self.paired.next()
        return self.prompt.next(), self.output.next()


def shared_trace(prompt: Any, output: Any) -> TraceFile | None:
    """The trace both specs resample row-wise (prompt field for prompts, output for outputs), if any."""
    if not (isinstance(prompt, EmpiricalLength) and isinstance(output, EmpiricalLength)):
        return None
    if not (prompt.path and output.path) or (prompt.field or "prompt") != "prompt" or (output.field or "output") != "output":
        return None
    file = TraceFile.of(prompt)
    return file if file == TraceFile.of(output) else None


def sample_lengths(spec: Any, rng: np.random.Generator, n: int, role: str = "prompt") -> np.ndarray:
    if isinstance(spec, FixedLength):
        return np.full(n, spec.value, dtype=np.int64)
    if isinstance(spec, LognormalLength):
        x = spec.median * np.exp(spec.sigma * rng.standard_normal(n))
        return np.clip(np.rint(x), spec.min, spec.max).astype(np.int64)
    if isinstance(spec, EmpiricalLength):
        values = empirical_values(spec, role)
        return values[rng.integers(0, values.size, n)]
    raise TypeError(f"unsupported length distribution {type(spec).__name__}")


def mean_length(spec: Any, role: str = "prompt", mix: dict[str, float] | None = None) -> float:
    """Analytic mean before rounding and clipping (used for planning and tests).

    A mixture needs the domain shares `mix` (drafter.acceptance.domains).
    """
    if isinstance(spec, FixedLength):
        return float(spec.value)
    if isinstance(spec, LognormalLength):
        return float(spec.median * np.exp(spec.sigma**2 / 2))
    if isinstance(spec, EmpiricalLength):
        return float(empirical_values(spec, role).mean())
    if isinstance(spec, MixtureLength):
        if mix is None:
            raise ValueError("the mean of a mixture needs the domain shares")
        return sum(share * mean_length(spec.components[d], role) for d, share in mix.items() if share > 0)
    raise TypeError(f"unsupported length distribution {type(spec).__name__}")


def empirical_values(spec: EmpiricalLength, role: str) -> np.ndarray:
    """The lengths an empirical distribution resamples (all ≥ 1)."""
    if spec.values:
        return np.asarray(spec.values, dtype=np.int64)
    prompt, output = trace_lengths(TraceFile.of(spec))
    values = prompt if (spec.field or role) == "prompt" else output
    return np.maximum(values, 1)


def trace_lengths(file: TraceFile) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) lengths of every request in a trace, read once per file version."""
    try:
        stamp = os.stat(file.path).st_mtime_ns
    except OSError as exc:
        raise TraceError(f"{file.path}: cannot read trace ({exc.strerror or exc})") from None
    return _read_lengths(file, stamp)


@functools.lru_cache(maxsize=8)
def _read_lengths(file: TraceFile, stamp: int) -> tuple[np.ndarray, np.ndarray]:
    prompt, output = array("q"), array("q")
    for row in TraceReader(file):
        prompt.append(row.prompt_tokens)
        output.append(row.output_tokens)
    if not prompt:
        raise TraceError(f"{file.path}: no requests to resample lengths from")
    return np.frombuffer(prompt, dtype=np.int64).copy(), np.frombuffer(output, dtype=np.int64).copy()
