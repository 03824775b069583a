"""The token budget (`max_step_tokens`): which decoding rows run a step, and where their drafts are cut.

One rule per engine, chosen once when the core is assembled (`token_budget`),
never a branch in the step. Decoding rows come first, then prompt chunks.
Each rule has two moments of the step (specplan.simulator.engine.core.decode):

    select(batch, decode, r, per_request) -> (rows, cuts)
        before drafting: the rows that run, oldest first, given the tokens
        reserved per request (one anchor for a policy that chooses within the
        budget; else 1 + the planned length, or 1 + γ); `cuts` says whether
        this step's lengths must then go through `cut`
    cut(batch, rows, lengths, accepted, prefill_tokens) -> (rows, ℓ, accepted, Σℓ, truncated)
        after the policy's lengths: the rows that still run, their lengths
        cut at the budget edge, and the drafts cut (counted as truncated)
    capped(c, rows) -> c
        the confidences a policy that chooses within the budget sees

The rules (`engine.budget`, `engine.dp_attention`):

    Defer      requests beyond the budget, youngest (by arrival) first, sit the step
               out (they neither draft nor verify): counted as deferred request steps
    Truncate   vLLM's scheduler: every request whose anchor fits runs and the drafts
               past the budget edge are dropped (`budget_edge`); a step whose reserved
               tokens all fit is a Defer step (nothing to cut)
    RankCaps   data-parallel attention: each rank keeps, oldest first, the rows whose
               reserved tokens fit its own cap (and the global budget); after the
               lengths every rank cuts drafts at its own edge (`rank_edges`). A policy
               that chooses within the budget sees each rank's candidates cut to the
               top (cap − its anchors) by survival (`rank_capped`)

A policy that chooses within the budget is never cut by Defer or Truncate.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from specplan.simulator.engine.batch import RANK, Batch, Rows
from specplan.simulator.engine.cluster.ranks import rank_cumsum, rank_order, ranks_within
from specplan.simulator.engine.config import EngineConfig, RankLimits

Cut = tuple[Rows, np.ndarray | int, np.ndarray, int, int]  # rows, ℓ, accepted, Σℓ, truncated drafts


class TokenBudget(Protocol):
    def select(self, batch: Batch, decode: np.ndarray | None, r: int, per_request: int) -> tuple[Rows, bool]: ...

    def cut(self, batch: Batch, rows: Rows, lengths: np.ndarray | int, accepted: np.ndarray,
            prefill_tokens: int) -> Cut: ...

    def capped(self, c: np.ndarray, batch: Batch, rows: Rows) -> np.ndarray: ...


def token_budget(config: EngineConfig, fits_budget: bool, speculates: bool) -> TokenBudget:
    """The engine's rule: RankCaps under data-parallel attention, else Truncate or Defer (`engine.budget`)."""
    truncates = config.truncate_budget and speculates and not fits_budget
    if config.dp is not None:
        return RankCaps(config.dp, config.max_step_tokens, reserve_anchor=truncates or fits_budget,
                        caps_confidences=fits_budget)
    return Truncate(config.max_step_tokens) if truncates else Defer(config.max_step_tokens)


def decoding_rows(decode: np.ndarray | None, kept: int, n: int) -> Rows:
    """The oldest `kept` decoding rows (every row decodes when `decode` is None)."""
    index = np.arange(n) if decode is None else decode.nonzero()[0]
    return Rows.some(index[:kept])


