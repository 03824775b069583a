"""The decode core: one continuous-batching speculative decode engine's step logic, without a clock.

Every driver runs it through one loop (specplan.simulator.engine.core.step.serve):
the simulator's replicas charge each step's price, the reference engine
(specplan.validation.engine) runs real forwards and reads the wall clock,
the tests' driver steps it back to back. One step:

    admit     waiting requests, FIFO, under the KV rule (`kv.admit` answers which; the core marks them
              admitted in the log)
    schedule  decoding rows, the token budget's rows (`budget.select`), prompt chunks,
              drafts, the policy's lengths ℓ, the budget's cut (`budget.cut`), the
              accepted prefixes, and the step's price quote and verify tokens B
    (time)    the driver prices or measures the step and waits for its end
    commit    emit min(accepted + 1, remaining) per request (`Ledger.emit`), advance prompt
              chunks (a finished prompt emits its first token), record the step, retire
              finished requests, preempt on KV overflow (`kv.preempt`)

The core holds the engine's state apart from its rules (specplan.simulator.engine.core.state:
the queue, the batch, the KV they hold) and asks its rules, each chosen once
when the core is assembled (specplan.simulator.engine.assembly), never a
branch in the step:

    kv          the KV caches (caches: one, or one per data-parallel attention rank)
    budget      the token budget's rule (budget: defer, truncate, per-rank caps)
    phases      chunked prefill's schedule (phases: mixed or separate)
    prompts     where prompts are computed (prompts: staged before the engine, or chunked here)
    speculator  the drafts and their outcomes (speculator: none, fixed lengths, read by the policy)
    acceptance  each admitted request's acceptance row, the speculator's rule made for every request
                registered since the last block (speculator.AcceptanceRows, one per log)
    quotes      the step's price (price: one pricer, quotes cached by batch shape or fresh), its mode
                decided by the engine's rule (step_modes: graph, piecewise or eager) and kept in the plan
    context, loads  what the price reads besides B (forward: the KV context, the per-rank load)
    recorders   what is recorded (recorders: the logs, counters, emissions, draft sample)

**The KV rule** (one choice, the same for every driver; docs/model/index.md): a request reserves
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

Draws: the speculator's (specplan.simulator.engine.speculator).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specplan.simulator.engine.batch import RID
from specplan.simulator.engine.budget import TokenBudget
from specplan.simulator.engine.caches import KvCaches
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.core.state import BatchState
from specplan.simulator.engine.core.step import NEW, StepPlan, StepTiming
from specplan.simulator.engine.phases import PrefillPhases
from specplan.simulator.engine.price.context import ContextRule, LoadRule
from specplan.simulator.engine.prompts import Prompts
from specplan.simulator.engine.records.recorders import Emission, Recorders
from specplan.simulator.engine.speculator import AcceptanceRows, Speculator, StepInputs

NONE = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Rules:
    """The core's rules, chosen at assembly (the module docstring)."""

    kv: KvCaches
    budget: TokenBudget
    phases: PrefillPhases
    prompts: Prompts
    speculator: Speculator
    acceptance: AcceptanceRows        # the requests' acceptance rows (the speculator's rule, made in blocks)
    context: ContextRule
    loads: LoadRule
    emissions: tuple[Emission, ...]   # told what each decode step emitted (chunk log, a learning policy)


