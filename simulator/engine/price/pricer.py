"""The price of one engine step: the one function the engine's clock and every policy's Θ call.

docs/model/index.md: SPS(B) is the rate of the *whole* step the engine runs for
the batch at hand,

    step_ms(B) = forward(B)                 the target's verify pass: the profile at B and the step's KV
                                            context, as the engine runs it (price.forwards)
                 + the verify terms at B    its mode's charge, the sampler per verified token (price.terms)
               + the fixed terms            host, a speculating step's host cycle, the policy's scheduling,
                                            the drafter's forwards (price.terms)

The pricer is built once per engine: it reads the profile into dense tables
over B (`specplan.hwprofiles.dense.DenseCurve`, so a quote costs a scalar
bisection and its lookups are slices), builds the engine's terms
(`step_terms`), and picks one forward (`engine_forward`):

    TokenDense      no graphs, or vLLM's token-axis graphs (the dense table rewritten per mode)
    RequestPadded   SGLang's request-axis graphs (a quote of R requests reads row[ceil(B · pad(R) / R)])
    PerRank         data-parallel attention or separate prefill batches, over one of the two: a step
                    lasts its busiest rank (price.rank_forward), its prefill ranks priced from the
                    prefill profile (`engine.prefill.profile`); where the engine's DP ranks run their
                    own prompt chunks in lockstep (its row's `dp_scheduler.chunks_per_rank`: vLLM), a
                    step of prompt chunks too, whether or not a row decodes

Each quote asks the engine's mode rule (specplan.simulator.engine.step_modes)
for the step's mode and charge, has the forward price its verify pass with
the verify terms after it, and adds the fixed terms to its parts: the same
terms whichever forward ran. A quote carries its mode (`mode_at(B)`), which
the step's plan records; the decode core asks the quote book for a quote per
step, hands it to the policy (Θ = τ · quote's steps/s) and charges it at the
B the policy chose: policy and clock cannot diverge.
"""

from __future__ import annotations

from typing import Protocol

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.dense import DenseCurve
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.price.forwards import Forward, PerRank, RequestPadded, TokenDense
from specplan.simulator.engine.price.graphs import widest_padded
from specplan.simulator.engine.price.quote import StepQuote
from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.engine.price.rank_split import RankSplit
from specplan.simulator.engine.price.terms import (
    DraftMs,
    PriceSetup,
    StepFacts,
    StepTerm,
    step_terms,
)
from specplan.simulator.engine.step_modes import StepModes, step_modes


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
    """Quotes steps for one engine: its profile, its forward, its terms (default: the engine's, `step_terms`) and
    its mode rule (`modes`, default: the engine's for a policy that sets one length for every request)."""

    def __init__(self, profile: StepProfile, draft_ms: DraftMs, config: EngineConfig, pays_scheduling: bool,
                 redrafts: bool = True, modes: StepModes | None = None,
                 terms: tuple[StepTerm, ...] | None = None) -> None:
        self.redrafts = redrafts  # drafting cost depends on how many positions are drafted
        self.graphs = config.graphs
        self.pads_requests = config.graphs is not None and config.graph_axis == "requests"
        self.modes = step_modes(config) if modes is None else modes
        self.ranks = 1 if config.dp is None else config.dp.ranks
        self.loads = config.dp is not None or (config.chunked and config.prefill_schedule == "separate")
        self.terms = step_terms(PriceSetup(config, draft_ms, pays_scheduling)) if terms is None else terms
        self.fixed_terms = tuple(term for term in self.terms if term.fixes)
        self.kernels = self.kernel_curve(profile, config)
        self.forward = self.engine_forward(profile, config)

    def engine_forward(self, profile: StepProfile, config: EngineConfig) -> Forward:
        """The engine's forward (the module docstring), with its verify terms."""
        verify_terms = tuple(term for term in self.terms if term.verifies)
        reach = load_reach(config)
        moe = RankSplit(profile, max(reach, self.kernel_reach(config))) if self.modes.needs_moe_split else None
        balanced: Forward
        if self.pads_requests:
            assert self.graphs is not None
            balanced = RequestPadded(self.kernels, self.graphs, moe, verify_terms)
        else:
            balanced = TokenDense(self.kernels, self.graphs, self.modes, moe, verify_terms)
        if not self.loads:
            return balanced
        source = getattr(config.engine.prefill, "profile", None)
        prefill = None if source is None else RankSplit(load_profile(source), reach)
        rule = config.serving.dp_scheduler
        chunks_per_rank = rule is not None and rule.chunks_per_rank
        if chunks_per_rank:
            self.check_chunk_reach(profile, config)
        return PerRank(balanced, self.ranks, RankSplit(profile, reach), prefill, verify_terms,
                       chunks_per_rank=chunks_per_rank)

    def check_chunk_reach(self, profile: StepProfile, config: EngineConfig) -> None:
        """Mixed prompt chunks priced per rank read the profile at the ranks' tokens together (the balanced forward)
        and at ranks x a rank's tokens (its own part): refused in one line past the steps the profile prices."""
        dp = config.dp
        if dp is None or not config.chunked or config.prefill_schedule != "mixed":
            return
        together, top = dp.ranks * dp.step_tokens, self.kernels.max_tokens
        if together > top:
            raise ScenarioError("engine.dp_attention.max_step_tokens",
                                f"{config.serving.label}'s {dp.ranks} DP ranks each compute up to {dp.step_tokens:,} "
                                f"tokens of prompt chunks a step ({together:,} together; a rank is priced at "
                                f"{dp.ranks} x its tokens), past the {top:,}-token steps profile {profile.name} "
                                f"prices (engine.max_step_tokens): at most {top // dp.ranks:,} per rank")

    def kernel_reach(self, config: EngineConfig) -> int:
        """The most tokens a verify lookup asks for: the budget, or an SGLang-padded step's widest."""
        if self.pads_requests:
            assert self.graphs is not None
            return max(widest_padded(config.max_step_tokens, self.graphs), config.max_step_tokens)
        return config.max_step_tokens

    def kernel_curve(self, profile: StepProfile, config: EngineConfig) -> DenseCurve:
        """The profile's forward at every B (a request-axis rule reads it at the padded B, so it reaches the
        widest padded step)."""
        stop = config.max_step_tokens
        if not self.pads_requests:
            return DenseCurve(profile, stop)
        widest = self.kernel_reach(config)
        return DenseCurve(profile, widest, beyond="proportional" if widest > stop else "error")

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
        engine prices ranks or separate prefill batches; `prefill_tokens`: prompt tokens the
        step computes. The step's mode is decided here (specplan.simulator.engine.step_modes).
        """
        modes = self.modes
        mode = modes.decide(decode_requests, 1 + draft_length if drafting else 1, prefill_tokens, load)
        extending = bool(prefill_tokens) or (load is not None and bool(load.prefill.any() or load.fixed.any()))
        quote = self.forward.quote(context_tokens, decode_requests, mode, modes.charge(mode, extending), load)
        step = StepFacts(batch_requests, decode_requests, drafting, context_tokens, draft_length, positions)
        for term in self.fixed_terms:
            term.fix(quote, step)
        quote.fixed().with_mode(mode, modes.beyond, modes.largest)
        if drafting and self.redrafts:
            quote.redraft_with = lambda w, n: self.quote(batch_requests, decode_requests, drafting, context_tokens, w,
                                                         n, load, prefill_tokens)
        return quote
