"""A static batch priced by the step model alone: no scheduler, no arrivals, no queue.

    batch = StaticBatch.of(scenario)                    the engine's parts and its one price, as a run builds them
    batch.decode_step_ms(requests=64, kv_per_request=1032)   one decode step of 64 rows, each holding 1,032 KV tokens
    batch.prefill_ms(requests=4, prompt_tokens=1024)    the batch's prompts, chunk by chunk, to the first token

This is the one module of the replication suite that calls the engine's price
(`specplan.simulator.engine.price.StepPricer`, built from the scenario by
`specplan.simulator.engine.assembly.assemble` exactly as a simulated replica
builds it): the clock a serving run charges and the price a step case is
compared with are the same function. What a step case adds is only the batch:

- **A decode step** of R rows, each holding the same KV: R anchor tokens (no
  drafts: step cases run without speculation), the KV context as the engine's
  context rule counts it (`batch.attention_context`), and under data-parallel
  attention the rows spread over the ranks one by one (rank r holds rows r, r + D,
  ...), each rank's load as `phases.step_load` builds it, so the step lasts its
  busiest rank as in a run.
- **The prefill** of R prompts of L tokens, none cached: a fixed-rate prefill
  stage (`engine.prefill.mode: disaggregated`) takes R·L / its rate; chunked
  prefill runs steps of prompt chunks, FIFO within each rank's chunk budget
  (the engine's `chunk_tokens`, per rank under data-parallel attention), each
  step priced by the quote with its prompt tokens (and, where the engine prices
  ranks or separate prefill batches, each rank's chunk and its attention pairs
  n(n + 2p)), until every prompt is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.batch import attention_context
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.price.pricer import StepPricer
from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.engine.step_modes import step_modes


@dataclass(frozen=True)
class StaticBatch:
    """The engine of one scenario, asked for the price of a static batch's steps."""

    config: EngineConfig
    pricer: StepPricer

    @classmethod
    def of(cls, scenario: Any) -> StaticBatch:
        """The engine's parts as a run assembles them, its price with no per-step policy decision to pay for."""
        parts = assemble(scenario)
        pricer = StepPricer(parts.profile, parts.drafter.draft_ms, parts.config, pays_scheduling=False,
                            modes=step_modes(parts.config))
        return cls(parts.config, pricer)

    @property
    def ranks(self) -> int:
        return 1 if self.config.dp is None else self.config.dp.ranks

    def rows_per_rank(self, requests: int) -> np.ndarray:
        """Rows on each attention rank, dealt one by one (the busiest holds ceil(R / D))."""
        return np.bincount(np.arange(requests) % self.ranks, minlength=self.ranks)

    def context(self, kv: np.ndarray) -> int:
        """The KV context of rows holding `kv` tokens each, as the engine's context rule counts it."""
        queries = self.config.profiled_queries
        return attention_context(kv, None, None, self.config.padded_attention, 1.0 if queries is None else 1.0 / queries)

    def decode_step_ms(self, requests: int, kv_per_request: int) -> float:
        """One decode step of `requests` rows, one token each, every row holding `kv_per_request` KV tokens."""
        kv = np.full(requests, kv_per_request, dtype=np.int64)
        rows = self.rows_per_rank(requests)
        zero = np.zeros(self.ranks, dtype=np.int64)
        load = StepLoad(rows, zero, rows * kv_per_request, zero, zero, zero) if self.pricer.loads else None
        quote = self.pricer.quote(requests, requests, 0, self.context(kv), 0, load=load)
        return quote.step_ms(requests)

    def prefill_ms(self, requests: int, prompt_tokens: int) -> float:
        """The prompts of a batch computed to their first token, nothing cached (module docstring): the last one's."""
        return float(self.first_tokens_ms(requests, prompt_tokens).max())

    def first_tokens_ms(self, requests: int, prompt_tokens: int) -> np.ndarray:
        """When each prompt of the batch is computed (its first token), from the batch's start, in ms."""
        rate = self.config.prefill_tokens_per_s
        if rate is not None:  # a FIFO stage: prompt after prompt
            return 1000.0 * prompt_tokens * np.arange(1, requests + 1) / rate
        left = np.full(requests, prompt_tokens, dtype=np.int64)
        done_at = np.zeros(requests)
        rank = np.arange(requests) % self.ranks
        budget = self.chunk_budget()
        clock = 0.0
        while left.any():
            take = fifo_take(left, rank, budget, self.ranks)
            clock += self.prefill_step_ms(take, prompt_tokens - left, rank, requests)
            left -= take
            done_at[(take > 0) & (left == 0)] = clock
        return done_at

    def chunk_budget(self) -> int:
        """Prompt tokens one rank computes per step (the whole batch's tokens when prefill is not chunked)."""
        if self.config.dp is not None and self.config.dp.chunk_tokens:
            return self.config.dp.chunk_tokens
        return self.config.chunk_tokens or self.config.max_step_tokens

    def prefill_step_ms(self, take: np.ndarray, done: np.ndarray, rank: np.ndarray, requests: int) -> float:
        """One step computing `take` prompt tokens per row over `done` already computed, no row decoding."""
        tokens = int(take.sum())
        chunked = take > 0
        load = None
        if self.pricer.loads:
            load = prefill_load(take, done, rank, self.ranks, self.config.prefill_schedule == "separate")
        quote = self.pricer.quote(requests, 0, 0, self.context(done[chunked]), 0, load=load, prefill_tokens=tokens)
        return quote.step_ms(tokens)


def fifo_take(left: np.ndarray, rank: np.ndarray, budget: int, ranks: int) -> np.ndarray:
    """Each rank's prompt tokens this step: its rows in order, each taking what the rank's budget leaves."""
    take = np.zeros_like(left)
    room = np.full(ranks, budget, dtype=np.int64)
    for row in range(left.size):
        amount = min(int(left[row]), int(room[rank[row]]))
        take[row] = amount
        room[rank[row]] -= amount
    return take


def prefill_load(take: np.ndarray, done: np.ndarray, rank: np.ndarray, ranks: int, separate: bool) -> StepLoad:
    """The step's load per rank as `phases.step_load` builds it for rows taking prompt chunks and none decoding."""
    zero = np.zeros(ranks, dtype=np.int64)
    chunk = np.bincount(rank, weights=take, minlength=ranks).astype(np.int64)
    chunk_context = np.bincount(rank, weights=np.where(take > 0, done, 0), minlength=ranks)
    if separate:
        pairs = np.bincount(rank, weights=take * (take + 2.0 * done), minlength=ranks)
        return StepLoad(zero, zero, zero, chunk, pairs, chunk_context)
    return StepLoad(zero, chunk, chunk_context, zero, zero, zero)