class Defer:
    """Whole requests past the budget wait for the next step (see the module docstring)."""

    def __init__(self, max_step_tokens: int) -> None:
        self.max_step_tokens = max_step_tokens

    def select(self, batch: Batch, decode: np.ndarray | None, r: int, per_request: int) -> tuple[Rows, bool]:
        kept = min(r, self.max_step_tokens // per_request)
        if decode is None and kept == r:
            return Rows.every(r), False
        return decoding_rows(decode, kept, batch.n), False

    def cut(self, batch: Batch, rows: Rows, lengths: np.ndarray | int, accepted: np.ndarray,
            prefill_tokens: int) -> Cut:
        raise AssertionError("a deferring budget never cuts")

    def capped(self, c: np.ndarray, batch: Batch, rows: Rows) -> np.ndarray:
        return c


class Truncate(Defer):
    """vLLM's rule: every request whose anchor fits runs, drafts past the edge are dropped.

    Its scheduler takes min(num_new_tokens, token_budget) per running request in order, so the
    request at the edge keeps the drafts that fit and the ones after it, with no budget left,
    are not scheduled (deferred). Those rows drafted (an engine drafts for its whole running
    batch before scheduling): their drafting is paid, their drafts are counted as truncated
    only for the request at the edge.
    """

    def select(self, batch: Batch, decode: np.ndarray | None, r: int, per_request: int) -> tuple[Rows, bool]:
        if r <= self.max_step_tokens // per_request:
            return super().select(batch, decode, r, per_request)  # every reserved token fits: nothing to cut
        kept = min(r, self.max_step_tokens)
        return decoding_rows(decode, kept, batch.n), True

    def cut(self, batch: Batch, rows: Rows, lengths: np.ndarray | int, accepted: np.ndarray,
            prefill_tokens: int) -> Cut:
        wanted = per_row(lengths, rows.count)
        cut, running = budget_edge(wanted, self.max_step_tokens - prefill_tokens)
        drafts = int(cut.sum())
        return rows.head(running), cut, np.minimum(accepted[:running], cut), drafts, \
            int(wanted[:running].sum()) - drafts


class RankCaps:
    """Data-parallel attention: each rank's token cap binds on its own rows (see the module docstring)."""

    def __init__(self, dp: RankLimits, max_step_tokens: int, reserve_anchor: bool, caps_confidences: bool) -> None:
        self.dp, self.max_step_tokens = dp, max_step_tokens
        self.reserve_anchor, self.caps_confidences = reserve_anchor, caps_confidences

    def select(self, batch: Batch, decode: np.ndarray | None, r: int, per_request: int) -> tuple[Rows, bool]:
        index = np.arange(batch.n) if decode is None else decode.nonzero()[0]
        reserve = 1 if self.reserve_anchor else per_request
        ranks = batch.ints[RANK][index]
        if ranks_within(np.full(ranks.size, reserve), ranks, self.dp.step_tokens):
            fits = np.ones(ranks.size, dtype=bool)
        else:
            fits = (rank_order(ranks) + 1) * reserve <= self.dp.step_tokens
        fits &= np.cumsum(fits) * reserve <= self.max_step_tokens
        return Rows.some(index[fits]), True

    def cut(self, batch: Batch, rows: Rows, lengths: np.ndarray | int, accepted: np.ndarray,
            prefill_tokens: int) -> Cut:
        wanted = per_row(lengths, rows.count)
        cut, running = rank_edges(wanted, batch.ints[RANK][rows.index], self.dp.step_tokens)
        truncated = int((wanted - cut)[running].sum())
        cut_running = cut[running]
        return (rows.where(running), cut_running, np.minimum(accepted, cut)[running], int(cut_running.sum()),
                truncated)

    def capped(self, c: np.ndarray, batch: Batch, rows: Rows) -> np.ndarray:
        if not self.caps_confidences:
            return c
        return rank_capped(c, rows.of(batch.ints[RANK]), self.dp)


def per_row(lengths: np.ndarray | int, count: int) -> np.ndarray:
    """ℓ for each of `count` rows as int64: a policy's one ℓ for every row, or its own per row (read only)."""
    return np.full(count, lengths, dtype=np.int64) if np.ndim(lengths) == 0 else np.asarray(lengths, dtype=np.int64)


def budget_edge(lengths: np.ndarray, budget: int) -> tuple[np.ndarray, int]:
    """vLLM's budget rule over rows in order: (ℓ cut at the edge, rows that run).

    Row r runs when tokens before it leave at least its anchor; it keeps
    min(ℓ_r, left − 1) drafts.
    """
    tokens = lengths + 1
    before = np.cumsum(tokens) - tokens
    left = budget - before
    running = int(np.count_nonzero(left >= 1))
    return np.minimum(lengths[:running], left[:running] - 1), running


def rank_edges(lengths: np.ndarray, ranks: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """`budget_edge` within each rank: (ℓ cut at its rank's edge, which rows run), rows in order."""
    tokens = lengths + 1
    if ranks_within(tokens, ranks, cap):
        return lengths.copy(), np.ones(lengths.size, dtype=bool)
    left = cap - (rank_cumsum(tokens, ranks) - tokens)
    running = left >= 1
    return np.minimum(lengths, np.maximum(left - 1, 0)), running


def rank_capped(c: np.ndarray, ranks: np.ndarray, dp: RankLimits) -> np.ndarray:
    """Confidences with each attention rank's candidates cut to the top ones its token cap can verify.

    A policy that chooses within the step's budget sees one capacity; under data-parallel
    attention each rank has its own. Zeroing the confidences of a rank's candidates past its
    top (cap − its anchors) by survival keeps every selection a prefix of each block and within
    its rank's cap, whatever the policy then admits (ties at the cut may pass; `RankCaps.cut`
    cuts them at the edge). One partition per rank, not per candidate.
    """
    survival = np.multiply.accumulate(c, axis=1)
    room = dp.step_tokens - np.bincount(ranks, minlength=dp.ranks)
    keep = np.ones(c.shape, dtype=bool)
    for rank in np.unique(ranks).tolist():
        members = ranks == rank
        a = survival[members]
        k = max(int(room[rank]), 0)
        if k < a.size:
            cut = np.partition(a.ravel(), a.size - k)[a.size - k] if k else np.inf
            keep[members] = a >= cut
    return np.where(keep, c, 0.0)
