"""The price of one engine step: the one function the engine's clock and every policy's Θ call.

docs/model/index.md: SPS(B) is the rate of the *whole* step the engine runs for
the batch at hand,

    step_ms(B) = draft_ms(drafting requests)                the drafter's forwards
               + verify_ms(B, KV context of the batch)      the target's forward (profile lookup)
                 + sampling_ms_per_token · B                  the sampler, per verified token
               + host_ms = host_overhead_ms + host_overhead_per_request_ms · requests
                         + spec_step_fraction · verify_ms(R) + spec_cycle_ms   when the step drafts
                                                                               (engine.host)
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

CUDA graphs (`engine.cuda_graph`, specplan.simulator.engine.graphs) change
verify_ms, never its callers: vLLM's graphs pad tokens, so the dense table
itself is rewritten once (row[B] ← row[pad(B)], + the eager surcharge past
the largest size); SGLang's pad requests, so a quote of R requests
(`PaddedQuote`) reads row[ceil(B · pad(R) / R)]. Either way the policy's
Θ and the clock read the same padded price.

A step whose attention ranks hold different work, or that carries a
separate prefill batch (`engine.prefill.schedule: separate`), is priced per
rank from the step's `StepLoad` (specplan.simulator.engine.rank_load): the
forward lasts its busiest rank (`LoadQuote`, specplan.simulator.engine.rank_price),
its prefill ranks priced from the prefill profile (`engine.prefill.profile`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.dense import DenseCurve
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.graphs import padded_tokens, widest_padded
from specplan.simulator.engine.rank_load import StepLoad
from specplan.simulator.engine.rank_price import RankForward
from specplan.simulator.engine.rank_split import RankSplit


class StepQuote:
    """The price of one step of a known batch, as a function of its verify tokens B."""

    __slots__ = ("draft_ms", "fixed_ms", "high", "host_ms", "low", "redraft_with", "scheduling_ms", "sps", "weight")

    def __init__(self, draft_ms: float, host_ms: float, scheduling_ms: float, low: np.ndarray,
                 high: np.ndarray, weight: float) -> None:
        self.draft_ms, self.host_ms, self.scheduling_ms = draft_ms, host_ms, scheduling_ms
        self.fixed_ms = draft_ms + host_ms + scheduling_ms
        self.low, self.high, self.weight = low, high, weight
        self.sps: np.ndarray | None = None  # SPS at every B, made on first use (a quote is reused per batch shape)
        self.redraft_with: Callable[[int, int | None], StepQuote] | None = None

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


class PaddedQuote(ArrayQuote):
    """A quote whose verify forward is padded to a captured number of requests (a request-axis graph rule)."""

    __slots__ = ("eager_ms", "padded", "requests")

    def __init__(self, draft_ms: float, host_ms: float, scheduling_ms: float, low: np.ndarray, high: np.ndarray,
                 weight: float, requests: int, padded: int, eager_ms: float) -> None:
        super().__init__(draft_ms, host_ms, scheduling_ms, low, high, weight)
        self.requests, self.padded, self.eager_ms = requests, padded, eager_ms

    def verify_at(self, tokens: np.ndarray) -> np.ndarray:
        """verify_ms at the padded B of each B in `tokens`."""
        return super().verify_at(padded_tokens(np.asarray(tokens), self.requests, self.padded)) + self.eager_ms


class LoadQuote(ArrayQuote):
    """A quote whose forward is priced per attention rank (`RankForward`): the fixed parts of `base`, the
    forward of its busiest rank."""

    __slots__ = ("forward",)

    def __init__(self, base: StepQuote, forward: RankForward) -> None:
        super().__init__(base.draft_ms, base.host_ms, base.scheduling_ms, base.low, base.high, base.weight)
        self.forward = forward

    def verify_at(self, tokens: np.ndarray) -> np.ndarray:
        return self.forward.ms(np.asarray(tokens, dtype=np.int64))

    def excess_ms(self, tokens: int) -> float:
        """What the busiest rank adds at B over the same forward spread evenly (the summary's imbalance)."""
        return self.forward.excess_ms(tokens)


def load_reach(config: EngineConfig) -> int:
    """The most tokens a per-rank lookup asks for: every rank's cap or chunk at once, or the budget and the chunks."""
    dp = config.dp
    chunks = (config.chunk_tokens or 0) if dp is None else dp.ranks * dp.chunk_tokens
    ranks_cap = 0 if dp is None else dp.ranks * dp.step_tokens
    return max(config.max_step_tokens + chunks, ranks_cap, chunks)


class QuoteBook(Protocol):
    """How the decode core asks for a step's quote: cached by the batch's shape where nothing else changes it."""

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, load: StepLoad | None) -> StepQuote: ...

    def drafted(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int, widest: int,
                positions: int, load: StepLoad | None) -> StepQuote:
        """The step with drafting priced at `positions` drafts in all, `widest` per request at most."""
        ...


