"""Fixed-length baselines: no speculation, MTP-1, static MTP-k / fixed DFlash or Eagle3 blocks.

Their lengths are known before drafting, so they need no per-step decision
and pay no scheduling overhead (production MTP-1 runs with zero-overhead
scheduling). A static policy verifies exactly the length it was given, which
the scenario layer holds within the drafter's block (a longer one is refused
at load, never cut): when the step's token budget cannot hold every
request's block, the engine defers the youngest requests to the next step,
or under vLLM's rule cuts the drafts at the budget's edge, and counts either
(`specplan.policies.base`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from specplan.fields import bounded
from specplan.policies.base import FixedLengthPolicy


class NoSpeculation(FixedLengthPolicy):
    """Plain decoding: one token per request per step, no drafting."""

    name: ClassVar[str] = "none"
    drafts: ClassVar[bool] = False

    def planned_length(self, batch_requests: int) -> int:
        return 0


class MTP1(FixedLengthPolicy):
    """Verify exactly one draft per request per step (DeepSeek-V3 MTP-1 serving)."""

    name: ClassVar[str] = "mtp-1"

    def planned_length(self, batch_requests: int) -> int:
        return 1


@dataclass(frozen=True)
class StaticParams:
    """`policy.params` of static: how many drafts every request verifies."""

    length: int | None = bounded(None, ge=0, verify_length=True, doc="drafts verified per request per step "
                                 "(default: the whole block)", unit="tokens")


class Static(FixedLengthPolicy):
    """Verify `length` drafts (default: the whole block) of every request, every step."""

    name: ClassVar[str] = "static"
    Params: ClassVar[type] = StaticParams

    def __init__(self, params: StaticParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.length = block_size if params.length is None else params.length

    def planned_length(self, batch_requests: int) -> int:
        return self.length
