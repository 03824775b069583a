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
    base_ms: float = bounded(gt=0)
    per_token_ms: float = bounded(ge=0)
    max_tokens: int = bounded(16384, ge=1)


@dataclass(frozen=True)
class TableProfile:
    """Measured points: step_ms[i] at tokens[i], linear between them, extrapolated only as declared."""

    KIND: ClassVar[str] = "table"
    tokens: tuple[float, ...]
    step_ms: tuple[float, ...]
    extrapolation: Literal["none", "linear"] = "none"


InlineProfile = LinearProfile | TableProfile
