"""Fixed-length baselines: no speculation, MTP-1, static MTP-k / fixed DFlash or Eagle3 blocks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from policies.base import Policy, StepView, fit_capacity
from simulator.core.schema import num


class NoSpeculation(Policy):
    """Plain decoding: one token per request per step, no drafting."""

    name: ClassVar[str] = "none"
    drafts: ClassVar[bool] = False

    def decide(self, view: StepView) -> np.ndarray:
        return np.zeros(view.batch_requests, dtype=np.int64)


class MTP1(Policy):
    """Verify exactly one draft per request per step (DeepSeek-V3 MTP-1 serving)."""

    name: ClassVar[str] = "mtp-1"

    def decide(self, view: StepView) -> np.ndarray:
        lengths = np.full(view.batch_requests, min(1, view.block_size), dtype=np.int64)
        return fit_capacity(lengths, view)


@dataclass(frozen=True)
class StaticParams:
    length: int | None = num(None, ge=0)


class Static(Policy):
    """Verify `length` drafts (default: the whole block) of every request, every step."""

    name: ClassVar[str] = "static"
    Params: ClassVar[type] = StaticParams

    def __init__(self, params: StaticParams, block_size: int) -> None:
        super().__init__(params, block_size)
        wanted = block_size if params.length is None else params.length
        self.length = min(wanted, block_size)

    def decide(self, view: StepView) -> np.ndarray:
        lengths = np.full(view.batch_requests, self.length, dtype=np.int64)
        return fit_capacity(lengths, view)
