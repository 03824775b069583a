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

**How the step runs** (specplan.simulator.engine.step_modes): each quote asks
the engine's mode rule for the step's mode (graph, piecewise or eager, why,
and the all-to-all mode) and prices it so, in the one quote both the clock and
Θ read: a token-axis engine's dense table is kept per mode within the capture
list (graph: the padded row; piecewise: at least attention's launches; eager:
at least every kernel's launch), every mode running eager past the largest
size; a request-axis quote (`PaddedQuote`) and a quote with a prefill batch
(`LoadQuote`) apply their mode's `ModeCharge` to the forward they price. A
quote carries its mode (`mode_at(B)`), which the step's plan records.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Protocol

import numpy as np

from specplan.engines import StepMode
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.dense import DenseCurve
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.graphs import padded_tokens, widest_padded
from specplan.simulator.engine.rank_load import StepLoad
from specplan.simulator.engine.rank_price import RankForward
from specplan.simulator.engine.rank_split import RankSplit
from specplan.simulator.engine.step_modes import (
    NO_CHARGE,
    NO_LIMIT,
    UNMODELLED,
    ModeCharge,
    StepModes,
    apply_charge,
    step_modes,
)


class StepQuote:
    """The price of one step of a known batch, as a function of its verify tokens B."""

    __slots__ = ("beyond", "draft_ms", "fixed_ms", "high", "host_ms", "largest", "low", "mode", "redraft_with",
                 "scheduling_ms", "sps", "weight")

    def __init__(self, draft_ms: float, host_ms: float, scheduling_ms: float, low: np.ndarray,
                 high: np.ndarray, weight: float) -> None:
        self.draft_ms, self.host_ms, self.scheduling_ms = draft_ms, host_ms, scheduling_ms
        self.fixed_ms = draft_ms + host_ms + scheduling_ms
        self.low, self.high, self.weight = low, high, weight
        self.sps: np.ndarray | None = None  # SPS at every B, made on first use (a quote is reused per batch shape)
        self.redraft_with: Callable[[int, int | None], StepQuote] | None = None
        self.mode: StepMode = UNMODELLED     # how the step runs (within the capture list on the token axis)
        self.beyond: StepMode | None = None  # and past its largest size (token axis)
        self.largest = NO_LIMIT

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


class PaddedQuote(ArrayQuote):
    """A quote whose verify forward is padded to a captured number of requests (a request-axis graph rule), priced
    in its mode (`charge`; `moe`: the profile's MoE block, for DeepEP's normal mode)."""

    __slots__ = ("charge", "moe", "padded", "requests")

    def __init__(self, draft_ms: float, host_ms: float, scheduling_ms: float, low: np.ndarray, high: np.ndarray,
                 weight: float, requests: int, padded: int, charge: ModeCharge = NO_CHARGE,
                 moe: RankSplit | None = None) -> None:
        super().__init__(draft_ms, host_ms, scheduling_ms, low, high, weight)
        self.requests, self.padded, self.charge, self.moe = requests, padded, charge, moe

    def verify_at(self, tokens: np.ndarray) -> np.ndarray:
        """verify_ms at the padded B of each B in `tokens`, with its mode's charge."""
        padded = padded_tokens(np.asarray(tokens), self.requests, self.padded)
        verify = super().verify_at(padded)
        if self.charge.free:
            return verify
        return apply_charge(verify, self.charge, None if self.moe is None else self.moe.shared_at(padded))


class LoadQuote(ArrayQuote):
    """A quote whose forward is priced per attention rank (`RankForward`): the fixed parts of `base`, the
    forward of its busiest rank. A decode step's forward is the base quote's (its mode priced there) plus what
    the busiest rank adds; a step with a prefill batch is priced here whole, so its mode's `charge` applies
    here (what a prefill-containing step pays, explicitly)."""

    __slots__ = ("charge", "forward")

    def __init__(self, base: StepQuote, forward: RankForward, charge: ModeCharge = NO_CHARGE) -> None:
        super().__init__(base.draft_ms, base.host_ms, base.scheduling_ms, base.low, base.high, base.weight)
        self.forward = forward
        self.charge = charge if forward.prefill_own.size else NO_CHARGE
        self.with_mode(base.mode, base.beyond, base.largest)

    def verify_at(self, tokens: np.ndarray) -> np.ndarray:
        verify = self.forward.ms(np.asarray(tokens, dtype=np.int64))
        return verify if self.charge.free else apply_charge(verify, self.charge, None)

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
    """How the decode core asks for a step's quote: cached by the batch's shape where nothing else changes it.

    `prefill_tokens`: prompt tokens the step computes (its mode may depend on them)."""

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, load: StepLoad | None, prefill_tokens: int = 0) -> StepQuote: ...

    def drafted(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int, widest: int,
                positions: int, load: StepLoad | None, prefill_tokens: int = 0) -> StepQuote:
        """The step with drafting priced at `positions` drafts in all, `widest` per request at most."""
        ...


