"""Token grids and CUDA-graph padding: which batch sizes a profile measures or captures.

An engine that replays CUDA graphs pads a batch of B tokens up to the
smallest captured size ≥ B, so its step time is a staircase in B. A
profile stores that staircase exactly with two points per bucket (the first
token count it serves and the bucket itself), which linear lookup then
reproduces without smoothing. `parse_tokens` reads the harness's
`--tokens` argument.
"""

from __future__ import annotations

import numpy as np

from specplan.hwprofiles.errors import ProfileError


def default_grid(first: int, last: int) -> list[int]:
    """Every count up to 16, then step 8 up to 256, then step 16, always ending at `last`."""
    points = [*range(1, 17), *range(24, 257, 8), *range(272, max(last, 272) + 1, 16)]
    grid = [b for b in points if first <= b <= last]
    if not grid or grid[0] != first:
        grid.insert(0, first)
    if grid[-1] != last:
        grid.append(last)
    return grid


def parse_tokens(text: str) -> list[int]:
    """`1:512` (default grid), `1:512:8` (A, A+S, ..., B), or a list `1,2,4,8`."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3):
                raise ValueError
            if len(parts) == 2:
                grid = default_grid(parts[0], parts[1])
            else:
                if parts[2] <= 0:
                    raise ValueError
                grid = sorted({*range(parts[0], parts[1] + 1, parts[2]), parts[1]})
        else:
            grid = [int(p) for p in text.split(",")]
    except ValueError:
        raise ProfileError(f"--tokens: expected A:B, A:B:STEP or a list like 1,2,4,8, got {text!r}") from None
    if not grid or min(grid) < 1 or grid != sorted(set(grid)) or (":" in text and parts[0] > parts[1]):
        raise ProfileError(f"--tokens: token counts must be positive, ascending and distinct: {text!r}")
    return grid


def pad_to_bucket(tokens: np.ndarray, buckets: list[int]) -> np.ndarray:
    """The captured size each batch runs at: the smallest bucket ≥ B (B itself beyond the last)."""
    b = np.asarray(tokens)
    edges = np.asarray(buckets)
    idx = np.searchsorted(edges, b, side="left")
    return np.where(idx < edges.size, edges[np.minimum(idx, edges.size - 1)], b)


def staircase(buckets: list[int], bucket_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points (first token count served, bucket) per bucket, so linear lookup is the padded step.

    `bucket_ms` may be (len(buckets),) or (rows, len(buckets)); the last axis
    is expanded.
    """
    edges = np.asarray(buckets, dtype=np.int64)
    starts = np.concatenate([[edges[0]], edges[:-1] + 1])
    tokens = np.unique(np.concatenate([starts, edges]))
    owner = np.searchsorted(edges, tokens, side="left")
    return tokens, np.asarray(bucket_ms)[..., owner]
