"""A profile tabulated at every integer B, for lookups inside an engine step.

`StepProfile.step_ms` interpolates arbitrary arrays; an engine step asks
for one B, or for a contiguous range of B at one KV context, thousands of
times a second. `DenseCurve(profile, max_tokens)` evaluates the profile
once at B = 0..max_tokens (B = 0 priced as B = 1) for each context row, so
a lookup is an index (or a slice) into one row, or a blend of the two rows
around a context: the same numbers as `profile.step_ms(B, context)`
(linear between measured points, bilinear across context rows, context
clamped to the measured axis, or past its last row continuing the last two
rows' slope where the profile extends its context: a prefill profile,
`StepProfile.extends_context`), with no interpolation per step.

Beyond the profile's last measured B: its own extrapolation rule when it
declares one; else `beyond="error"` refuses (the engine's token budget must
fit the profile) and `beyond="proportional"` scales the last point by
B / B_last (a forward over more tokens than measured is never cheaper per
token: drafters' forwards over R·(γ+1) positions).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Literal

import numpy as np

from specplan.hwprofiles.errors import ProfileError


class DenseCurve:
    """Step times (ms) at B = 0..max_tokens, one row per context row of the profile."""

    def __init__(self, profile: Any, max_tokens: int, beyond: Literal["error", "proportional"] = "error") -> None:
        self.max_tokens = max_tokens
        self.rows = dense_rows(profile, max_tokens, beyond)
        self.context = None if profile.context_tokens is None else [float(c) for c in profile.context_tokens]
        self.extends = bool(getattr(profile, "extends_context", False))

    def around(self, context_tokens: float) -> tuple[np.ndarray, np.ndarray, float]:
        """The rows below and above a KV context and the upper row's weight (clamped to the axis; past its last row
        of a profile that extends its context, the last two rows and a weight above 1: their slope continued)."""
        low, high, weight = self.around_index(context_tokens)
        return self.rows[low], self.rows[high], weight

    def around_index(self, context_tokens: float) -> tuple[int, int, float]:
        """`around` as the two rows' indices and the upper row's weight."""
        ctx = self.context
        if ctx is None or context_tokens <= ctx[0]:
            return 0, 0, 0.0
        i = bisect_right(ctx, context_tokens) - 1
        last = len(ctx) - 1
        if i >= last:
            if self.extends and context_tokens > ctx[-1]:
                return last - 1, last, (context_tokens - ctx[-2]) / (ctx[-1] - ctx[-2])
            return last, last, 0.0
        return i, i + 1, (context_tokens - ctx[i]) / (ctx[i + 1] - ctx[i])

    def around_each(self, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`around_index` at each KV context of an array: (lower rows, upper rows, weights), arrays."""
        low, high, weight = zip(*map(self.around_index, contexts.tolist()), strict=True) if contexts.size else ((), (), ())
        return np.array(low, dtype=np.int64), np.array(high, dtype=np.int64), np.array(weight, dtype=float)

    def ms(self, tokens: int, context_tokens: float = 0.0) -> float:
        low, high, weight = self.around(context_tokens)
        if weight == 0.0:
            return float(low[tokens])
        return float(low[tokens] * (1.0 - weight) + high[tokens] * weight)


def dense_rows(profile: Any, max_tokens: int, beyond: str) -> np.ndarray:
    """(context rows, max_tokens + 1) step times at every integer B."""
    last = profile.max_tokens
    if max_tokens > last and profile.extrapolation == "none" and beyond == "error":
        raise ProfileError(f"profile {profile.name}: {max_tokens} tokens is beyond its last measured point "
                            f"({last}) and it declares no extrapolation")
    tokens = np.maximum(np.arange(max_tokens + 1), 1).astype(float)
    inside = np.minimum(tokens, last) if profile.extrapolation == "none" else tokens
    table = profile.step_ms_table if profile.context_tokens is not None else profile.step_ms_table[None, :]
    rows = np.stack([profile.interp_tokens(inside, row) for row in table])
    if profile.extrapolation == "none" and max_tokens > last:
        rows[:, last + 1:] *= tokens[last + 1:] / last
    return rows
