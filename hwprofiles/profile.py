"""Step-time curves: the engine's verify cost as a function of tokens in the batch.

A `StepProfile` is a table of measured step times (ms) against the number of
tokens B in one verify forward, optionally with a second axis of total KV
context tokens. It is the one interface the simulator and the policies use:

    profile.step_ms(tokens, context_tokens=None) -> ndarray   (vectorised)
    profile.steps_per_s(tokens)                               (1000 / step_ms)
    profile.max_tokens                                        (largest measured B)

Lookup is linear between measured points and never smooths: a lookup at a
measured point returns it exactly, so sawtooth cliffs survive. Below the
first point the first value holds (a step cannot get cheaper than its
smallest measurement); beyond the last point is an error unless the profile
declares an extrapolation rule (`linear`: continue the last segment's slope).
Along the context axis the first and last rows hold outside it, except for a
prefill (context-phase) profile (`phase: prefill`), whose context axis is the
batch's attention pairs Σ n(n + 2p): past its last row the step continues the
last two rows' slope, since only the attention depends on the pairs and it is
bound by the pairs it computes (the prefill built-ins' own approximation line),
so a 8,192-token chunk over a 1M-token prefix (about 1.6e10 pairs) is not
priced as over the last row's 0.5M.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specplan.hwprofiles.errors import ProfileError

EXTRAPOLATIONS = ("none", "linear")


@dataclass(frozen=True, eq=False)
class StepProfile:
    """A validated step-time table with its provenance.

    Invariants: `tokens` strictly increasing positive integers; `step_ms`
    positive and finite, shape (len(tokens),) or (len(context_tokens),
    len(tokens)) when a context axis is present; `provenance` non-empty.
    """

    name: str
    tokens: np.ndarray
    step_ms_table: np.ndarray
    provenance: dict[str, Any]
    context_tokens: np.ndarray | None = None
    extrapolation: str = "none"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_table(self.name, self.tokens, self.step_ms_table, self.context_tokens)
        if self.extrapolation not in EXTRAPOLATIONS:
            raise ProfileError(
                f"profile {self.name}: extrapolation must be one of {', '.join(EXTRAPOLATIONS)}"
            )
        if not self.provenance:
            raise ProfileError(f"profile {self.name}: provenance metadata is missing")

    @property
    def max_tokens(self) -> int:
        """The largest measured token count (the default cap on tokens per step)."""
        return int(self.tokens[-1])

    def step_ms(self, tokens: Any, context_tokens: Any = None) -> np.ndarray:
        """Step time in ms at `tokens` (array-like), linear between measured points."""
        b = np.asarray(tokens, dtype=float)
        if self.extrapolation == "none" and np.any(b > self.tokens[-1]):
            worst = float(np.max(b))
            raise ProfileError(
                f"profile {self.name}: {worst:g} tokens is beyond its last measured point "
                f"({self.max_tokens}) and it declares no extrapolation"
            )
        if self.context_tokens is None or context_tokens is None:
            row = self.step_ms_table if self.context_tokens is None else self.step_ms_table[0]
            return self.interp_tokens(b, row)
        return self.interp_context(b, np.asarray(context_tokens, dtype=float))

    @property
    def extends_context(self) -> bool:
        """Whether lookups past the last context row continue its slope (a prefill profile: module docstring)."""
        return self.provenance.get("phase") == "prefill" and self.context_tokens is not None \
            and len(self.context_tokens) > 1

    def steps_per_s(self, tokens: Any, context_tokens: Any = None) -> np.ndarray:
        return 1000.0 / self.step_ms(tokens, context_tokens)

    def interp_tokens(self, b: np.ndarray, row: np.ndarray) -> np.ndarray:
        x = self.tokens.astype(float)
        out = np.interp(b, x, row)
        if self.extrapolation == "linear" and len(x) > 1:
            slope = (row[-1] - row[-2]) / (x[-1] - x[-2])
            beyond = b > x[-1]
            out = np.where(beyond, row[-1] + slope * (b - x[-1]), out)
        return out

    def interp_context(self, b: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        """Bilinear: along tokens in each context row, then between rows (clamped; a prefill profile continues
        past its last row: module docstring)."""
        assert self.context_tokens is not None
        b, ctx = np.broadcast_arrays(b, ctx)
        rows = np.stack([self.interp_tokens(b, r) for r in self.step_ms_table])
        c = self.context_tokens.astype(float)
        pos = np.clip(np.interp(ctx, c, np.arange(len(c))), 0, len(c) - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, len(c) - 1)
        w = pos - lo
        idx = np.arange(b.size).reshape(b.shape) if b.ndim else 0
        flat = rows.reshape(len(c), -1)
        lo_v = flat[lo.ravel(), np.ravel(idx)].reshape(b.shape)
        hi_v = flat[hi.ravel(), np.ravel(idx)].reshape(b.shape)
        out = (1 - w) * lo_v + w * hi_v
        if self.extends_context and np.any(ctx > c[-1]):
            slope = (rows[-1] - rows[-2]) / (c[-1] - c[-2])   # the attention's ms per pair past the last row
            out = np.where(ctx > c[-1], rows[-1] + slope * (ctx - c[-1]), out)
        return out


def check_table(name: str, tokens: np.ndarray, step_ms: np.ndarray, context: np.ndarray | None) -> None:
    """Raise ProfileError unless the table is a valid step-time curve."""
    if tokens.ndim != 1 or tokens.size == 0:
        raise ProfileError(f"profile {name}: tokens must be a non-empty list")
    if np.any(tokens <= 0) or np.any(tokens != np.round(tokens)):
        raise ProfileError(f"profile {name}: tokens must be positive whole numbers")
    steps = np.diff(tokens)
    if np.any(steps == 0):
        dup = int(tokens[1:][steps == 0][0])
        raise ProfileError(f"profile {name}: duplicate token count {dup}")
    if np.any(steps < 0):
        raise ProfileError(f"profile {name}: token counts must be sorted ascending")
    want = (tokens.size,) if context is None else (context.size, tokens.size)
    if step_ms.shape != want:
        raise ProfileError(f"profile {name}: step_ms has shape {step_ms.shape}, expected {want}")
    if not np.all(np.isfinite(step_ms)) or np.any(step_ms <= 0):
        raise ProfileError(f"profile {name}: step times must be positive and finite (ms)")
    if context is not None and (np.any(np.diff(context) <= 0) or np.any(context < 0)):
        raise ProfileError(f"profile {name}: context_tokens must be sorted, unique, non-negative")


def linear_profile(base_ms: float, per_token_ms: float, max_tokens: int = 16384) -> StepProfile:
    """`step_ms(B) = base_ms + per_token_ms * B`, exact at every integer B up to max_tokens."""
    for key, value in (("base_ms", base_ms), ("per_token_ms", per_token_ms)):
        if not np.isfinite(value) or value < 0:
            raise ProfileError(f"hardware.profile.{key}: must be a non-negative number")
    if base_ms <= 0:
        raise ProfileError("hardware.profile.base_ms: must be > 0")
    tokens = np.array([1, max_tokens], dtype=np.int64)
    return StepProfile(
        name=f"linear({base_ms:g} ms + {per_token_ms:g} ms/token)",
        tokens=tokens,
        step_ms_table=base_ms + per_token_ms * tokens.astype(float),
        provenance={"source": "inline linear model", "statistic": "analytic"},
        extrapolation="linear",
    )


def table_profile(tokens: Any, step_ms: Any, extrapolation: str = "none") -> StepProfile:
    """An inline table from a scenario (`{kind: table, tokens: [...], step_ms: [...]}`)."""
    t = np.asarray(tokens, dtype=float)
    s = np.asarray(step_ms, dtype=float)
    if t.shape != s.shape:
        raise ProfileError(
            f"hardware.profile: tokens and step_ms differ in length ({t.size} vs {s.size})"
        )
    return StepProfile(
        name="inline table",
        tokens=t.astype(np.int64) if np.all(t == np.round(t)) else t,
        step_ms_table=s,
        provenance={"source": "inline table in the scenario", "statistic": "as given"},
        extrapolation=extrapolation,
    )


CLIFF_FRACTION = 0.02  # a jump of the step time by more than this share of the step, in one token


def find_cliffs(tokens: np.ndarray, step_ms: np.ndarray, fraction: float = CLIFF_FRACTION) -> np.ndarray:
    """Indices i ≥ 1 where step_ms jumps by more than `fraction` of step_ms[i−1] in one token: CUDA-graph
    padding to a captured size, GEMM tile or wave quantisation."""
    jump = np.diff(step_ms)
    gap = np.diff(tokens)
    return np.flatnonzero((jump > fraction * step_ms[:-1]) & (gap == 1)) + 1
