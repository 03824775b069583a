"""The decode core: one continuous-batching speculative decode engine's step logic, without a clock.

The simulator's replicas (specplan.simulator.engine.replica) and the reference
engine (specplan.validation.engine) both drive this class; only time differs. A
replica charges the step's price (specplan.simulator.engine.price); the reference
engine runs real forwards and reads the wall clock. One step:

    admit    waiting requests, FIFO, while a batch slot and KV capacity remain
    plan     decoding rows, token budget and deferral, prompt chunks, drafts,
             the policy's lengths ℓ, the accepted prefixes, and the step's
             price quote and verify tokens B
    (time)   the driver prices or measures the step and waits for its end
    commit   emit min(accepted + 1, remaining) per request, advance prompt
             chunks (a finished prompt emits its first token), record the
             step, retire finished requests, preempt on KV overflow

**The KV rule** (one choice, the same for both drivers): a request reserves
its whole footprint at admission, prompt + generated tokens + the draft
block γ, whether its prompt is already computed (disaggregated prefill)
or will be computed in chunks (chunked prefill). Admission is FIFO while
Σ footprints ≤ kv_capacity_tokens. Decoding grows a footprint by the
tokens it emits; when Σ footprints exceeds the capacity after a step, the
youngest requests (by arrival) are preempted (recompute: their KV is
dropped, they go back to the head of the queue and their prompt and
generated tokens are computed again on re-admission, in their place by
arrival) until it fits; the oldest request always stays. So after every
step Σ footprints ≤ capacity, unless one request alone exceeds it
(rejected at submission).

**The token budget** (`max_step_tokens`): decoding requests come first,
then prompt chunks. A policy that chooses within the budget (`fits_budget`)
gets one anchor token per request reserved; for the others the engine
reserves the policy's planned length (or the whole block) per request
before drafting. Requests beyond the budget, youngest (by arrival) first, sit this step
out (they neither draft nor verify) and are counted as deferred request
steps (`engine.budget: defer`). Under vLLM's rule (`truncate`, `plan_truncated`)
every request whose anchor fits runs and the drafts past the budget edge
are dropped (counted as truncated drafts). A policy that chooses within the
budget is never cut.

**Data-parallel attention** (`engine.dp_attention`, `plan_ranks`): each row
carries the attention rank holding its KV; admission picks the rank with room
(`admit_to_ranks`), each rank's KV cache, slots and token cap bind on its own
rows, preemption is per rank (`preempt_ranks`).

Draws: for a policy that reads the drafts, acceptance logits x = row +
token noise (`acceptance` stream), a draft is accepted when a logistic
draw falls below x (`outcomes`), and the confidence head reads x
(`confidence`). A fixed-length policy reads nothing but the outcomes, so
its requests carry their acceptance with the token noise averaged out and
a draft is accepted when a uniform draw falls below it (`outcomes`): the
same outcome distribution for fewer draws.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from specplan.hwprofiles.profile import StepProfile
from specplan.policies.base import Decision, OracleView, Policy, StepOutcome, StepView, ThetaChoice
from specplan.simulator.core.streams import stream
from specplan.simulator.drafters.drafter import Drafter
from specplan.simulator.engine.batch import (
    ACCEPTED,
    COLUMNS,
    PREFILL_LEFT,
    RANK,
    REMAINING,
    RID,
    STEPS,
    TOTAL,
    VERIFIED,
    Batch,
    Ledger,
    attention_context,
)
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.draft_record import SAMPLE_EVERY, draft_tally
from specplan.simulator.engine.intake import admit_fifo, admit_to_ranks
from specplan.simulator.engine.price import StepPricer, StepQuote
from specplan.simulator.engine.records import (
    ChunkLog,
    RequestLog,
    SpecCounters,
    StepLog,
    StepRecord,
)

ALL = slice(None)


class StepPlan(NamedTuple):
    """What one step will do: decided before its time passes, applied by `commit`."""

    rows: Any                        # decoding rows that run: ALL, or an index array
    decode_requests: int             # R: rows that decode this step
    lengths: np.ndarray | int        # ℓ per decoding row (R,), or one ℓ for all (fixed lengths, uniform decisions)
    accepted: np.ndarray             # drafts the target accepts per decoding row (R,), ≤ ℓ
    prefill_take: np.ndarray | None  # prompt tokens per batch row this step (chunked prefill)
    prefill_tokens: int
    drafting_requests: int
    verify_tokens: int               # B = R + Σℓ + prefill tokens
    context_tokens: int              # KV context the profile lookup uses
    deferred_requests: int           # decoding rows the token budget left out
    quote: StepQuote
    decision: Decision | None        # the policy's Decision when it decided this step (None: fixed or no drafts)
    truncated_drafts: int = 0        # drafts cut at the budget edge (engine.budget: truncate)

    @property
    def theta_choice(self) -> ThetaChoice | None:
        """What the policy's Decision said it optimised (None: no Θ choice)."""
        return None if self.decision is None else self.decision.theta

    @property
    def draft_width(self) -> tuple[int, int] | None:
        """(widest, all) drafts when the policy drafted fewer than whole blocks (drafting priced for them)."""
        return None if self.decision is None else self.decision.draft_width

    @property
    def step_ms(self) -> float:
        """The step's price at its B: what a priced driver charges."""
        return self.quote.step_ms(self.verify_tokens)


