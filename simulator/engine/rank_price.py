"""The forward of a step whose attention ranks hold different work: it lasts as long as its busiest rank.

Place in the data flow: the step price (specplan.simulator.engine.price)
builds a `RankForward` when a step's load (`rank_load.StepLoad`) differs by rank
or carries a separate prefill batch; its `ms(B)` is the quote's verify time
at B tokens, for the policy's Θ and the clock alike. With `ranks` attention
ranks, rank r decoding a_r rows (+ f_r prompt tokens of a mixed step) over
c_r tokens of KV, or prefilling p_r prompt tokens of q_r attention pairs:

    decode-only step   base(B) + max_r own(ranks·b_r(B), ranks·c_r) − own(B, Σ c_r)
                       base: the balanced quote at B (its CUDA-graph padding included), so the
                       busiest rank adds what its own part costs over an even split
    with a prefill     shared_p(B) + max(max_r own(ranks·b_r(B), ranks·c_r),
                                         max_r own_p(ranks·p_r, ranks·q_r))
                       shared_p, own_p: the prefill profile's split (the context phase's MoE block
                       over every rank's tokens; without a prefill profile the decode profile's, at
                       the chunk's tokens and KV); no CUDA graph (SGLang runs a step with an extend
                       batch on any rank eagerly: can_cuda_graph is all-reduced), no padding; the
                       quote then prices it in its mode (price.LoadQuote: at least its launches)

    b_r(B) = a_r + f_r + (B − Σ a − Σ f − Σ p) · a_r / Σ a      the drafts spread over the ranks by
                                                                their decoding rows (exact for fixed ℓ)

(specplan.simulator.engine.rank_split: shared and own.) A rank with nothing
to run runs an idle batch and costs nothing here.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from specplan.simulator.engine.rank_load import StepLoad
from specplan.simulator.engine.rank_split import RankSplit


class BaseForward(Protocol):
    """What a RankForward needs of the balanced quote: its verify time at an array of B."""

    def verify_at(self, tokens: np.ndarray) -> np.ndarray: ...


class RankForward:
    """The forward time of one step at each B (see the module docstring)."""

    def __init__(self, load: StepLoad, ranks: int, decode: RankSplit, prefill: RankSplit | None,
                 base: BaseForward) -> None:
        self.load, self.ranks, self.decode, self.base = load, ranks, decode, base
        self.phase = decode if prefill is None else prefill
        self.fixed_tokens = int(load.anchors.sum() + load.fixed.sum() + load.prefill.sum())
        self.running = ((load.anchors + load.fixed) > 0).nonzero()[0]
        self.prefill_own = self.prefill_ranks_ms()

    def prefill_ranks_ms(self) -> np.ndarray:
        """Each prefilling rank's own part (empty without a prefill)."""
        load = self.load
        prefilling = load.prefill.nonzero()[0]
        if prefilling.size == 0:
            return np.zeros(0)
        axis = load.pairs if self.phase is not self.decode else load.chunk_context
        return np.array([float(self.phase.own_at(np.array([round(self.ranks * int(load.prefill[r]))]),
                                                 self.ranks * float(axis[r]))[0]) for r in prefilling.tolist()])

    def decode_ranks_ms(self, tokens: np.ndarray) -> np.ndarray:
        """(running ranks, B) each decoding rank's own part at each B."""
        load, ranks = self.load, self.ranks
        anchors = int(load.anchors.sum())
        drafts = np.maximum(tokens - self.fixed_tokens, 0)
        out = np.zeros((self.running.size, tokens.size))
        for i, r in enumerate(self.running.tolist()):
            share = drafts * (load.anchors[r] / anchors) if anchors else 0.0
            index = np.rint(ranks * (load.anchors[r] + load.fixed[r] + share)).astype(np.int64)
            out[i] = self.decode.own_at(index, ranks * float(load.context[r]))
        return out

    def ms(self, tokens: np.ndarray) -> np.ndarray:
        """The forward at each B of an integer array."""
        busiest = self.decode_ranks_ms(tokens).max(axis=0, initial=0.0)
        if self.prefill_own.size == 0:
            even = self.decode.own_at(tokens, float(self.load.context.sum()))
            return self.base.verify_at(tokens) + busiest - even
        return self.phase.shared_at(tokens) + np.maximum(busiest, self.prefill_own.max())

    def excess_ms(self, tokens: int) -> float:
        """How much the busiest rank's own part exceeds the mean over the ranks that run, at B."""
        own = np.concatenate([self.decode_ranks_ms(np.array([tokens]))[:, 0], self.prefill_own])
        return float(own.max() - own.mean()) if own.size else 0.0