class DecodeCore:
    """One engine's queue, running batch and step logic (see the module docstring): admit, schedule, commit."""

    def __init__(self, config: EngineConfig, rules: Rules, recorders: Recorders, index: int = 0) -> None:
        self.config, self.rules, self.recorders, self.index = config, rules, recorders, index
        self.state = BatchState(config.block_size, config.batch_requests)
        self.step_index = 0

    # ---- what drivers read ----------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        return len(self.state.queue)

    @property
    def running(self) -> int:
        return self.state.batch.n

    def decoding_ids(self, plan: StepPlan) -> np.ndarray:
        """The ids of the requests a planned step decodes (kept past the step: the batch's ids are a fresh array
        at each change of rows, never written, so every row's are the array itself)."""
        rows = plan.rows
        return rows.of(self.state.batch.rids)

    # ---- intake -----------------------------------------------------------------------------
    def enqueue(self, rid: int, front: bool = False) -> None:
        queue = self.state.queue
        (queue.appendleft if front else queue.append)(rid)
        self.rules.kv.enqueued(self.state, rid)

    def remember(self, rid: int, blocks: Sequence[int] | None, rank: int | None = None) -> None:
        """An arrival's prompt block hashes, for a prefix cache, and the attention rank a sticky router pinned it
        to (None: the engine's dispatch chooses)."""
        self.rules.prompts.remember(rid, blocks)
        if rank is not None:
            self.rules.kv.pin(rid, rank)

    def admit(self, now: float) -> int:
        """FIFO admission under the KV rule; returns the number of requests admitted."""
        state = self.state
        free = self.config.batch_requests - state.batch.n
        if not state.queue or free <= 0:
            return 0
        admitted = self.rules.kv.admit(state, self.recorders.log, free)
        if admitted:
            self.add_rows(admitted, now)
        return len(admitted)

    def add_rows(self, admitted: Sequence[tuple[int, ...]], now: float) -> None:
        """Rows for requests admitted at `now`, given (id, tokens generated so far, prompt + generated tokens[,
        rank]); their log rows marked admitted here, the one place that writes it (the KV rule only answers)."""
        log, rules, opening = self.recorders.log, self.rules, self.state.ledger.opening
        output = log["output_tokens"]
        rows, kv, prefilling = [], 0, 0
        for rid, generated, tokens, *rank in admitted:
            log.admitted(rid, now)
            left = int(output[rid]) - generated
            row_rank = rank[0] if rank else 0
            prefill = rules.prompts.to_compute(rid, tokens, row_rank)
            rows.append((rid, left, tokens + left, prefill, *opening(left), row_rank))
            kv += tokens
            prefilling += 1 if prefill else 0
        block = np.array(rows, dtype=np.int64).T
        rid = block[RID]
        rules.prompts.started(rid, now, log)  # a chunked prompt's computation starts now (TTFT's queue ends)
        self.state.add(block, rules.acceptance.of(log, rid), kv, prefilling)

    # ---- schedule ---------------------------------------------------------------------------
    def schedule(self, now: float) -> StepPlan:
        """Draw, decide and price one step of the running batch (at least one row)."""
        state, rules = self.state, self.rules
        batch = state.batch
        if state.prefilling:
            decode, held = rules.phases.decoding(batch)
            r = int(np.count_nonzero(decode))
        else:
            decode, r, held = None, batch.n, 0
        planned = rules.speculator.planned(r)
        per_request = 1 + (rules.speculator.reserve if planned is None else planned)
        rows, cuts = rules.budget.select(batch, decode, r, per_request)
        take = rules.phases.chunks(batch, rows, per_request) if state.prefilling else None
        prefill_tokens = 0 if take is None else int(take.sum())
        load = rules.loads.of(batch, rows, take)
        charged = rules.phases.charged(prefill_tokens)  # the prefill tokens the decoding budget carries
        # StepInputs' fields in order, made as a tuple (every step: no Python-level __new__): reserved, room,
        # context, load, now, step_index
        step = NEW(StepInputs, (prefill_tokens, self.config.max_step_tokens + prefill_tokens - charged,
                                rules.context.tokens(batch, rows, take, rules.speculator.longest(planned)), load,
                                now, self.step_index))
        lengths, accepted, verified, drafting, quote, decision = rules.speculator.speculate(batch, rows, planned,
                                                                                           step)
        truncated = 0
        if cuts:
            rows, lengths, accepted, verified, truncated = rules.budget.cut(batch, rows, lengths, accepted, charged)
        count = rows.count
        verify_tokens = count + verified + prefill_tokens
        # StepPlan's fields in order, made as a tuple (every step: no Python-level __new__): rows, decode_requests,
        # lengths, accepted, prefill_take, prefill_tokens, drafting_requests, verify_tokens, context_tokens,
        # deferred_requests, quote, decision, truncated_drafts, held_requests, load, mode
        return NEW(StepPlan, (rows, count, lengths, accepted, take, prefill_tokens, drafting, verify_tokens,
                              step.context, r - count, quote, decision, truncated, held, load,
                              quote.mode_at(verify_tokens)))

    # ---- commit -----------------------------------------------------------------------------
    def commit(self, plan: StepPlan, timing: StepTiming, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Apply the step at its end time `now`; returns the ids of the requests it finished and preempted."""
        state, recorders = self.state, self.recorders
        state.finishing = False
        emitted, accepted = self.emit(plan, now) if plan.decode_requests else (0, 0)
        if plan.drafting_requests:  # vLLM's counters: request-steps that verified a draft, drafts verified
            lengths = plan.lengths
            verifying = plan.decode_requests if isinstance(lengths, int) else int(np.count_nonzero(lengths))
            recorders.speculation.add(plan.accepted, verifying, plan.verify_tokens - plan.decode_requests - plan.prefill_tokens)
        if plan.prefill_take is not None:
            emitted += self.rules.prompts.advance(state, plan.prefill_take, now, recorders.log)
        recorders.phases.add(plan, timing)
        recorders.steps.add(now, self.index, state.batch.n, plan, emitted, accepted, timing)
        self.step_index += 1
        finished = self.retire() if state.finishing else NONE
        evicted = self.rules.kv.preempt(state) if state.footprint > self.rules.kv.fits_below else NONE
        return finished, self.evict(evicted) if evicted.size else NONE

    def emit(self, plan: StepPlan, now: float) -> tuple[int, int]:
        """Emit accepted + 1 tokens per decoding row, up to what it has left (`Ledger.emit`); returns
        (emitted, accepted) and tells the emissions' listeners."""
        state, rows, accepted = self.state, plan.rows, plan.accepted
        emitted, total, over = state.ledger.emit(state.batch, rows, accepted, plan.lengths)
        if over is not None:
            state.finishing = True
        for emission in self.rules.emissions:
            emission.emitted(state.batch, rows, accepted, over, plan.lengths, now)
        state.footprint += emitted
        return emitted, total

    def retire(self) -> np.ndarray:
        """Finished requests (nothing left to emit) leave the batch; returns their ids."""
        done = self.state.finished_rows()
        return self.state.remove(done, self.recorders.log, finished=True) if done.size else NONE

    def evict(self, index: np.ndarray) -> np.ndarray:
        """Preempt the rows at `index` (the KV rule chose them, in eviction order); returns their ids."""
        evicted = self.state.remove(index, self.recorders.log)
        self.recorders.log.preempted(evicted)
        return evicted

    def drain(self) -> None:
        """Write every request's counters to the log (at the end of a run, or before reading them)."""
        self.state.drain(self.recorders.log)
        self.recorders.speculation.flush()