class StepTiming(NamedTuple):
    """How long the step's parts took (priced or measured), in ms.

    `overhead_ms` is everything outside drafting and the verify forward: host
    time plus the scheduling overhead the policy pays (a quote's `host_ms +
    scheduling_ms`), as the step records keep it.
    """

    draft_ms: float
    verify_ms: float
    overhead_ms: float


class DecodeCore:
    """One engine's queue, running batch and step logic (see the module docstring)."""

    def __init__(self, config: EngineConfig, policy: Policy, drafter: Drafter, profile: StepProfile, log: RequestLog,
                 steps: StepLog, seed: int, index: int = 0) -> None:
        self.config, self.policy, self.drafter, self.log, self.steps = config, policy, drafter, log, steps
        self.acceptance, self.confidence = drafter.acceptance, drafter.confidence
        self.index = index
        self.block_size = config.block_size
        self.speculates = policy.drafts and self.block_size > 0
        self.learns = policy.learns
        self.fixed = policy.length_setting == "fixed"
        self.row_acceptance = drafter.row_probabilities if self.fixed else drafter.row_logits  # Batch.acceptance
        self.reserve = 0 if policy.fits_budget or not self.speculates else self.block_size
        self.pricer = StepPricer(profile, drafter.draft_ms, config, policy.pays_scheduling(),
                                 getattr(drafter.latency, "uses_positions", True))
        self.uses_context = self.pricer.uses_context or drafter.latency.uses_context
        self.rng_p = stream(seed, "acceptance", index)
        self.rng_c = stream(seed, "confidence", index)
        self.rng_u = stream(seed, "outcomes", index)
        self.queue: deque[int] = deque()
        self.batch = Batch(self.block_size, config.max_batch_requests)
        self.footprint = 0
        self.prefilling = 0
        self.step_index = 0
        self.ledger = Ledger()
        # finished rows not yet in the log (`write_retired`): their columns, then the ledger's steps and verified
        self.retired = np.zeros((len(COLUMNS) + 2, RETIRED_ROWS), dtype=np.int64)
        self.retired_rows = 0
        self.spec = SpecCounters(self.block_size)
        self.outcomes: dict[int, np.ndarray] = {}
        self.drafted_all = np.ones(config.max_batch_requests, dtype=bool)
        self.quotes: dict[tuple[int, int, int, int], StepQuote] = {}
        self.max_step_tokens = config.max_step_tokens
        self.finishing = False  # a row may have emitted its last token this step (commit retires it)
        self.prompt_cache: Any = None  # chunked prefill with a prefix cache: cached_tokens(rid, n), prompts_done(ids)
        self.chunks: ChunkLog | None = None  # per-request tokens per step, kept for a benchmark client's ITL
        self.truncates = config.truncate_budget and self.speculates and not policy.fits_budget
        self.tally = draft_tally(drafter) if self.speculates else None  # what the drafts did, sampled
        self.ranked = config.ranks > 1  # data-parallel attention: per-rank caps

    # ---- intake -----------------------------------------------------------------------------
    def enqueue(self, rid: int, front: bool = False) -> None:
        (self.queue.appendleft if front else self.queue.append)(rid)

    def admit(self, now: float) -> int:
        """FIFO admission under the KV rule; returns the number of requests admitted."""
        free = self.config.max_batch_requests - self.batch.n
        if not self.queue or free <= 0:
            return 0
        if self.ranked:
            return self.admit_ranks(now, free)
        admitted = admit_fifo(self.queue, self.log, now, free, self.footprint, self.config.kv_capacity_tokens,
                              self.block_size)
        if admitted:
            self.add_rows(admitted)
        return len(admitted)

    def admit_ranks(self, now: float, free: int) -> int:
        """Data-parallel attention: FIFO admission to the rank with a free slot and the most free KV."""
        cfg = self.config
        slots, kv = self.rank_usage()
        admitted = admit_to_ranks(self.queue, self.log, now, cfg.rank_requests - slots, cfg.rank_kv_tokens - kv,
                                  self.block_size, free, cfg.kv_capacity_tokens - self.footprint)
        if admitted:
            self.add_rows(admitted)
        return len(admitted)

    def rank_usage(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows and KV footprint per attention rank."""
        ranks, n = self.batch.ints[RANK], self.config.ranks
        slots = np.bincount(ranks, minlength=n)
        kv = np.bincount(ranks, weights=self.footprints(ALL), minlength=n).astype(np.int64)
        return slots, kv

    def add_rows(self, admitted: Sequence[tuple[int, ...]]) -> None:
        """Rows for admitted requests, given (id, tokens generated so far, prompt + generated tokens[, rank])."""
        log, chunked, opening = self.log, self.config.chunked, self.ledger.opening
        output = log["output_tokens"]
        rows, footprint = [], 0
        cache = self.prompt_cache
        for rid, generated, tokens, *rank in admitted:
            left = int(output[rid]) - generated
            prefill = 0
            if chunked:  # tokens a prefix cache holds are not computed again (their KV still counts)
                prefill = tokens if cache is None else tokens - cache.cached_tokens(rid, tokens)
            rows.append((rid, left, tokens + left, prefill, *opening(left), rank[0] if rank else 0))
            footprint += tokens
        self.prefilling += len(rows) if chunked else 0
        block = np.array(rows, dtype=np.int64).T
        rid = block[RID]
        self.batch.append(block, self.row_acceptance(log["domain"][rid], log["acceptance_offset"][rid]))
        self.footprint += footprint + self.block_size * len(rows)

    # ---- plan -------------------------------------------------------------------------------
    def plan(self, now: float) -> StepPlan:
        """Draw, decide and price one step of the running batch (at least one row)."""
        if self.prefilling:
            decode = self.batch.ints[PREFILL_LEFT] == 0
            r = int(np.count_nonzero(decode))
        else:
            decode, r = None, self.batch.n
        planned = self.policy.planned_length(r) if self.fixed else None
        per_request = 1 + (self.reserve if planned is None else planned)
        kept = min(r, self.max_step_tokens // per_request)
        if self.ranked:
            return self.plan_ranks(decode, r, planned, per_request, now)
        if self.truncates and kept < r:
            return self.plan_truncated(decode, r, planned, per_request, now)
        if decode is None and kept == r:
            rows, take, prefill_tokens = ALL, None, 0
        else:
            rows = self.decoding_rows(decode, kept)
            take, prefill_tokens = self.prefill_chunks(kept * per_request)
        context = self.context_tokens(rows, take, planned) if self.uses_context else 0
        lengths, accepted, drafts, drafting, quote, decision = self.speculate(rows, kept, planned, prefill_tokens,
                                                                           context, now)
        return StepPlan(rows, kept, lengths, accepted, take, prefill_tokens, drafting, kept + drafts + prefill_tokens,
                        context, r - kept, quote, decision)

    def plan_truncated(self, decode: np.ndarray | None, r: int, planned: int | None, per_request: int,
                       now: float) -> StepPlan:
        """vLLM's token budget: every row whose anchor fits runs; drafts past the budget edge are dropped.

        Its scheduler takes min(num_new_tokens, token_budget) per running request in order, so the
        request at the edge keeps the drafts that fit and the ones after it, with no budget left,
        are not scheduled (deferred). Those rows drafted (an engine drafts for its whole running
        batch before scheduling): their drafting is paid, their drafts are counted as truncated
        only for the request at the edge.
        """
        budget = self.max_step_tokens
        kept = min(r, budget)
        rows = self.decoding_rows(decode, kept)
        take, prefill_tokens = self.prefill_chunks(kept * per_request)
        context = self.context_tokens(rows, take, planned) if self.uses_context else 0
        lengths, accepted, _, drafting, quote, decision = self.speculate(rows, kept, planned, prefill_tokens,
                                                                      context, now)
        wanted = np.broadcast_to(np.asarray(lengths, dtype=np.int64), (kept,))
        cut, running = budget_edge(wanted, budget - prefill_tokens)
        truncated = int(wanted[:running].sum() - cut.sum())
        accepted = np.minimum(accepted[:running], cut)
        return StepPlan(rows[:running], running, cut, accepted, take, prefill_tokens, drafting,
                        running + int(cut.sum()) + prefill_tokens, context, r - running, quote, decision, truncated)

    def plan_ranks(self, decode: np.ndarray | None, r: int, planned: int | None, per_request: int,
                   now: float) -> StepPlan:
        """A step under data-parallel attention: each rank's token cap binds on its own rows.

        Before drafting each rank keeps, oldest first, the rows whose reserved tokens fit its cap
        (one anchor under `truncate` and for policies that choose within the budget, else the
        planned length or the whole block: `defer`) and the global budget; after the lengths are
        chosen every rank cuts drafts at its own edge (vLLM's rule, `budget_edge`), so a policy
        planning against the whole step's capacity is held to its ranks'. Prompt chunks count
        against the global budget only.
        """
        cfg = self.config
        index = np.arange(self.batch.n) if decode is None else decode.nonzero()[0]
        ranks = self.batch.ints[RANK][index]
        reserve = 1 if self.truncates or self.policy.fits_budget else per_request
        fits = (rank_order(ranks) + 1) * reserve <= cfg.rank_step_tokens
        fits &= np.cumsum(fits) * reserve <= self.max_step_tokens
        rows = index[fits]
        kept = rows.size
        take, prefill_tokens = self.prefill_chunks(kept * per_request)
        context = self.context_tokens(rows, take, planned) if self.uses_context else 0
        lengths, accepted, _, drafting, quote, decision = self.speculate(rows, kept, planned, prefill_tokens,
                                                                      context, now)
        wanted = np.broadcast_to(np.asarray(lengths, dtype=np.int64), (kept,))
        cut, running = rank_edges(wanted, ranks[fits], cfg.rank_step_tokens)
        truncated = int((wanted - cut)[running].sum())
        accepted = np.minimum(accepted, cut)[running]
        cut = cut[running]
        decoded = int(np.count_nonzero(running))
        return StepPlan(rows[running], decoded, cut, accepted, take, prefill_tokens, drafting,
                        decoded + int(cut.sum()) + prefill_tokens, context, r - decoded, quote, decision, truncated)

    def decoding_rows(self, decode: np.ndarray | None, kept: int) -> Any:
        """The oldest `kept` decoding rows (every row decodes when `decode` is None)."""
        index = np.arange(self.batch.n) if decode is None else decode.nonzero()[0]
        return index[:kept]

    def prefill_chunks(self, decode_tokens: int) -> tuple[np.ndarray | None, int]:
        """Prompt tokens each prefilling row computes this step: FIFO within the chunk budget."""
        if self.prefilling == 0:
            return None, 0
        left = self.batch.ints[PREFILL_LEFT]
        budget = max(0, min(self.config.chunk_tokens or 0, self.config.max_step_tokens - decode_tokens))
        before = np.cumsum(left) - left
        take = np.clip(budget - before, 0, left)
        return take, int(take.sum())

    def context_tokens(self, rows: Any, take: np.ndarray | None, planned: int | None = None) -> int:
        """KV context of the rows the step runs, as the profile's context axis counts it."""
        kv = self.batch.kv_tokens()
        scale = 1.0 if self.config.profiled_queries is None else self.query_scale(planned)
        if rows is ALL and take is None:
            return attention_context(kv, None, None, self.config.padded_attention, scale)
        running = np.zeros(kv.size, dtype=bool)
        running[rows] = True
        return attention_context(kv, running, take, self.config.padded_attention, scale)

    def query_scale(self, planned: int | None) -> float:
        """Padded queries: the step's longest verify block (1 + planned ℓ, or 1 + γ for a policy that
        decides per step: its upper bound, reached whenever one request verifies its whole block)
        against the queries per request the profile was measured at."""
        longest = 1 + (0 if not self.speculates else self.block_size if planned is None else planned)
        return longest / (self.config.profiled_queries or 1)

    def speculate(self, rows: Any, r: int, planned: int | None, reserved: int, context: int,
                  now: float) -> tuple[np.ndarray | int, np.ndarray, int, int, StepQuote, Decision | None]:
        """ℓ, accepted drafts, Σℓ, drafting requests, the quote and the policy's Decision, for the rows that run.

        A fixed-length policy's ℓ is its planned length, known before drafting, and its outcomes
        are drawn for that many positions; a policy that reads the drafts decides (`decide`).
        """
        n = self.batch.n
        if not self.speculates or r == 0 or planned == 0:
            return 0, np.zeros(r, dtype=np.int64), 0, 0, self.quote(n, r, 0, context, 0), None
        if planned is not None:
            quote = self.quote(n, r, r, context, planned)
            accepted = self.accepted_drafts(rows, r, planned)
            if self.tally is not None and self.step_index % SAMPLE_EVERY == 0:
                self.tally.outcomes(self.log["domain"][self.batch.rids[rows]], planned, accepted)
            return planned, accepted, planned * r, r, quote, None
        x, prefix = self.draw_drafts(rows)
        return self.decide(x, prefix, rows, r, reserved, context, now)

    def accepted_drafts(self, rows: Any, r: int, planned: int) -> np.ndarray:
        """A fixed-length step's outcomes: drafts accepted out of `planned` per row (no logits needed)."""
        bounds = self.batch.acceptance if planned == self.block_size else self.batch.acceptance[:, :planned]
        return self.first_rejected(self.rng_u.random((r, planned)), bounds if rows is ALL else bounds[rows])

    def draw_drafts(self, rows: Any) -> tuple[np.ndarray, np.ndarray]:
        """A step's drafts for policies that read them: acceptance logits x (R, γ) and accepted prefixes."""
        acceptance = self.acceptance
        assert acceptance is not None  # a speculating drafter has an acceptance model
        x = acceptance.step_logits(self.batch.acceptance[rows], self.rng_p)
        return x, self.first_rejected(self.rng_u.logistic(size=x.shape), x)

    def decide(self, x: np.ndarray, prefix: np.ndarray, rows: Any, r: int, reserved: int, context: int,
               now: float) -> tuple[np.ndarray | int, np.ndarray, int, int, StepQuote, Decision | None]:
        """A policy that reads the drafts: confidences, drafting mask, the view, its Decision; ℓ and what it accepts."""
        ids = self.batch.rids if rows is ALL else self.batch.rids[rows]
        c = self.confidence.observe(x, self.rng_c)
        mask = self.policy.drafting_mask(ids)
        if self.tally is not None and self.step_index % SAMPLE_EVERY == 0:
            self.record_drafts(ids, c, prefix, mask)
        if self.ranked and self.policy.fits_budget:
            c = self.rank_capped(c, rows)
        if mask is None:
            drafted, drafting = self.drafted_all[:r], r
        else:
            drafted = np.asarray(mask, dtype=bool)
            c = np.where(drafted[:, None], c, 0.0)
            prefix = np.where(drafted, prefix, 0)
            drafting = int(np.count_nonzero(drafted))
        quote = self.quote(self.batch.n, r, drafting, context, self.block_size)
        view = self.view(c, ids, quote, reserved, drafted, drafting, prefix, now)
        decision: Decision = self.policy.decide(view)
        lengths = decision.lengths
        if decision.draft_width is not None:  # the policy drafted fewer positions: drafting is charged for those
            quote = self.pricer.quote(self.batch.n, r, drafting, context, *decision.draft_width)
        if mask is not None:
            lengths = np.where(drafted, lengths, 0)
        lengths, accepted, drafts = self.settle(lengths, prefix, r)
        return lengths, accepted, drafts, drafting, quote, decision

    def record_drafts(self, ids: np.ndarray, c: np.ndarray, prefix: np.ndarray, mask: Any) -> None:
        """A sampled step's drafts for the run's DraftRecord: the rows that drafted, their outcomes over the
        whole block and the confidences the head gave them."""
        assert self.tally is not None
        if mask is not None:
            drafted = np.asarray(mask, dtype=bool)
            ids, c, prefix = ids[drafted], c[drafted], prefix[drafted]
        self.tally.outcomes(self.log["domain"][ids], self.block_size, prefix)
        self.tally.confidences(c, prefix)

    def settle(self, lengths: np.ndarray | int, prefix: np.ndarray, r: int) -> tuple[np.ndarray | int, np.ndarray, int]:
        """A decision's ℓ in its cheapest form, the accepted drafts cut at ℓ, and Σℓ: the engine's fast paths.

        One ℓ for every row (`Decision.uniform`, or per-row lengths that all
        verify the whole block) stays one int: nothing to sum per step, and
        at ℓ = γ nothing to cut. Otherwise the block's accepted prefixes are
        cut at each row's ℓ.
        """
        if isinstance(lengths, int):
            return lengths, prefix if lengths >= self.block_size else np.minimum(prefix, lengths), lengths * r
        lengths = np.asarray(lengths, dtype=np.int64)
        drafts = int(np.add.reduce(lengths))
        if drafts == r * self.block_size:  # every row verifies its whole block
            return self.block_size, prefix, drafts
        return lengths, np.minimum(prefix, lengths), drafts

    def rank_capped(self, c: np.ndarray, rows: Any) -> np.ndarray:
        """Confidences with each attention rank's candidates cut to the top ones its token cap can verify.

        A policy that chooses within the step's budget sees one capacity; under data-parallel
        attention each rank has its own. Zeroing the confidences of a rank's candidates past its
        top (cap − its anchors) by survival keeps every selection a prefix of each block and within
        its rank's cap, whatever the policy then admits (ties at the cut may pass; `plan_ranks`
        cuts them at the edge). One partition per rank, not per candidate.
        """
        ranks = self.batch.ints[RANK] if rows is ALL else self.batch.ints[RANK][rows]
        survival = np.multiply.accumulate(c, axis=1)
        room = self.config.rank_step_tokens - np.bincount(ranks, minlength=self.config.ranks)
        keep = np.ones(c.shape, dtype=bool)
        for rank in np.unique(ranks).tolist():
            members = ranks == rank
            a = survival[members]
            k = max(int(room[rank]), 0)
            if k < a.size:
                cut = np.partition(a.ravel(), a.size - k)[a.size - k] if k else np.inf
                keep[members] = a >= cut
        return np.where(keep, c, 0.0)

    def quote(self, n: int, r: int, drafting: int, context: int, draft_length: int) -> StepQuote:
        """The step's price; without a context axis it depends on the batch's shape alone, so it is reused."""
        if self.uses_context:
            return self.pricer.quote(n, r, drafting, context, draft_length)
        key = (n, r, drafting, draft_length)
        quote = self.quotes.get(key)
        if quote is None:
            quote = self.quotes[key] = self.pricer.quote(n, r, drafting, 0, draft_length)
        return quote

    def view(self, c: np.ndarray, ids: np.ndarray, quote: StepQuote, reserved: int, drafted: np.ndarray,
             drafting: int, prefix: np.ndarray, now: float) -> StepView:
        """The step's view; the oracle's adds the truth (how many drafts each request will have accepted)."""
        cfg = self.config
        fields = (c, ids, quote, cfg.max_step_tokens, reserved, cfg.max_batch_requests, self.block_size,
                  self.step_index, now, drafted, drafting)
        return OracleView(*fields, accepted_prefix=prefix) if self.policy.oracle else StepView(*fields)

    def first_rejected(self, draws: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """Accepted drafts per request: the first position whose draw is not below its bound.

        Outcomes go into a buffer with one extra, always-rejected column, so a
        single argmin gives the block length for a fully accepted block.
        """
        r, length = draws.shape
        buffer = self.outcomes.get(length)
        if buffer is None or buffer.shape[0] < r:
            buffer = self.outcomes[length] = np.zeros((max(r, self.config.max_batch_requests), length + 1), bool)
        ok = buffer[:r]
        ok[:, :length] = draws < bounds  # a contiguous comparison, then one strided copy: faster than `out=`
        return ok.argmin(axis=1)

    # ---- commit -----------------------------------------------------------------------------
    def commit(self, plan: StepPlan, timing: StepTiming, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Apply the step at its end time `now`; returns the ids of the requests it finished and preempted."""
        self.finishing = False
        emitted, accepted = self.emit(plan, now) if plan.decode_requests else (0, 0)
        if plan.drafting_requests:  # vLLM's counters: request-steps that verified a draft, drafts verified
            lengths = plan.lengths
            verifying = plan.decode_requests if isinstance(lengths, int) else int(np.count_nonzero(lengths))
            self.spec.add(plan.accepted, verifying, plan.verify_tokens - plan.decode_requests - plan.prefill_tokens)
        if plan.prefill_take is not None:
            emitted += self.advance_prefill(plan.prefill_take, now)
        self.steps.add(StepRecord(now, self.index, self.batch.n, plan.decode_requests, plan.drafting_requests,
                                  plan.verify_tokens, plan.prefill_tokens, emitted, accepted,
                                  plan.deferred_requests, plan.truncated_drafts, plan.context_tokens, *timing))
        self.step_index += 1
        finished = self.retire() if self.finishing else NONE
        evicted = self.preempt() if self.footprint > self.config.kv_capacity_tokens else NONE
        if self.ranked:  # each rank's own cache binds too, whatever the global rule evicted
            more = self.preempt_ranks()
            evicted = np.concatenate([evicted, more]) if more.size else evicted
        return finished, evicted

    def emit(self, plan: StepPlan, now: float) -> tuple[int, int]:
        """Emit accepted + 1 tokens per decoding row, up to what it has left; returns (emitted, accepted).

        Each row's remaining count drops by accepted + 1 and is then floored at
        0: a row that reaches 0 has emitted its last token and retires.
        """
        ints, rows, accepted = self.batch.ints, plan.rows, plan.accepted
        remaining = ints[REMAINING] if rows is ALL else ints[REMAINING, rows]
        np.subtract(remaining, accepted, out=remaining)
        remaining -= 1
        total = int(np.add.reduce(accepted))
        emitted = total + plan.decode_requests
        over = None
        if remaining[remaining.argmin()] <= 0:  # some rows finish (argmin: a fifth of a min's cost)
            over = np.minimum(remaining, 0)
            emitted += int(over.sum())
            remaining -= over
            self.finishing = True
        if rows is ALL:  # the ledger counts the step (and a fixed ℓ) for every row at once
            self.ledger.steps += 1
            if isinstance(plan.lengths, int):
                self.ledger.verified += plan.lengths
            else:
                ints[VERIFIED] += plan.lengths
            if over is not None:
                ints[ACCEPTED] -= over
        else:
            ints[REMAINING, rows] = remaining
            ints[STEPS, rows] += 1
            ints[VERIFIED, rows] += plan.lengths
            if over is not None:
                ints[ACCEPTED, rows] -= over
        if self.chunks is not None:
            ids = self.batch.rids if rows is ALL else self.batch.rids[rows]
            self.chunks.add(now, ids, accepted + 1 if over is None else accepted + 1 + over)
        if self.learns:
            lengths = np.broadcast_to(plan.lengths, accepted.shape)
            self.policy.observe(StepOutcome(ints[RID][rows], lengths, accepted, now))
        self.footprint += emitted
        return emitted, total

    def advance_prefill(self, take: np.ndarray, now: float) -> int:
        """Apply this step's prompt chunks; a request whose first prompt completes emits its first token."""
        ints, log = self.batch.ints, self.log
        was = ints[PREFILL_LEFT] > 0
        ints[PREFILL_LEFT] -= take
        done = was & (ints[PREFILL_LEFT] == 0)
        self.prefilling -= int(np.count_nonzero(done))
        ids = ints[RID][done]
        if self.prompt_cache is not None and ids.size:
            self.prompt_cache.prompts_done(ids)
        first = ids[np.isnan(log["first_token_s"][ids])]
        if first.size == 0:
            return 0
        log["first_token_s"][first] = now
        log["generated_tokens"][first] = 1
        fresh = done & np.isin(ints[RID], first)
        ints[REMAINING, fresh] -= 1
        ints[ACCEPTED, fresh] -= 1  # an emitted token that was not an accepted draft (Ledger)
        self.footprint += first.size
        self.finishing = True
        return int(first.size)

    def retire(self) -> np.ndarray:
        """Finished requests (nothing left to emit) leave the batch; returns their ids."""
        done = (self.batch.ints[REMAINING] == 0).nonzero()[0]
        return self.remove(done, finished=True) if done.size else NONE

    def preempt(self) -> np.ndarray:
        """Evict the youngest requests until Σ footprints fits the KV capacity again."""
        keep = np.cumsum(self.footprints(ALL)) <= self.config.kv_capacity_tokens
        keep[0] = True  # the oldest request always stays (it fits on its own)
        evicted = self.remove((~keep).nonzero()[0])
        self.log["preemptions"][evicted] += 1
        return evicted

    def preempt_ranks(self) -> np.ndarray:
        """Data-parallel attention: evict the youngest rows of each rank whose KV exceeds its cache."""
        ranks = self.batch.ints[RANK]
        held = rank_cumsum(self.footprints(ALL), ranks)
        keep = held <= self.config.rank_kv_tokens
        keep[rank_order(ranks) == 0] = True  # each rank's oldest request stays (it fits on its own)
        if keep.all():
            return NONE
        evicted = self.remove((~keep).nonzero()[0])
        self.log["preemptions"][evicted] += 1
        return evicted

    def remove(self, index: np.ndarray, finished: bool = False) -> np.ndarray:
        """Take the rows at `index` out of the batch; returns their ids.

        Their counters go to the request log: at once for preempted requests
        (re-admission reads them), in bulk for finished ones (`write_retired`).
        """
        gone = self.batch.ints[:, index]
        if finished:
            start, k = self.retired_rows, index.size
            if start + k > RETIRED_ROWS:
                self.write_retired()
                start = 0
            block = self.retired[:, start:start + k]
            block[:LEDGER_STEPS] = gone
            block[LEDGER_STEPS] = self.ledger.steps
            block[LEDGER_VERIFIED] = self.ledger.verified
            self.retired_rows = start + k
        else:
            self.flush(gone)
        kept = gone[TOTAL] if finished else gone[TOTAL] - gone[REMAINING]  # a finished row has nothing left
        self.footprint -= int(np.add.reduce(kept)) + self.block_size * index.size
        if self.prefilling:
            self.prefilling -= int(np.count_nonzero(gone[PREFILL_LEFT]))
        self.batch.drop(index)
        return gone[RID]

    def flush(self, rows: np.ndarray) -> None:
        """Add a block of running rows' counters (columns × rows) to the request log."""
        self.log.add_counts(rows[RID], rows[REMAINING], *self.ledger.counters(rows))

    def write_retired(self) -> None:
        """Add the counters of the finished requests not yet written to the request log."""
        rows = self.retired[:, :self.retired_rows]
        self.log.add_counts(rows[RID], rows[REMAINING],
                            *self.ledger.counters(rows, rows[LEDGER_STEPS], rows[LEDGER_VERIFIED]))
        self.retired_rows = 0

    def footprints(self, rows: Any) -> np.ndarray:
        """KV tokens the rows reserve: prompt (computed or not) + generated + the draft block."""
        ints = self.batch.ints
        return ints[TOTAL][rows] - ints[REMAINING][rows] + self.block_size

    def drain(self) -> None:
        """Write every request's counters to the log (at the end of a run, or before reading them)."""
        self.write_retired()
        self.flush(self.batch.ints)
        self.ledger.reopen(self.batch.ints)
        self.spec.flush()


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


def rank_cumsum(values: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Running sum of `values` within each rank, in row order (inclusive)."""
    order = np.argsort(ranks, kind="stable")
    total = np.cumsum(values[order])
    sorted_ranks = ranks[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = sorted_ranks[1:] != sorted_ranks[:-1]
    start = np.maximum.accumulate(np.where(first, total - values[order], 0))
    out = np.empty_like(total)
    out[order] = total - start
    return out


def rank_order(ranks: np.ndarray) -> np.ndarray:
    """Each row's position among its rank's rows (0 for the oldest)."""
    return rank_cumsum(np.ones(ranks.size, dtype=np.int64), ranks) - 1


def rank_edges(lengths: np.ndarray, ranks: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """`budget_edge` within each rank: (ℓ cut at its rank's edge, which rows run), rows in order."""
    tokens = lengths + 1
    left = cap - (rank_cumsum(tokens, ranks) - tokens)
    running = left >= 1
    return np.minimum(lengths, np.maximum(left - 1, 0)), running


NONE = np.zeros(0, dtype=np.int64)
RETIRED_ROWS = 1024  # finished requests' counters are written to the log in bulk, this many at a time
LEDGER_STEPS, LEDGER_VERIFIED = len(COLUMNS), len(COLUMNS) + 1  # extra rows of DecodeCore.retired
