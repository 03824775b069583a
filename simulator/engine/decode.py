"""The decode core: one continuous-batching speculative decode engine's step logic, without a clock.

Every driver runs it through one loop (specplan.simulator.engine.step.serve):
the simulator's replicas charge each step's price, the reference engine
(specplan.validation.engine) runs real forwards and reads the wall clock,
the tests' driver steps it back to back. One step:

    admit     waiting requests, FIFO, under the KV rule (`kv.admit`)
    schedule  decoding rows, the token budget's rows (`budget.select`), prompt chunks,
              drafts, the policy's lengths ℓ, the budget's cut (`budget.cut`), the
              accepted prefixes, and the step's price quote and verify tokens B
    (time)    the driver prices or measures the step and waits for its end
    commit    emit min(accepted + 1, remaining) per request (`Ledger.emit`), advance prompt
              chunks (a finished prompt emits its first token), record the step, retire
              finished requests, preempt on KV overflow (`kv.preempt`)

What differs between engines is chosen once, when the core is assembled
(specplan.simulator.engine.assembly), never a branch in the step: the token
budget's rule (specplan.simulator.engine.budget: defer, truncate, per-rank
caps) and the KV caches (specplan.simulator.engine.caches: one, or one per
data-parallel attention rank), as are the prompt cache and the chunk log.

**The KV rule** (one choice, the same for every driver): a request reserves
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
(rejected on arrival: specplan.simulator.engine.intake.kv_misfit).

**The token budget** (`max_step_tokens`): decoding requests come first,
then prompt chunks. A policy that chooses within the budget (`fits_budget`)
gets one anchor token per request reserved; for the others the engine
reserves the policy's planned length (or the whole block) per request
before drafting; the rule then decides who runs and where drafts are cut.

Draws: for a policy that reads the drafts, acceptance logits x = row +
token noise (`acceptance` stream), a draft is accepted when a logistic
draw falls below x (`outcomes`), and the confidence head reads x
(`confidence`). A fixed-length policy reads nothing but the outcomes, so
its requests carry their acceptance with the token noise averaged out and
a draft is accepted when a uniform draw falls below it (`outcomes`): the
same outcome distribution for fewer draws. A sample of the steps' drafts
goes to the run's draft record (specplan.simulator.engine.draft_record).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from specplan.hwprofiles.profile import StepProfile
from specplan.policies.base import Decision, OracleView, Policy, StepOutcome, StepView
from specplan.simulator.core.streams import stream
from specplan.simulator.drafters.drafter import Drafter
from specplan.simulator.engine.batch import (
    ACCEPTED,
    ALL,
    PREFILL_LEFT,
    REMAINING,
    RID,
    TOTAL,
    Batch,
    Ledger,
    RetiredRows,
    attention_context,
)
from specplan.simulator.engine.budget import TokenBudget
from specplan.simulator.engine.caches import KvCaches
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.draft_record import SAMPLE_EVERY, draft_tally
from specplan.simulator.engine.phases import PhaseCounters, PrefillPhases, StepLoad, step_load
from specplan.simulator.engine.price import LoadQuote, StepPricer, StepQuote
from specplan.simulator.engine.records import (
    ChunkLog,
    RequestLog,
    SpecCounters,
    StepLog,
)
from specplan.simulator.engine.step import StepPlan, StepTiming

NONE = np.zeros(0, dtype=np.int64)


# A step's drafts as settled: ℓ, accepted drafts, Σℓ, drafting requests, the quote and the Decision
# (a plain tuple: built every step, read once by `schedule`)
Speculation = tuple[np.ndarray | int, np.ndarray, int, int, StepQuote, Decision | None]


class DecodeCore:
    """One engine's queue, running batch and step logic (see the module docstring).

    Wired at construction: the token budget's rule, the KV caches and chunked prefill's schedule
    (chosen by the assembly), a prompt cache (chunked prefill with `engine.prefix_cache`:
    `cached_tokens(rid, n)`, `prompts_done(ids)`) and a chunk log of every step's emissions
    (the ITL statistics).
    """

    def __init__(self, config: EngineConfig, policy: Policy, drafter: Drafter, profile: StepProfile,
                 log: RequestLog, steps: StepLog, seed: int, *, budget: TokenBudget, kv: KvCaches,
                 phases: PrefillPhases, index: int = 0, prompt_cache: Any = None,
                 chunks: ChunkLog | None = None) -> None:
        self.config, self.policy, self.drafter, self.log, self.steps = config, policy, drafter, log, steps
        self.budget, self.kv, self.phases, self.index = budget, kv, phases, index
        self.prompt_cache, self.chunks = prompt_cache, chunks
        self.acceptance, self.confidence = drafter.acceptance, drafter.confidence
        self.block_size = config.block_size
        self.speculates = policy.drafts and self.block_size > 0
        self.learns = policy.learns
        self.fixed = policy.length_setting == "fixed"
        self.row_acceptance = drafter.row_probabilities if self.fixed else drafter.row_logits  # Batch.acceptance
        self.reserve = 0 if policy.fits_budget or not self.speculates else self.block_size
        self.pricer = StepPricer(profile, drafter.draft_ms, config, policy.pays_scheduling(),
                                 getattr(drafter.latency, "uses_positions", True))
        self.uses_context = self.pricer.uses_context or drafter.latency.uses_context
        self.separate = config.chunked and config.prefill_schedule == "separate"
        self.ranks = 1 if config.dp is None else config.dp.ranks
        self.load: StepLoad | None = None  # the step per attention rank, when the pricer reads it
        self.phase_counts = PhaseCounters()
        self.rng_p = stream(seed, "acceptance", index)
        self.rng_c = stream(seed, "confidence", index)
        self.rng_u = stream(seed, "outcomes", index)
        self.queue: deque[int] = deque()
        self.max_batch_requests = config.engine.max_batch_requests
        self.batch = Batch(self.block_size, self.max_batch_requests)
        self.footprint = 0
        self.prefilling = 0
        self.step_index = 0
        self.ledger = Ledger()
        self.retired = RetiredRows()
        self.spec = SpecCounters(self.block_size)
        self.outcomes: dict[int, np.ndarray] = {}
        self.drafted_all = np.ones(config.engine.max_batch_requests, dtype=bool)
        self.quotes: dict[tuple[int, int, int, int], StepQuote] = {}
        self.finishing = False  # a row may have emitted its last token this step (commit retires it)
        self.tally = draft_tally(drafter) if self.speculates else None  # what the drafts did, sampled

    # ---- intake -----------------------------------------------------------------------------
    def enqueue(self, rid: int, front: bool = False) -> None:
        (self.queue.appendleft if front else self.queue.append)(rid)
        self.kv.enqueued(self, rid)

    def admit(self, now: float) -> int:
        """FIFO admission under the KV rule; returns the number of requests admitted."""
        free = self.max_batch_requests - self.batch.n
        if not self.queue or free <= 0:
            return 0
        admitted = self.kv.admit(self, now, free)
        if admitted:
            self.add_rows(admitted, now)
        return len(admitted)

    def add_rows(self, admitted: Sequence[tuple[int, ...]], now: float) -> None:
        """Rows for requests admitted at `now`, given (id, tokens generated so far, prompt + generated tokens[,
        rank])."""
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
        block = np.array(rows, dtype=np.int64).T
        rid = block[RID]
        if chunked:  # its prefill starts when the engine admits it (TTFT's queue ends)
            self.prefilling += len(rows)
            log.stamp("prefill_start_s", rid, now)
        self.batch.append(block, self.row_acceptance(log["domain"][rid], log["acceptance_offset"][rid]))
        self.footprint += footprint + self.block_size * len(rows)

    # ---- schedule ---------------------------------------------------------------------------
    def schedule(self, now: float) -> StepPlan:
        """Draw, decide and price one step of the running batch (at least one row)."""
        if self.prefilling:
            decode, held = self.phases.decoding(self.batch)
            r = int(np.count_nonzero(decode))
        else:
            decode, r, held = None, self.batch.n, 0
        planned = self.policy.planned_length(r) if self.fixed else None
        per_request = 1 + (self.reserve if planned is None else planned)
        rows, kept, cuts = self.budget.select(self.batch, decode, r, per_request)
        take = self.phases.chunks(self.batch, rows, per_request) if self.prefilling else None
        prefill_tokens = 0 if take is None else int(take.sum())
        if self.pricer.loads:
            self.load = step_load(self.batch, rows, take, self.ranks, self.separate)
        context = self.context_tokens(rows, take, planned) if self.uses_context else 0
        lengths, accepted, verified, drafting, quote, decision = self.speculate(rows, kept, planned, prefill_tokens,
                                                                               context, now)
        truncated, decoded = 0, kept
        if cuts:  # a separate prefill batch leaves the decoding ranks their whole budget
            rows, decoded, lengths, accepted, verified, truncated = self.budget.cut(
                self.batch, rows, lengths, accepted, 0 if self.separate else prefill_tokens)
        return StepPlan(rows=rows, decode_requests=decoded, lengths=lengths, accepted=accepted, prefill_take=take,
                        prefill_tokens=prefill_tokens, drafting_requests=drafting,
                        verify_tokens=decoded + verified + prefill_tokens, context_tokens=context,
                        deferred_requests=r - decoded, quote=quote, decision=decision, truncated_drafts=truncated,
                        held_requests=held, load=self.load)

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
                  now: float) -> Speculation:
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
               now: float) -> Speculation:
        """A policy that reads the drafts: confidences, drafting mask, the view, its Decision; ℓ and what it accepts."""
        ids = self.batch.rids if rows is ALL else self.batch.rids[rows]
        c = self.confidence.observe(x, self.rng_c)
        mask = self.policy.drafting_mask(ids)
        if self.tally is not None and self.step_index % SAMPLE_EVERY == 0:
            self.record_drafts(ids, c, prefix, mask)
        c = self.budget.capped(c, self.batch, rows)
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
            quote = self.pricer.quote(self.batch.n, r, drafting, context, *decision.draft_width, load=self.load)
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

    def quote(self, n: int, r: int, drafting: int, context: int, draft_length: int) -> StepQuote:
        """The step's price; without a context axis or a per-rank load it depends on the batch's shape alone, so
        it is reused."""
        if self.load is not None:
            return self.pricer.quote(n, r, drafting, context, draft_length, load=self.load)
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
        # StepView's fields in order: confidences, request_ids, price, max_step_tokens, reserved_tokens,
        # max_batch_requests, block_size, step_index, now_s, drafted, drafting; a separate prefill batch
        # takes none of the decoding ranks' budget
        room = self.config.max_step_tokens + (reserved if self.separate else 0)
        fields = (c, ids, quote, room, reserved, self.config.engine.max_batch_requests,
                  self.block_size, self.step_index, now, drafted, drafting)
        return OracleView(*fields, accepted_prefix=prefix) if self.policy.oracle else StepView(*fields)

    def first_rejected(self, draws: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """Accepted drafts per request: the first position whose draw is not below its bound.

        Outcomes go into a buffer with one extra, always-rejected column, so a
        single argmin gives the block length for a fully accepted block.
        """
        r, length = draws.shape
        buffer = self.outcomes.get(length)
        if buffer is None or buffer.shape[0] < r:
            rows = max(r, self.config.engine.max_batch_requests)
            buffer = self.outcomes[length] = np.zeros((rows, length + 1), bool)
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
        if self.pricer.loads:
            self.count_phases(plan, timing)
        self.steps.add(now, self.index, self.batch.n, plan, emitted, accepted, timing)
        self.step_index += 1
        finished = self.retire() if self.finishing else NONE
        return finished, self.kv.preempt(self) if self.footprint > self.kv.fits_below else NONE

    def count_phases(self, plan: StepPlan, timing: StepTiming) -> None:
        """The summary's prefill and rank-balance counters (`PhaseCounters`)."""
        quote = plan.quote
        excess = quote.excess_ms(plan.verify_tokens) if isinstance(quote, LoadQuote) else 0.0
        self.phase_counts.add(plan.load, plan.held_requests, timing.draft_ms + timing.verify_ms + timing.overhead_ms,
                              excess)

    def emit(self, plan: StepPlan, now: float) -> tuple[int, int]:
        """Emit accepted + 1 tokens per decoding row, up to what it has left (`Ledger.emit`); returns
        (emitted, accepted), tells the chunk log and a learning policy."""
        rows, accepted = plan.rows, plan.accepted
        emitted, total, over = self.ledger.emit(self.batch.ints, rows, accepted, plan.lengths)
        if over is not None:
            self.finishing = True
        if self.chunks is not None:
            ids = self.batch.rids if rows is ALL else self.batch.rids[rows]
            self.chunks.add(now, ids, accepted + 1 if over is None else accepted + 1 + over)
        if self.learns:
            lengths = np.broadcast_to(plan.lengths, accepted.shape)
            self.policy.observe(StepOutcome(self.batch.ints[RID][rows], lengths, accepted, now))
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
        log.stamp("prefill_end_s", ids, now)  # its KV is in this engine's cache already
        log.stamp("kv_ready_s", ids, now)
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

    def evict(self, index: np.ndarray) -> np.ndarray:
        """Preempt the rows at `index` (the KV rule chose them); returns their ids."""
        evicted = self.remove(index)
        self.log["preemptions"][evicted] += 1
        return evicted

    def remove(self, index: np.ndarray, finished: bool = False) -> np.ndarray:
        """Take the rows at `index` out of the batch; returns their ids.

        Their counters go to the request log: at once for preempted requests
        (re-admission reads them), in bulk for finished ones (`RetiredRows`).
        """
        gone = self.batch.ints[:, index]
        if finished:
            self.retired.keep(gone, self.ledger, self.log)
        else:
            self.ledger.write(gone, self.log)
        kept = gone[TOTAL] if finished else gone[TOTAL] - gone[REMAINING]  # a finished row has nothing left
        self.footprint -= int(np.add.reduce(kept)) + self.block_size * index.size
        if self.prefilling:
            self.prefilling -= int(np.count_nonzero(gone[PREFILL_LEFT]))
        self.batch.drop(index)
        return gone[RID]

    def footprints(self, rows: Any) -> np.ndarray:
        """KV tokens the rows reserve: prompt (computed or not) + generated + the draft block."""
        return self.batch.footprints(self.block_size, rows)

    def drain(self) -> None:
        """Write every request's counters to the log (at the end of a run, or before reading them)."""
        self.retired.write(self.ledger, self.log)
        self.ledger.write(self.batch.ints, self.log)
        self.ledger.reopen(self.batch.ints)
        self.spec.flush()
