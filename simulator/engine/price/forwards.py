"""The forward of a step: the kernel time of its verify pass at every B, one strategy per engine chosen at assembly.

Place in the data flow: the pricer (specplan.simulator.engine.price.pricer)
picks one `Forward` when it is built and asks it for every step's quote; the
forward prices its kernels at the step's tokens, requests or ranks and adds
the engine's verify terms after them (specplan.simulator.engine.price.terms:
the mode's charge, the sampler per verified token), so every strategy pays
the same terms. The pricer adds the fixed terms to whatever quote comes back.

    TokenDense      B tokens priced at the profile's row for B (vLLM's graphs pad tokens: row[B] ←
                    row[pad(B)] within the capture list, every mode eager past it): one dense table
                    per (eager or not, mode charge), the verify terms added to it once, read by slices
    RequestPadded   SGLang's graphs pad requests: a step of R requests and B tokens runs
                    ceil(B · pad(R) / R) tokens (price.graphs), its mode's charge at that size
    PerRank         a step whose attention ranks hold different work, or that carries a separate
                    prefill batch, or (where the engine's ranks step in lockstep with their own prompt
                    chunks: `DpScheduler.chunks_per_rank`, vLLM) prompt chunks: it lasts its busiest rank
                    (price.rank_forward); a step that needs no rank apart is the balanced forward's (one
                    of the two above)
"""

from __future__ import annotations

import copy
from typing import Protocol

import numpy as np

from specplan.engines import StepMode
from specplan.hwprofiles.dense import DenseCurve
from specplan.simulator.engine.price.graphs import CaptureSizes, padded_tokens
from specplan.simulator.engine.price.quote import ArrayQuote, StepQuote
from specplan.simulator.engine.price.rank_forward import RankForward
from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.engine.price.rank_split import RankSplit
from specplan.simulator.engine.price.terms import ForwardRun, StepTerm, add_verify
from specplan.simulator.engine.step_modes import ModeCharge, StepModes


class Forward(Protocol):
    """A step's verify pass at every B, with the engine's verify terms added after its kernels."""

    def quote(self, context_tokens: int, decode_requests: int, mode: StepMode, charge: ModeCharge,
              load: StepLoad | None) -> StepQuote:
        """The quote of a step (its fixed part still empty): `context_tokens` of KV, `decode_requests` decoding,
        run in `mode` at its `charge`; `load`: the step per attention rank, where the engine prices ranks."""
        ...


class TokenDense:
    """The token axis: a dense table over B per (eager or not, charge), the verify terms added to its rows once."""

    def __init__(self, kernels: DenseCurve, graphs: CaptureSizes | None, modes: StepModes, moe: RankSplit | None,
                 terms: tuple[StepTerm, ...]) -> None:
        self.kernels, self.graphs, self.modes, self.moe, self.terms = kernels, graphs, modes, moe, terms
        self.tables: dict[tuple[bool, ModeCharge], DenseCurve] = {}

    def quote(self, context_tokens: int, decode_requests: int, mode: StepMode, charge: ModeCharge,
              load: StepLoad | None) -> StepQuote:
        return StepQuote(*self.table(mode.mode == "eager", charge).around(context_tokens))

    def table(self, eager: bool, charge: ModeCharge) -> DenseCurve:
        key = (eager, charge)
        table = self.tables.get(key)
        if table is None:
            table = self.tables[key] = self.priced(eager, charge)
        return table

    def priced(self, eager: bool, charge: ModeCharge) -> DenseCurve:
        """Within the capture list row[B] ← row[pad(B)] (row[B] when eager) in the mode's charge, past its
        largest size row[B] in the eager charge; without graphs the profile's rows; the verify terms at every B."""
        table = copy.copy(self.kernels)
        kernels, graphs, beyond = table.rows, self.graphs, self.modes.beyond
        tokens = np.arange(kernels.shape[1])
        moe = None if self.moe is None else self.moe.shared_at(tokens)
        if graphs is None or beyond is None:
            table.rows = add_verify(self.terms, kernels, ForwardRun(tokens, charge, moe))
            return table
        index = tokens if eager else graphs.pad_index(tokens.size)
        within = add_verify(self.terms, kernels[:, index], ForwardRun(tokens, charge, None if moe is None
                                                                      else moe[index]))
        past = add_verify(self.terms, kernels, ForwardRun(tokens, self.modes.charge(beyond, False), moe))
        table.rows = np.where(tokens > graphs.largest, past, within)
        return table


