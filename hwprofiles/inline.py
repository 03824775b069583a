"""Inline profiles of a scenario (`hardware.profile: {kind: linear, ...}` or `{kind: table, ...}`), declared plainly.

Each kind is a frozen dataclass whose `KIND` is the value of `kind:`; the
fields' bounds are metadata (`bounded`), which the scenario layer reads
when it validates `hardware.profile` (unknown keys name the closest valid
one there, like every other key). `loader.load_profile` turns an instance
into a `StepProfile`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from specplan.fields import bounded


@dataclass(frozen=True)
class LinearProfile:
    """`step_ms(B) = base_ms + per_token_ms · B`, exact at every integer B up to max_tokens."""

    KIND: ClassVar[str] = "linear"
    base_ms: float = bounded(gt=0, doc="step time at zero tokens", example=8.0)
    per_token_ms: float = bounded(ge=0, doc="step time each token of the step adds", unit="ms per token",
                                  example=0.02)
    max_tokens: int = bounded(16384, ge=1, doc="the largest step the line holds")


@dataclass(frozen=True)
class TableProfile:
    """Measured points: step_ms[i] at tokens[i], linear between them, extrapolated only as declared."""

    KIND: ClassVar[str] = "table"
    tokens: tuple[float, ...] = bounded(doc="the measured token counts, increasing", unit="tokens",
                                        example=[1, 64, 128])
    step_ms: tuple[float, ...] = bounded(doc="the step time at each token count", example=[8.0, 8.4, 9.9])
    extrapolation: Literal["none", "linear"] = bounded("none", doc="beyond the last point: an error (none), or "
                                                       "the last segment continued (linear)")


InlineProfile = LinearProfile | TableProfile