class FreshQuotes:
    """Every step quoted anew: the price reads the batch's KV context or its per-rank load."""

    def __init__(self, pricer: StepPricer) -> None:
        self.pricer = pricer

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, load: StepLoad | None, prefill_tokens: int = 0) -> StepQuote:
        return self.pricer.quote(batch_requests, decode_requests, drafting, context_tokens, draft_length, load=load,
                                 prefill_tokens=prefill_tokens)

    def drafted(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int, widest: int,
                positions: int, load: StepLoad | None, prefill_tokens: int = 0) -> StepQuote:
        return self.pricer.quote(batch_requests, decode_requests, drafting, context_tokens, widest, positions, load,
                                 prefill_tokens)


class CachedQuotes(FreshQuotes):
    """A price that depends on the batch's shape alone (no context axis, no per-rank load): one quote per shape
    (and per whether it computes prompt tokens, which may change its mode)."""

    def __init__(self, pricer: StepPricer) -> None:
        super().__init__(pricer)
        self.quotes: dict[tuple[int, int, int, int, bool], StepQuote] = {}

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, load: StepLoad | None, prefill_tokens: int = 0) -> StepQuote:
        key = (batch_requests, decode_requests, drafting, draft_length, prefill_tokens > 0)
        quote = self.quotes.get(key)
        if quote is None:
            quote = self.quotes[key] = self.pricer.quote(batch_requests, decode_requests, drafting, 0, draft_length,
                                                         prefill_tokens=prefill_tokens)
        return quote


def quote_book(pricer: StepPricer, drafting_reads_context: bool) -> QuoteBook:
    """Cached quotes when neither the verify price nor drafting reads the step's context or load."""
    if pricer.loads or pricer.uses_context or drafting_reads_context:
        return FreshQuotes(pricer)
    return CachedQuotes(pricer)