class FreshQuotes:
    """Every step quoted anew: the price reads the batch's KV context or its per-rank load."""

    def __init__(self, pricer: StepPricer) -> None:
        self.pricer = pricer

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, load: StepLoad | None) -> StepQuote:
        return self.pricer.quote(batch_requests, decode_requests, drafting, context_tokens, draft_length, load=load)

    def drafted(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int, widest: int,
                positions: int, load: StepLoad | None) -> StepQuote:
        return self.pricer.quote(batch_requests, decode_requests, drafting, context_tokens, widest, positions, load)


class CachedQuotes(FreshQuotes):
    """A price that depends on the batch's shape alone (no context axis, no per-rank load): one quote per shape."""

    def __init__(self, pricer: StepPricer) -> None:
        super().__init__(pricer)
        self.quotes: dict[tuple[int, int, int, int], StepQuote] = {}

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, load: StepLoad | None) -> StepQuote:
        key = (batch_requests, decode_requests, drafting, draft_length)
        quote = self.quotes.get(key)
        if quote is None:
            quote = self.quotes[key] = self.pricer.quote(batch_requests, decode_requests, drafting, 0, draft_length)
        return quote


def quote_book(pricer: StepPricer, drafting_reads_context: bool) -> QuoteBook:
    """Cached quotes when neither the verify price nor drafting reads the step's context or load."""
    if pricer.loads or pricer.uses_context or drafting_reads_context:
        return FreshQuotes(pricer)
    return CachedQuotes(pricer)