class PaddedQuote(ArrayQuote):
    """A quote whose verify forward is padded to a captured number of requests, priced in its mode (`moe`: the
    profile's MoE block, for DeepEP's normal mode), with the verify terms after it."""

    __slots__ = ("charge", "moe", "padded", "requests", "terms")

    def __init__(self, low: np.ndarray, high: np.ndarray, weight: float, requests: int, padded: int,
                 charge: ModeCharge, moe: RankSplit | None, terms: tuple[StepTerm, ...]) -> None:
        super().__init__(low, high, weight)
        self.requests, self.padded, self.charge, self.moe, self.terms = requests, padded, charge, moe, terms

    def verify_at(self, tokens: np.ndarray) -> np.ndarray:
        """verify_ms of each B in `tokens`: the kernels at its padded B, then the terms."""
        tokens = np.asarray(tokens)
        padded = padded_tokens(tokens, self.requests, self.padded)
        moe = None if self.moe is None else self.moe.shared_at(padded)
        return add_verify(self.terms, self.dense_at(padded), ForwardRun(tokens, self.charge, moe))


class RequestPadded:
    """The request axis: a step of R requests pads to the next captured size (in a graph; eager runs R)."""

    def __init__(self, kernels: DenseCurve, graphs: CaptureSizes, moe: RankSplit | None,
                 terms: tuple[StepTerm, ...]) -> None:
        self.kernels, self.graphs, self.moe, self.terms = kernels, graphs, moe, terms

    def quote(self, context_tokens: int, decode_requests: int, mode: StepMode, charge: ModeCharge,
              load: StepLoad | None) -> StepQuote:
        padded = self.graphs.pad(decode_requests) if mode.mode == "graph" else decode_requests
        return PaddedQuote(*self.kernels.around(context_tokens), decode_requests, padded, charge,
                           self.moe if charge.moe_scale else None, self.terms)


class RankQuote(ArrayQuote):
    """A quote priced per attention rank (`RankForward`): a decode step is the balanced quote (its terms in it)
    plus what the busiest rank adds; a step with a prefill batch is the ranks' forward with the terms after it
    (its mode's `charge`: what a prefill-containing step pays, explicitly)."""

    __slots__ = ("balanced", "charge", "forward", "terms")

    def __init__(self, balanced: StepQuote, forward: RankForward, charge: ModeCharge,
                 terms: tuple[StepTerm, ...]) -> None:
        super().__init__(balanced.low, balanced.high, balanced.weight)
        self.balanced, self.forward, self.charge, self.terms = balanced, forward, charge, terms

    def verify_at(self, tokens: np.ndarray) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=np.int64)
        forward = self.forward
        if forward.prefilling:
            return add_verify(self.terms, forward.prefill_ms(tokens), ForwardRun(tokens, self.charge, None))
        return self.balanced.verify_at(tokens) + forward.busiest_ms(tokens) - forward.even_ms(tokens)

    def plain_ms(self, requests: int) -> float:
        """A plain step spread evenly: the balanced quote's."""
        return self.balanced.verify_ms(requests)

    def excess_ms(self, tokens: int) -> float:
        """What the busiest rank adds at B over the same forward spread evenly (the summary's imbalance)."""
        return self.forward.excess_ms(tokens)


class PerRank:
    """Ranks priced apart: a step with a prefill batch, or decoding ranks a split profile tells apart, or (with
    `chunks_per_rank`: each rank runs its own prompt chunks in lockstep) ranks holding prompt chunks, lasts its
    busiest rank; any other step is the balanced forward's."""

    def __init__(self, balanced: Forward, ranks: int, decode: RankSplit, prefill: RankSplit | None,
                 terms: tuple[StepTerm, ...], chunks_per_rank: bool = False) -> None:
        self.balanced, self.ranks, self.decode, self.prefill, self.terms = balanced, ranks, decode, prefill, terms
        self.chunks_per_rank = chunks_per_rank

    def quote(self, context_tokens: int, decode_requests: int, mode: StepMode, charge: ModeCharge,
              load: StepLoad | None) -> StepQuote:
        quote = self.balanced.quote(context_tokens, decode_requests, mode, charge, load)
        if load is None or not self.by_rank(load):
            return quote
        forward = RankForward(load, self.ranks, self.decode, self.prefill)
        return RankQuote(quote, forward, charge, self.terms)

    def by_rank(self, load: StepLoad) -> bool:
        """Whether a step is priced per rank: a prefill batch in it, or ranks a split profile tells apart that
        decode (or, with `chunks_per_rank`, hold prompt chunks)."""
        if load.prefilling:
            return True
        running = load.anchors.any() or (self.chunks_per_rank and load.fixed.any())
        return self.ranks > 1 and self.decode.divides and bool(running)
