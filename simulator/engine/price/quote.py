"""A step's quote: its fixed part plus its verify time at every B, the one price the clock and every policy's Θ read.

Place in the data flow: a forward (specplan.simulator.engine.price.forwards)
makes the quote of a step with its verify terms in it; the pricer
(specplan.simulator.engine.price.pricer) adds the fixed terms to its three
parts (draft, host, scheduling: steps.csv's draft_ms and overhead_ms) and its
mode. The decode core hands the quote to the policy in the StepView (Θ = τ ·
the quote's steps/s) and charges it at the B the policy chose:
`step_ms(B) = fixed_ms + verify_ms(B)`, `fixed_ms = draft_ms + host_ms +
scheduling_ms`.

    StepQuote    a row of a dense table over B (blended between the profile's two nearest context
                 rows): a quote costs slices, never a per-step interpolation of the profile
    ArrayQuote   a verify time computed at each B asked (`verify_at`); every price at B follows from it
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specplan.engines import StepMode
from specplan.simulator.engine.step_modes import NO_LIMIT, UNMODELLED


class StepQuote:
    """The price of one step of a known batch, as a function of its verify tokens B (a dense row)."""

    __slots__ = ("beyond", "draft_ms", "fixed_ms", "high", "host_ms", "largest", "low", "mode", "redraft_with",
                 "scheduling_ms", "sps", "weight")

    def __init__(self, low: np.ndarray, high: np.ndarray, weight: float) -> None:
        self.draft_ms = self.host_ms = self.scheduling_ms = self.fixed_ms = 0.0  # the fixed terms add to them
        self.low, self.high, self.weight = low, high, weight
        self.sps: np.ndarray | None = None  # SPS at every B, made on first use (a quote is reused per batch shape)
        self.redraft_with: Callable[[int, int | None], StepQuote] | None = None
        self.mode: StepMode = UNMODELLED     # how the step runs (within the capture list on the token axis)
        self.beyond: StepMode | None = None  # and past its largest size (token axis)
        self.largest = NO_LIMIT

    def fixed(self) -> StepQuote:
        """The fixed part, once the fixed terms have added to its parts."""
        self.fixed_ms = self.draft_ms + self.host_ms + self.scheduling_ms
        return self

    def plain_ms(self, requests: int) -> float:
        """The verify time of a plain step of one token per decoding request, spread evenly over the ranks."""
        return self.verify_ms(requests)

    def mode_at(self, tokens: int) -> StepMode:
        """How the step runs at B = `tokens` (specplan.simulator.engine.step_modes)."""
        return self.mode if tokens <= self.largest or self.beyond is None else self.beyond

    def with_mode(self, mode: StepMode, beyond: StepMode | None, largest: int) -> StepQuote:
        self.mode, self.beyond, self.largest = mode, beyond, largest
        return self

    def excess_ms(self, tokens: int) -> float:
        """What the busiest attention rank adds at B over an even spread (0: the step is priced whole)."""
        return 0.0

    @property
    def redrafts(self) -> bool:
        """Whether drafting's price depends on how many positions are drafted (`redraft` reprices it)."""
        return self.redraft_with is not None

    def redraft(self, widest: int, positions: int | None = None) -> StepQuote:
        """The same step with drafting priced at `positions` drafts in all (default: `widest` per request)."""
        return self if self.redraft_with is None else self.redraft_with(widest, positions)

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
        return 1000.0 / (self.fixed_ms + self.verify_at(tokens))

    def verify_at(self, tokens: np.ndarray) -> np.ndarray:
        """verify_ms at each B of an integer array."""
        verify = self.low[tokens]
        if self.weight != 0.0:
            verify = verify * (1.0 - self.weight) + self.high[tokens] * self.weight
        return verify


class ArrayQuote(StepQuote):
    """A quote whose verify time is computed at each B (`verify_at`), not read from a dense row: every price at B
    follows from it."""

    __slots__ = ()

    def verify_ms_range(self, start: int, stop: int) -> np.ndarray:
        return self.verify_at(np.arange(start, stop))

    def verify_ms(self, tokens: int) -> float:
        return float(self.verify_at(np.array([tokens]))[0])

    def steps_per_s_range(self, start: int, stop: int) -> np.ndarray:
        return 1000.0 / (self.fixed_ms + self.verify_ms_range(start, stop))

    def steps_per_s(self, tokens: np.ndarray) -> np.ndarray:
        return 1000.0 / (self.fixed_ms + self.verify_at(np.asarray(tokens)))

    def dense_at(self, tokens: np.ndarray) -> np.ndarray:
        """The dense row's verify time at each B (blended between its two context rows)."""
        return super().verify_at(tokens)