class StepPricer:
    """Quotes steps for one engine: its profile, drafter, host costs, the policy's overhead and the engine's mode
    rule (`modes`, default: the engine's for a policy that sets one length for every request)."""

    def __init__(self, profile: StepProfile, draft_ms: Callable[[int, float, int, int | None], float], config: EngineConfig,
                 pays_scheduling: bool, redrafts: bool = True, modes: StepModes | None = None) -> None:
        self.draft_ms = draft_ms
        self.redrafts = redrafts  # drafting cost depends on how many positions are drafted
        self.host = (config.engine.host_overhead_ms, config.engine.host_overhead_per_request_ms)
        self.spec_fraction = config.spec_step_fraction
        self.spec_cycle_ms = config.spec_cycle_ms
        self.scheduling_ms = config.engine.scheduling_overhead_ms if pays_scheduling else 0.0
        self.graphs = config.graphs
        self.pads_requests = config.graphs is not None and config.graph_axis == "requests"
        self.modes = step_modes(config) if modes is None else modes
        self.sampling_ms_per_token = config.engine.sampling_ms_per_token
        self.ranks = 1 if config.dp is None else config.dp.ranks
        self.loads = config.dp is not None or (config.chunked and config.prefill_schedule == "separate")
        reach = load_reach(config)
        self.moe_split = RankSplit(profile, max(reach, self.kernel_reach(config))) if self.modes.needs_moe_split \
            else None
        self.kernels = self.kernel_curve(profile, config)
        self.curves: dict[tuple[bool, ModeCharge], DenseCurve] = {}
        self.decode_split = self.prefill_split = None
        if self.loads:
            self.decode_split = RankSplit(profile, reach)
            source = getattr(config.engine.prefill, "profile", None)
            self.prefill_split = None if source is None else RankSplit(load_profile(source), reach)

    def kernel_reach(self, config: EngineConfig) -> int:
        """The most tokens a verify lookup asks for: the budget, or an SGLang-padded step's widest."""
        if self.pads_requests:
            assert self.graphs is not None
            return max(widest_padded(config.max_step_tokens, self.graphs), config.max_step_tokens)
        return config.max_step_tokens

    def kernel_curve(self, profile: StepProfile, config: EngineConfig) -> DenseCurve:
        """The profile's forward at every B (a request-axis rule reads it at the padded B, so it reaches the
        widest padded step; with the sampler's time per verified token there, as the forward runs it)."""
        stop = config.max_step_tokens
        if not self.pads_requests:
            return DenseCurve(profile, stop)
        widest = self.kernel_reach(config)
        curve = DenseCurve(profile, widest, beyond="proportional" if widest > stop else "error")
        return self.sampled(curve)

    def sampled(self, curve: DenseCurve) -> DenseCurve:
        """The sampler's time per verified token added to every row."""
        if self.sampling_ms_per_token:
            curve.rows = curve.rows + self.sampling_ms_per_token * np.arange(curve.rows.shape[1])
        return curve

    def curve(self, mode: StepMode, charge: ModeCharge) -> DenseCurve:
        """The dense verify table a quote of this mode reads, made once per (padded or eager, charge): on the token
        axis the forward within the capture list in its mode and every mode eager past it, with the sampler per
        token; on the request axis the forward itself (a request-axis quote pads and charges per quote)."""
        if self.pads_requests:
            return self.kernels
        key = (mode.mode == "eager", charge)
        curve = self.curves.get(key)
        if curve is None:
            curve = self.curves[key] = self.sampled(self.token_curve(*key))
        return curve

    def token_curve(self, eager: bool, charge: ModeCharge) -> DenseCurve:
        """A token-axis table: within the capture list row[B] ← row[pad(B)] (row[B] when eager) with the mode's
        charge, past its largest size row[B] with the eager charge; without graphs the profile's rows."""
        curve = copy.copy(self.kernels)
        graphs, beyond = self.graphs, self.modes.beyond
        if graphs is None or beyond is None:
            return curve
        kernels = curve.rows
        stop = kernels.shape[1]
        moe = None if self.moe_split is None else self.moe_split.shared_at(np.arange(stop))
        index = np.arange(stop) if eager else graphs.pad_index(stop)
        within = apply_charge(kernels[:, index], charge, None if moe is None else moe[index])
        past = apply_charge(kernels, self.modes.charge(beyond, False), moe)
        curve.rows = np.where(np.arange(stop) > graphs.largest, past, within)
        return curve

    @property
    def uses_context(self) -> bool:
        return self.kernels.context is not None

    def quote(self, batch_requests: int, decode_requests: int, drafting: int, context_tokens: int,
              draft_length: int, positions: int | None = None, load: StepLoad | None = None,
              prefill_tokens: int = 0) -> StepQuote:
        """The price of a step with these requests (all rows, decoding, drafting) and KV context.

        Drafting is priced for `draft_length` drafts per drafting request (the whole block, or
        the length a fixed-length policy set before drafting) at the drafting requests' share
        of the decoding rows' context; `positions`: all drafts together when widths differ
        (`draft_length` is then the widest). `load`: the step per attention rank, when the
        engine prices ranks or separate prefill batches (the module docstring); `prefill_tokens`:
        prompt tokens the step computes. The step's mode is decided here (the module docstring).
        """
        host_ms = self.host[0] + self.host[1] * batch_requests + (self.spec_cycle_ms if drafting else 0.0)
        scheduling_ms = self.scheduling_ms if decode_requests else 0.0
        share = context_tokens * drafting / decode_requests if drafting else 0.0
        draft_ms = self.draft_ms(drafting, share, draft_length, positions) if drafting else 0.0
        modes = self.modes
        mode = modes.decide(decode_requests, 1 + draft_length if drafting else 1, prefill_tokens, load)
        extending = bool(prefill_tokens) or (load is not None and bool(load.prefill.any() or load.fixed.any()))
        charge = modes.charge(mode, extending)
        low, high, weight = self.curve(mode, charge).around(context_tokens)
        if self.pads_requests:
            quote: StepQuote = self.padded_quote(draft_ms, host_ms, scheduling_ms, low, high, weight,
                                                 decode_requests, drafting, mode, charge)
        else:
            quote = StepQuote(draft_ms, host_ms, scheduling_ms, low, high, weight)
            if drafting and self.spec_fraction:
                quote.host_ms += self.spec_fraction * quote.verify_ms(decode_requests)
                quote.fixed_ms = quote.draft_ms + quote.host_ms + quote.scheduling_ms
        quote.with_mode(mode, modes.beyond, modes.largest)
        if load is not None and self.by_rank(load):
            assert self.decode_split is not None
            quote = LoadQuote(quote, RankForward(load, self.ranks, self.decode_split, self.prefill_split, quote),
                              charge)
        if drafting and self.redrafts:
            quote.redraft_with = lambda w, n: self.quote(batch_requests, decode_requests, drafting, context_tokens, w,
                                                         n, load, prefill_tokens)
        return quote

    def by_rank(self, load: StepLoad) -> bool:
        """Whether a step is priced per rank: a prefill batch in it, or decoding ranks a split profile tells apart."""
        if load.prefilling:
            return True
        return self.ranks > 1 and self.decode_split is not None and self.decode_split.divides and bool(load.anchors.any())

    def padded_quote(self, draft_ms: float, host_ms: float, scheduling_ms: float, low: np.ndarray,
                     high: np.ndarray, weight: float, requests: int, drafting: int, mode: StepMode,
                     charge: ModeCharge) -> PaddedQuote:
        """SGLang: the quote of a step whose R requests pad to the next captured batch size (in a graph; eager
        runs the R requests as they are)."""
        assert self.graphs is not None
        padded = self.graphs.pad(requests) if mode.mode == "graph" else requests
        quote = PaddedQuote(draft_ms, host_ms, scheduling_ms, low, high, weight, requests, padded, charge,
                            self.moe_split if charge.moe_scale else None)
        if drafting and self.spec_fraction:
            quote.host_ms += self.spec_fraction * quote.verify_ms(requests)
            quote.fixed_ms = quote.draft_ms + quote.host_ms + quote.scheduling_ms
        return quote