class StepPricer:
    """Quotes steps for one engine: its profile, drafter, host costs and the policy's overhead."""

    def __init__(self, profile: StepProfile, draft_ms: Callable[[int, float, int, int | None], float], config: EngineConfig,
                 pays_scheduling: bool, redrafts: bool = True) -> None:
        self.draft_ms = draft_ms
        self.redrafts = redrafts  # drafting cost depends on how many positions are drafted
        self.host = (config.engine.host_overhead_ms, config.engine.host_overhead_per_request_ms)
        self.spec_fraction = config.spec_step_fraction
        self.spec_cycle_ms = config.spec_cycle_ms
        self.scheduling_ms = config.engine.scheduling_overhead_ms if pays_scheduling else 0.0
        self.graphs = config.graphs
        self.pads_requests = config.graphs is not None and config.graph_axis == "requests"
        self.verify = self.verify_curve(profile, config)
        self.ranks = 1 if config.dp is None else config.dp.ranks
        self.loads = config.dp is not None or (config.chunked and config.prefill_schedule == "separate")
        self.decode_split = self.prefill_split = None
        if self.loads:
            reach = load_reach(config)
            self.decode_split = RankSplit(profile, reach)
            source = getattr(config.engine.prefill, "profile", None)
            self.prefill_split = None if source is None else RankSplit(load_profile(source), reach)

    def verify_curve(self, profile: StepProfile, config: EngineConfig) -> DenseCurve:
        """The dense verify table, with every term that grows with B: the profile's forward, a token-axis graph
        rule's padding (row[B] ← row[pad(B)] + eager) and the sampler's time per verified token."""
        curve = self.padded_curve(profile, config)
        per_token = config.engine.sampling_ms_per_token
        if per_token:
            curve.rows = curve.rows + per_token * np.arange(curve.rows.shape[1])
        return curve

    def padded_curve(self, profile: StepProfile, config: EngineConfig) -> DenseCurve:
        graphs, stop = self.graphs, config.max_step_tokens
        if graphs is None:
            return DenseCurve(profile, stop)
        if self.pads_requests:
            widest = widest_padded(stop, graphs)
            return DenseCurve(profile, widest, beyond="proportional" if widest > stop else "error")
        curve = DenseCurve(profile, stop)
        curve.rows = curve.rows[:, graphs.pad_index(stop + 1)] + graphs.eager_ms(stop + 1)
        return curve

    @property
    def uses_context(self) -> bool:
        return self.verify.context is not None

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, positions: int | None = None, load: StepLoad | None = None) -> StepQuote:
        """The price of a step with these requests (all rows, decoding, drafting) and KV context.

        Drafting is priced for `draft_length` drafts per drafting request (the whole block, or
        the length a fixed-length policy set before drafting) at the drafting requests' share
        of the decoding rows' context; `positions`: all drafts together when widths differ
        (`draft_length` is then the widest). `load`: the step per attention rank, when the
        engine prices ranks or separate prefill batches (the module docstring).
        """
        host_ms = self.host[0] + self.host[1] * batch_requests + (self.spec_cycle_ms if drafting else 0.0)
        scheduling_ms = self.scheduling_ms if decode_requests else 0.0
        share = context_tokens * drafting / decode_requests if drafting else 0.0
        draft_ms = self.draft_ms(drafting, share, draft_length, positions) if drafting else 0.0
        low, high, weight = self.verify.around(context_tokens)
        if self.pads_requests:
            quote: StepQuote = self.padded_quote(draft_ms, host_ms, scheduling_ms, low, high, weight,
                                                 decode_requests, drafting)
        else:
            quote = StepQuote(draft_ms, host_ms, scheduling_ms, low, high, weight)
            if drafting and self.spec_fraction:
                quote.host_ms += self.spec_fraction * quote.verify_ms(decode_requests)
                quote.fixed_ms = quote.draft_ms + quote.host_ms + quote.scheduling_ms
        if load is not None and self.by_rank(load):
            assert self.decode_split is not None
            quote = LoadQuote(quote, RankForward(load, self.ranks, self.decode_split, self.prefill_split, quote))
        if drafting and self.redrafts:
            quote.redraft_with = lambda w, n: self.quote(batch_requests, decode_requests, drafting, context_tokens, w,
                                                         n, load)
        return quote

    def by_rank(self, load: StepLoad) -> bool:
        """Whether a step is priced per rank: a prefill batch in it, or decoding ranks a split profile tells apart."""
        if load.prefilling:
            return True
        return self.ranks > 1 and self.decode_split is not None and self.decode_split.divides and bool(load.anchors.any())

    def padded_quote(self, draft_ms: float, host_ms: float, scheduling_ms: float, low: np.ndarray,
                     high: np.ndarray, weight: float, requests: int, drafting: int) -> PaddedQuote:
        """SGLang: the quote of a step whose R requests pad to the next captured batch size."""
        assert self.graphs is not None
        padded = self.graphs.pad(requests)
        eager_ms = self.graphs.eager_overhead_ms if requests > self.graphs.largest else 0.0
        quote = PaddedQuote(draft_ms, host_ms, scheduling_ms, low, high, weight, requests, padded, eager_ms)
        if drafting and self.spec_fraction:
            quote.host_ms += self.spec_fraction * quote.verify_ms(requests)
            quote.fixed_ms = quote.draft_ms + quote.host_ms + quote.scheduling_ms
        return quote
