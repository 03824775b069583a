"""Per-batch-size length schedule (TensorRT-LLM `draft_len_schedule`, vLLM `num_speculative_tokens_per_batch_size`).

`schedule` maps batch-size upper bounds to verification lengths:
`{4: 4, 8: 2, 32: 1}` verifies 4 drafts per request while the step has at
most 4 decoding requests, 2 up to 8, 1 up to 32, and none above 32
(speculation off); vLLM (>= 0.24) takes it as [first, last, length] ranges,
and its `disable_by_batch_size: N` is `{N: γ}`. Lengths lie within the block
size (a longer one is refused at load); the batch size is the step's decoding
requests. Like the other fixed-length policies it needs no per-step
decision, and the engine defers requests beyond the token budget rather
than shortening their blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from specplan.fields import bounded
from specplan.policies.base import FixedLengthPolicy
from specplan.policies.errors import PolicyKeyError


@dataclass(frozen=True)
class LengthScheduleParams:
    """`schedule`: {batch-size upper bound: length}; bounds are whole numbers ≥ 1."""

    schedule: dict[str, int] = bounded(ge=0, verify_length=True,
                                       doc="{batch-size upper bound: drafts verified}; none above the last bound",
                                       unit="tokens", example={4: 4, 8: 2, 32: 1})

    def validate(self, path: str) -> None:
        if not self.schedule:
            raise PolicyKeyError(f"{path}.schedule", "needs at least one 'batch_size: length' entry")
        for key in self.schedule:
            if not key.strip().isdigit() or int(key) < 1:
                raise PolicyKeyError(f"{path}.schedule.{key}", "batch-size bound must be a whole number >= 1")


class LengthSchedule(FixedLengthPolicy):
    """ℓ = schedule[smallest bound ≥ batch size] for every request; 0 above the largest bound."""

    name: ClassVar[str] = "length-schedule"
    Params: ClassVar[type] = LengthScheduleParams

    def __init__(self, params: LengthScheduleParams, block_size: int) -> None:
        super().__init__(params, block_size)
        table = sorted((int(k), v) for k, v in params.schedule.items())
        self.bounds = np.array([k for k, _ in table], dtype=np.int64)
        self.lengths = np.array([v for _, v in table] + [0], dtype=np.int64)

    def planned_length(self, batch_requests: int) -> int:
        return int(self.lengths[np.searchsorted(self.bounds, batch_requests, side="left")])
