"""Length distributions for prompts and outputs (tokens, whole numbers ≥ 1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from traces.spec import FixedLength, LognormalLength


class LengthSampler:
    """Draws lengths one request at a time from a block drawn ahead (fast, same stream order)."""

    BLOCK = 4096

    def __init__(self, spec: Any, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng
        self.buffer = np.empty(0, dtype=np.int64)
        self.pos = 0

    def next(self) -> int:
        if self.pos >= self.buffer.size:
            self.buffer = sample_lengths(self.spec, self.rng, self.BLOCK)
            self.pos = 0
        value = int(self.buffer[self.pos])
        self.pos += 1
        return value


def sample_lengths(spec: Any, rng: np.random.Generator, n: int) -> np.ndarray:
    if isinstance(spec, FixedLength):
        return np.full(n, spec.value, dtype=np.int64)
    if isinstance(spec, LognormalLength):
        x = spec.median * np.exp(spec.sigma * rng.standard_normal(n))
        return np.clip(np.rint(x), spec.min, spec.max).astype(np.int64)
    raise TypeError(f"unsupported length distribution {type(spec).__name__}")


def mean_length(spec: Any) -> float:
    """Analytic mean before rounding and clipping (used for planning and tests)."""
    if isinstance(spec, FixedLength):
        return float(spec.value)
    if isinstance(spec, LognormalLength):
        return float(spec.median * np.exp(spec.sigma**2 / 2))
    raise TypeError(f"unsupported length distribution {type(spec).__name__}")
