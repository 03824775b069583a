"""One replica: a continuous-batching speculative decode engine, one SimPy process.

Each loop iteration is one engine step and exactly one SimPy event:

    admit   waiting requests, FIFO, while a batch slot and KV capacity remain
            (a request's footprint is prompt + generated + the draft block γ)
    draft   the drafter proposes γ tokens for every decoding request: true
            acceptance p (R × γ), confidences c, and the step's outcomes,
            drawn for the whole batch at once
    decide  the policy picks ℓ (R,) from a StepView (confidences, never p)
    time    step = drafting + profile.step_ms(B) + scheduling overhead
            (none for policies that hide it) + host overhead (every step, every
            policy: a + b·requests), B = Σ(1 + ℓ) + prefill chunk
    emit    min(accepted + 1, remaining) tokens per request; finish requests

Prefill is either disaggregated (a FIFO prefill stage at tokens_per_s; the
first token comes from prefill) or chunked (prompt chunks share the step's
token budget and the first token comes at the end of the step that
finishes the prompt). When KV growth overflows the capacity, the youngest
requests are preempted (recompute-style: back to the head of the queue,
their prompt and generated tokens prefilled again on re-admission).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from policies.base import Policy, StepOutcome, StepView, step_view
from policies.registry import make_policy
from simulator.core.streams import stream
from simulator.engine.batch import Batch, attention_context
from simulator.engine.intake import admit_fifo
from simulator.engine.records import DONE, PREFILL, QUEUED, RequestLog, StepLog
from simulator.scenario import ChunkedPrefill, Scenario


class Replica:
    """A decode engine; `submit(rid)` hands it a routed request."""

    def __init__(
        self, env: simpy.Environment, index: int, scenario: Scenario, profile: Any, drafter: Any,
        log: RequestLog, steps: StepLog, on_done: Callable[[int], None],
    ) -> None:
        self.env, self.index, self.log, self.steps, self.on_done = env, index, log, steps, on_done
        self.drafter = drafter
        self.profile = profile
        engine = scenario.engine
        self.max_batch = engine.max_batch_requests
        self.kv_capacity = engine.kv_capacity_tokens
        prefill = engine.prefill
        self.chunked = isinstance(prefill, ChunkedPrefill)
        self.chunk_tokens = prefill.chunk_tokens if isinstance(prefill, ChunkedPrefill) else 0
        self.prefill_rate = 0.0 if isinstance(prefill, ChunkedPrefill) else prefill.tokens_per_s
        self.max_step_tokens = engine.max_step_tokens or profile.max_tokens
        self.gamma = drafter.block_size
        self.policy = make_policy(scenario.policy, self.gamma)
        self.speculates = self.policy.drafts and self.gamma > 0
        self.overhead_ms = 0.0 if self.policy.hides_scheduling else engine.scheduling_overhead_ms
        self.host_ms = (engine.host_overhead_ms, engine.host_overhead_per_request_ms)
        self.learns = type(self.policy).observe is not Policy.observe
        budget = np.arange(self.max_step_tokens + 1)
        self.steps_per_s = profile.steps_per_s(np.maximum(budget, 1))
        self.uses_context = getattr(profile, "context_tokens", None) is not None
        self.padded_attention = engine.attention == "padded"
        seed = scenario.seed
        self.rng_p = stream(seed, "acceptance", index)
        self.rng_c = stream(seed, "confidence", index)
        self.rng_u = stream(seed, "outcomes", index)
        self.queue: deque[int] = deque()
        self.batch = Batch()
        self.prefill_free_at = 0.0
        self.in_prefill = 0
        self.step_index = 0
        self.wake: simpy.Event | None = None
        self.outcome_buffer = np.zeros((0, self.gamma + 1), dtype=bool)
        self.drafted_all = np.ones(0, dtype=bool)
        env.process(self.run())

    # ---- arrivals -----------------------------------------------------------------
    def outstanding(self) -> int:
        """Requests this replica holds: in prefill, queued, or running."""
        return self.in_prefill + len(self.queue) + self.batch.n

    def fits_ever(self, rid: int) -> bool:
        need = int(self.log["prompt_tokens"][rid] + self.log["output_tokens"][rid]) + self.gamma
        return need <= self.kv_capacity

    def submit(self, rid: int) -> None:
        self.log["replica"][rid] = self.index
        if not self.fits_ever(rid):
            self.log.reject(rid, "kv_capacity: prompt + output + block exceed kv_capacity_tokens")
            self.on_done(rid)
            return
        if self.chunked:
            self.enqueue(rid)
        else:
            self.start_prefill(rid, int(self.log["prompt_tokens"][rid]), first=True)

    def start_prefill(self, rid: int, tokens: int, first: bool) -> None:
        """Disaggregated prefill: a FIFO stage at tokens_per_s, then the decode queue."""
        now = self.env.now
        done_at = max(now, self.prefill_free_at) + tokens / self.prefill_rate
        self.prefill_free_at = done_at
        self.in_prefill += 1
        self.log["status"][rid] = PREFILL
        event = self.env.timeout(done_at - now)
        event.callbacks.append(lambda _e: self.prefill_done(rid, first))

    def prefill_done(self, rid: int, first: bool) -> None:
        self.in_prefill -= 1
        log = self.log
        if first:
            log["first_token_s"][rid] = self.env.now
            log["generated_tokens"][rid] = 1
            if log["output_tokens"][rid] <= 1:
                self.finish(np.array([rid]))
                return
        self.enqueue(rid)

    def enqueue(self, rid: int, front: bool = False) -> None:
        self.log["status"][rid] = QUEUED
        if front:
            self.queue.appendleft(rid)
        else:
            self.queue.append(rid)
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    # ---- admission ----------------------------------------------------------------
    def kv_used(self) -> int:
        return int(self.batch["kv_tokens"].sum()) + self.batch.n * self.gamma

    def admit(self) -> None:
        if not self.queue or self.batch.n >= self.max_batch:
            return
        admitted = admit_fifo(self.queue, self.log, self.env.now, self.max_batch - self.batch.n,
                              self.kv_used(), self.kv_capacity, self.gamma)
        if admitted:
            rows: dict[str, list] = {name: [] for name in self.batch.cols}
            for rid, generated, kv in admitted:
                self.add_row(rows, rid, generated, kv)
            self.batch.append(rows)

    def add_row(self, rows: dict[str, list], rid: int, generated: int, kv: int) -> None:
        log = self.log
        prefill_left = kv if self.chunked else 0
        values = {"rid": rid, "remaining": int(log["output_tokens"][rid]) - generated,
                  "generated": generated, "kv_tokens": kv - prefill_left, "domain": int(log["domain"][rid]),
                  "offset": float(log["acceptance_offset"][rid]), "prefill_left": prefill_left,
                  "steps": 0, "accepted": 0, "verified": 0}
        for name, value in values.items():
            rows[name].append(value)

    # ---- the engine loop ------------------------------------------------------------
    def run(self) -> Generator[simpy.Event, Any, None]:
        while True:
            self.admit()
            if self.batch.n == 0:
                self.wake = self.env.event()
                yield self.wake
                self.wake = None
                continue
            plan = self.plan_step()
            yield self.env.timeout(plan[0])
            self.complete_step(plan)

    def plan_step(self) -> tuple:
        """Draw, decide and time one step; returns what `complete_step` applies."""
        b = self.batch
        decode = None
        prefill_take = None
        prefill_tokens = 0
        if self.chunked and np.any(b["prefill_left"] > 0):
            decode = b["prefill_left"] == 0
            prefill_take = self.prefill_chunks(b["prefill_left"], int(decode.sum()))
            prefill_tokens = int(prefill_take.sum())
        rows = slice(None) if decode is None else decode
        r = b.n if decode is None else int(decode.sum())
        lengths, accepted, drafting = self.speculate(rows, r, prefill_tokens)
        verify_tokens = r + int(lengths.sum()) + prefill_tokens
        if self.uses_context:
            context = attention_context(b["kv_tokens"], decode, prefill_take, self.padded_attention)
            verify_ms = float(self.profile.step_ms(verify_tokens, context))
        else:
            verify_ms = float(self.steps_per_s_ms(verify_tokens))
        draft_ms = self.drafter.draft_ms(drafting) if drafting else 0.0
        overhead_ms = (self.overhead_ms if r else 0.0) + self.host_ms[0] + self.host_ms[1] * b.n
        duration_s = (draft_ms + verify_ms + overhead_ms) / 1000.0
        return (duration_s, rows, r, lengths, accepted, prefill_take, prefill_tokens,
                drafting, verify_tokens, draft_ms, verify_ms, overhead_ms)

    def steps_per_s_ms(self, tokens: int) -> float:
        if tokens <= self.max_step_tokens:
            return 1000.0 / self.steps_per_s[tokens]
        return float(self.profile.step_ms(tokens))

    def prefill_chunks(self, left: np.ndarray, decode_requests: int) -> np.ndarray:
        """Tokens of each prefilling row taken this step: FIFO within the chunk budget."""
        budget = min(self.chunk_tokens, self.max_step_tokens - decode_requests)
        budget = max(budget, 0)
        before = np.cumsum(left) - left
        return np.clip(budget - before, 0, left)

    def speculate(self, rows: Any, r: int, reserved: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Verification lengths ℓ, accepted drafts and the number of drafting requests."""
        if not self.speculates or r == 0:
            zeros = np.zeros(r, dtype=np.int64)
            return zeros, zeros, 0
        b = self.batch
        ids = b["rid"][rows]
        mask = self.policy.drafting_mask(ids)
        p, c = self.drafter.draft(b["domain"][rows], b["offset"][rows], self.rng_p, self.rng_c)
        prefix = self.accepted_prefix(p)
        drafting = r
        if mask is not None:
            drafted = np.asarray(mask, dtype=bool)
            c = np.where(drafted[:, None], c, 0.0)
            prefix = np.where(drafted, prefix, 0)
            drafting = int(drafted.sum())
        else:
            drafted = self.all_drafted(r)
        view = self.view(c, ids, reserved, drafted, prefix)
        lengths = np.asarray(self.policy.decide(view), dtype=np.int64)
        if mask is not None:
            lengths = np.where(drafted, lengths, 0)
        return lengths, np.minimum(prefix, lengths), drafting

    def accepted_prefix(self, p: np.ndarray) -> np.ndarray:
        """Drafts the target accepts per request: the first position whose uniform draw is ≥ p.

        The outcomes go into a buffer with one extra, always-rejected column, so a
        single argmin gives γ for a fully accepted block.
        """
        r = p.shape[0]
        if self.outcome_buffer.shape[0] < r:
            self.outcome_buffer = np.zeros((r, self.gamma + 1), dtype=bool)
        ok = self.outcome_buffer[:r]
        np.less(self.rng_u.random(p.shape), p, out=ok[:, : self.gamma])
        return ok.argmin(axis=1)

    def all_drafted(self, r: int) -> np.ndarray:
        if self.drafted_all.size != r:
            self.drafted_all = np.ones(r, dtype=bool)
        return self.drafted_all

    def view(self, c: np.ndarray, ids: np.ndarray, reserved: int, drafted: np.ndarray,
             prefix: np.ndarray) -> StepView:
        return step_view(self.policy, prefix, confidences=c, request_ids=ids, steps_per_s=self.steps_per_s,
                         max_step_tokens=self.max_step_tokens, reserved_tokens=reserved,
                         max_batch_requests=self.max_batch, block_size=self.gamma,
                         step_index=self.step_index, now_s=self.env.now, drafted=drafted)

    def complete_step(self, plan: tuple) -> None:
        (_, rows, r, lengths, accepted, prefill_take, prefill_tokens,
         drafting, verify_tokens, draft_ms, verify_ms, overhead_ms) = plan
        b = self.batch
        now = self.env.now
        emitted = 0
        if r:
            emit = np.minimum(accepted + 1, b["remaining"][rows])
            emitted = int(emit.sum())
            self.apply_emission(rows, emit, accepted, lengths)
            if self.learns:
                self.policy.observe(StepOutcome(b["rid"][rows], lengths, accepted, now))
        if prefill_take is not None:
            emitted += self.advance_prefill(prefill_take)
        self.steps.add((now, self.index, b.n, r, drafting, verify_tokens, prefill_tokens, emitted,
                        int(accepted.sum()), draft_ms, verify_ms, overhead_ms))
        self.step_index += 1
        done = b["remaining"] <= 0
        if prefill_take is not None:
            done &= b["prefill_left"] == 0
        if done.any():
            self.retire(done)
        if self.kv_used() > self.kv_capacity:
            self.preempt()

    def apply_emission(self, rows: Any, emit: np.ndarray, accepted: np.ndarray, lengths: np.ndarray) -> None:
        c = self.batch.cols
        if isinstance(rows, slice):
            c["remaining"] -= emit
            c["generated"] += emit
            c["kv_tokens"] += emit
            c["steps"] += 1
            c["accepted"] += accepted
            c["verified"] += lengths
            return
        for name, delta in (("remaining", -emit), ("generated", emit), ("kv_tokens", emit),
                            ("steps", 1), ("accepted", accepted), ("verified", lengths)):
            c[name][rows] += delta

    def advance_prefill(self, take: np.ndarray) -> int:
        """Apply this step's prompt chunks; rows whose prompt completes emit their first token."""
        b, log = self.batch, self.log
        was = b["prefill_left"] > 0
        b["prefill_left"][...] -= take
        b["kv_tokens"][...] += take
        finished = was & (b["prefill_left"] == 0)
        ids = b["rid"][finished]
        first = ids[np.isnan(log["first_token_s"][ids])]
        log["first_token_s"][first] = self.env.now
        fresh = np.isin(b["rid"], first) & finished
        b["generated"][fresh] += 1
        b["kv_tokens"][fresh] += 1
        b["remaining"][fresh] -= 1
        return int(fresh.sum())

    def retire(self, done: np.ndarray) -> None:
        b = self.batch
        self.flush(done)
        ids = b["rid"][done]
        b.keep(~done)
        self.finish(ids)

    def flush(self, rows: np.ndarray) -> None:
        """Add a set of rows' counters to the request log."""
        b, log = self.batch, self.log
        ids = b["rid"][rows]
        log["generated_tokens"][ids] = b["generated"][rows]
        for src, dst in (("steps", "steps"), ("accepted", "accepted_tokens"), ("verified", "verified_tokens")):
            log[dst][ids] += b[src][rows]

    def finish(self, ids: np.ndarray) -> None:
        log = self.log
        log["finish_s"][ids] = self.env.now
        log["status"][ids] = DONE
        for rid in ids.tolist():
            self.on_done(rid)

    def preempt(self) -> None:
        """Evict the youngest requests until the KV footprint fits again."""
        b = self.batch
        footprint = b["kv_tokens"] + self.gamma
        keep_upto = np.cumsum(footprint) <= self.kv_capacity
        keep_upto[0] = True  # the oldest request always stays (it fits on its own)
        evict = ~keep_upto
        self.flush(evict)
        ids = b["rid"][evict]
        b.keep(keep_upto)
        self.log["preemptions"][ids] += 1
        for rid in reversed(ids.tolist()):
            self.requeue(rid)

    def requeue(self, rid: int) -> None:
        if self.chunked:
            self.enqueue(rid, front=True)
            return
        tokens = int(self.log["prompt_tokens"][rid] + self.log["generated_tokens"][rid])
        self.start_prefill(rid, tokens, first=False)
