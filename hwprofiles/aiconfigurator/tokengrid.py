"""The token grid of a profile: which B (and C) points a file holds so that linear lookup stays exact.

Nothing is smoothed: the grid of B holds every token count the GEMM tables
sample (both sides of each tile edge), q · 2^k (the attention table's
batches), and more points where needed so that linear lookup reproduces the
step's non-attention time at every integer B within GRID_TOLERANCE. With dp
data-parallel attention ranks the grid is dp × the rank's own grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specplan.hwprofiles.aiconfigurator.compile import CompiledTarget
from specplan.hwprofiles.aiconfigurator.operators import kind_of, walk
from specplan.hwprofiles.aiconfigurator.package import gemm_samples

CONTEXT_GRID_TOKENS = (0, 16384, 65536, 262144)
GRID_TOLERANCE = 0.005


def context_rows(capacity: int, requested: tuple[int, ...]) -> tuple[int, ...]:
    """The C rows: as requested, or 0, 16k, 64k, 256k below the KV capacity, then the capacity."""
    if requested:
        return requested
    top = capacity // 1024 * 1024
    return (*(c for c in CONTEXT_GRID_TOKENS if c < top), top)


def gemm_sample_tokens(compiled: CompiledTarget, ops: list[dict[str, Any]]) -> set[int]:
    """Token counts (m) the GEMM tables sample for the GEMM precisions these operators use."""
    target = compiled.target
    samples = gemm_samples(target.system, target.backend, target.backend_version)
    modes = {op["Gemm"]["quant_mode"] for op in walk(ops) if kind_of(op) == "Gemm"}
    return {m for mode in modes for m in samples.get(mode, ())}


def replica_grid(samples: set[int], q: int, plain: np.ndarray, dp: int) -> np.ndarray:
    """The B grid of a replica: `token_grid` on one attention rank's tokens, times dp.

    With dp ranks the step at B is the rank's at ceil(B / dp) tokens, a
    staircase in B; the grid holds B = dp x (the rank's grid), every rank
    holding the same share (and B = 1), so lookups between two multiples of
    dp interpolate the rank's curve rather than reproduce the staircase.
    """
    if dp == 1:
        return token_grid(samples, q, plain)
    ranks = token_grid(samples, q, plain[dp - 1::dp])
    return np.unique(np.r_[1, ranks * dp]).astype(np.int64)


def grid_points(tokens: np.ndarray, dp: int) -> np.ndarray:
    """The B at which the grid must reproduce the step: every B (dp = 1), or every multiple of dp."""
    return np.arange(dp, int(tokens[-1]) + 1, dp)


def token_grid(samples: set[int], q: int, curve_ms: np.ndarray) -> np.ndarray:
    """Sampled token counts ∪ q·2^k ∪ refinement until linear lookup matches `curve_ms` within tolerance.

    `curve_ms[i]` is the step at B = i + 1 for every B up to the last.
    """
    last = curve_ms.size
    powers = {q * 2**k for k in range(32) if q * 2**k <= last}
    grid = sorted({b for b in (samples | powers) if 1 <= b <= last} | {1, last})
    b = np.arange(1, last + 1)
    while True:
        error = np.abs(np.interp(b, grid, curve_ms[np.array(grid) - 1]) - curve_ms) / curve_ms
        worst = int(np.argmax(error))
        if error[worst] <= GRID_TOLERANCE:
            return np.array(grid, dtype=np.int64)
        grid = sorted({*grid, worst + 1})
