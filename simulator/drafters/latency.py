"""Drafting latency per engine step, as a function of drafting requests R and block γ."""

from __future__ import annotations


class FixedDraftLatency:
    """`ms` per step whenever at least one request drafts."""

    uses_context = False
    uses_positions = False  # the same ms however many positions are drafted

    def __init__(self, ms: float) -> None:
        self.fixed_ms = ms

    def ms(self, drafting_requests: int, block_size: int, context_tokens: float = 0.0,
           positions: int | None = None) -> float:
        return self.fixed_ms if drafting_requests > 0 and block_size > 0 else 0.0
