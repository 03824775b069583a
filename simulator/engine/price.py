"""The price of one engine step: the one function the engine's clock and every policy's Θ call.

DESIGN.md §1: SPS(B) is the rate of the *whole* step the engine runs for
the batch at hand,

    step_ms(B) = draft_ms(drafting requests)                the drafter's forwards
               + verify_ms(B, KV context of the batch)      the target's forward (profile lookup)
               + host_ms = host_overhead_ms + host_overhead_per_request_ms · requests
               + scheduling_ms = scheduling_overhead_ms     when the policy decides per step
                                                            synchronously (and the step decodes)

Everything but verify_ms is fixed once the batch is known (drafting comes
before verification), so a step's price is a `StepQuote`: the fixed part
plus one row of verify times over B (blended between the profile's two
nearest context rows). The decode core asks the `StepPricer` for a quote
per step, hands it to the policy in the StepView (Θ = τ · quote's steps/s)
and charges the quote at the B the policy chose: policy and clock cannot
diverge.

Verify times come from a dense table over B = 0..max_step_tokens built
once per pricer (`specplan.hwprofiles.dense.DenseCurve`), so a quote costs a scalar
bisection and its lookups are slices, never a per-step interpolation of
the whole profile. Drafting is priced by the drafter's latency model at
the drafting requests' share of the step's KV context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specplan.hwprofiles.dense import DenseCurve
from specplan.simulator.engine.config import EngineConfig


class StepQuote:
    """The price of one step of a known batch, as a function of its verify tokens B."""

    __slots__ = ("draft_ms", "fixed_ms", "high", "host_ms", "low", "scheduling_ms", "sps", "weight")

    def __init__(self, draft_ms: float, host_ms: float, scheduling_ms: float, low: np.ndarray,
                 high: np.ndarray, weight: float) -> None:
        self.draft_ms, self.host_ms, self.scheduling_ms = draft_ms, host_ms, scheduling_ms
        self.fixed_ms = draft_ms + host_ms + scheduling_ms
        self.low, self.high, self.weight = low, high, weight
        self.sps: np.ndarray | None = None  # SPS at every B, made on first use (a quote is reused per batch shape)

    def verify_ms_range(self, start: int, stop: int) -> np.ndarray:
        """verify_ms(B) for B = start..stop − 1."""
        if self.weight == 0.0:
            return self.low[start:stop]
        return self.low[start:stop] * (1.0 - self.weight) + self.high[start:stop] * self.weight

    def verify_ms(self, tokens: int) -> float:
        if self.weight == 0.0:
            return float(self.low[tokens])
        return float(self.low[tokens] * (1.0 - self.weight) + self.high[tokens] * self.weight)

    def step_ms(self, tokens: int) -> float:
        """The whole step at B = `tokens`: what the engine charges."""
        return self.fixed_ms + self.verify_ms(tokens)

    def steps_per_s_range(self, start: int, stop: int) -> np.ndarray:
        """SPS(B) = 1000 / step_ms(B) for B = start..stop − 1."""
        if self.weight != 0.0:
            return 1000.0 / (self.fixed_ms + self.verify_ms_range(start, stop))
        if self.sps is None:
            self.sps = 1000.0 / (self.fixed_ms + self.low)
        return self.sps[start:stop]

    def steps_per_s(self, tokens: np.ndarray) -> np.ndarray:
        """SPS at each B of an integer array."""
        verify = self.low[tokens]
        if self.weight != 0.0:
            verify = verify * (1.0 - self.weight) + self.high[tokens] * self.weight
        return 1000.0 / (self.fixed_ms + verify)


class StepPricer:
    """Quotes steps for one engine: its profile, drafter, host costs and the policy's overhead."""

    def __init__(self, profile: Any, draft_ms: Callable[[int, float, int], float], config: EngineConfig,
                 pays_scheduling: bool) -> None:
        self.draft_ms = draft_ms
        self.host = (config.host_overhead_ms, config.host_overhead_per_request_ms)
        self.scheduling_ms = config.scheduling_overhead_ms if pays_scheduling else 0.0
        self.verify = DenseCurve(profile, config.max_step_tokens)

    @property
    def uses_context(self) -> bool:
        return self.verify.context is not None

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int) -> StepQuote:
        """The price of a step with these requests (all rows, decoding, drafting) and KV context.

        Drafting is priced for `draft_length` drafts per drafting request (the whole block, or
        the length a fixed-length policy set before drafting) at the drafting requests' share
        of the decoding rows' context.
        """
        host_ms = self.host[0] + self.host[1] * batch_requests
        scheduling_ms = self.scheduling_ms if decode_requests else 0.0
        share = context_tokens * drafting / decode_requests if drafting else 0.0
        draft_ms = self.draft_ms(drafting, share, draft_length) if drafting else 0.0
        low, high, weight = self.verify.around(context_tokens)
        return StepQuote(draft_ms, host_ms, scheduling_ms, low, high, weight)
