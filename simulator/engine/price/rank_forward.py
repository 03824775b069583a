"""The forward of a step whose attention ranks hold different work: it lasts as long as its busiest rank.

Place in the data flow: the per-rank forward (specplan.simulator.engine.price.forwards.PerRank)
builds a `RankForward` when a step's load (`rank_load.StepLoad`) differs by rank
or carries a separate prefill batch (or, where the engine's DP ranks run their own
prompt chunks in lockstep, vLLM's, prompt chunks); the quote it makes reads it at every B,
for the policy's Θ and the clock alike. With `ranks` attention
ranks, rank r decoding a_r rows (+ f_r prompt tokens of a mixed step) over
c_r tokens of KV, or prefilling p_r prompt tokens of q_r attention pairs:

    no prefill batch   balanced(B) + max_r own(ranks·b_r(B), ranks·c_r) − own(B, Σ c_r)
                       balanced: the balanced quote at B (its CUDA-graph padding and its terms
                       included), so the busiest rank adds what its own part costs over an even split
    with a prefill     shared_p(B) + max(max_r own(ranks·b_r(B), ranks·c_r),
                                         max_r own_p(ranks·p_r, ranks·q_r))
                       shared_p, own_p: the prefill profile's split (the context phase's MoE block
                       over every rank's tokens; without a prefill profile the decode profile's, at
                       the chunk's tokens and KV); no CUDA graph (SGLang runs a step with an extend
                       batch on any rank eagerly: can_cuda_graph is all-reduced), no padding; the
                       quote then adds the step's terms to it (its mode: at least its launches; the
                       sampler per verified token)

    b_r(B) = a_r + f_r + (B − Σ a − Σ f − Σ p) · a_r / Σ a      the drafts spread over the ranks by
                                                                their decoding rows (exact for fixed ℓ)

(specplan.simulator.engine.price.rank_split: shared and own.) A rank with nothing
to run runs an idle batch and costs nothing here.
"""

from __future__ import annotations

import numpy as np

from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.engine.price.rank_split import RankSplit


class RankForward:
    """The forward time of one step at each B (see the module docstring)."""

    def __init__(self, load: StepLoad, ranks: int, decode: RankSplit, prefill: RankSplit | None) -> None:
        self.load, self.ranks, self.decode = load, ranks, decode
        self.phase = decode if prefill is None else prefill
        self.fixed_tokens = int(load.anchors.sum() + load.fixed.sum() + load.prefill.sum())
        self.running = ((load.anchors + load.fixed) > 0).nonzero()[0]
        self.prefill_own = self.prefill_ranks_ms()
        self.last: tuple[int, np.ndarray] | None = None   # decode_ranks_ms at one B: the clock's, then the summary's

    def prefill_ranks_ms(self) -> np.ndarray:
        """Each prefilling rank's own part (empty without a prefill)."""
        load = self.load
        prefilling = load.prefill.nonzero()[0]
        if prefilling.size == 0:
            return np.zeros(0)
        axis = load.pairs if self.phase is not self.decode else load.chunk_context
        index = (self.ranks * load.prefill[prefilling].astype(np.int64))[:, None]
        return self.phase.own_at_each(index, self.ranks * axis[prefilling].astype(float))[:, 0]

    def decode_ranks_ms(self, tokens: np.ndarray) -> np.ndarray:
        """(running ranks, B) each decoding rank's own part at each B (at one B, computed once per step)."""
        if tokens.size == 1 and self.last is not None and self.last[0] == tokens[0]:
            return self.last[1]
        load, ranks, running = self.load, self.ranks, self.running
        anchors = int(load.anchors.sum())
        drafts = np.maximum(tokens - self.fixed_tokens, 0)
        held = (load.anchors[running] + load.fixed[running])[:, None]
        spread = load.anchors[running] / anchors if anchors else np.zeros(running.size)
        index = np.rint(ranks * (held + drafts[None, :] * spread[:, None])).astype(np.int64)
        out = self.decode.own_at_each(index, ranks * load.context[running].astype(float))
        if tokens.size == 1:
            self.last = (int(tokens[0]), out)
        return out

    @property
    def prefilling(self) -> bool:
        return bool(self.prefill_own.size)

    def busiest_ms(self, tokens: np.ndarray) -> np.ndarray:
        """The busiest decoding rank's own part at each B of an integer array."""
        return self.decode_ranks_ms(tokens).max(axis=0, initial=0.0)

    def even_ms(self, tokens: np.ndarray) -> np.ndarray:
        """The decoding ranks' own part spread evenly, at each B: what the balanced quote holds of them."""
        return self.decode.own_at(tokens, float(self.load.context.sum()))

    def prefill_ms(self, tokens: np.ndarray) -> np.ndarray:
        """A step with a prefill batch at each B: the phase's MoE block and the busiest rank's own part."""
        return self.phase.shared_at(tokens) + np.maximum(self.busiest_ms(tokens), self.prefill_own.max())

    def excess_ms(self, tokens: int) -> float:
        """How much the busiest rank's own part exceeds the mean over the ranks that run, at B."""
        own = np.concatenate([self.decode_ranks_ms(np.array([tokens]))[:, 0], self.prefill_own])
        return float(own.max() - own.sum() / own.size) if own.size else 0.0   # the mean, without np.mean's ~8 us
