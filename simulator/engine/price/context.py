"""What a step's forward is priced at besides its tokens: the batch's KV context and its load per attention rank.

Chosen once when the core is assembled, never a branch in the step:

    context rule   NoContext      the profile has no context axis (and drafting reads none): 0
                   KvContext      the running rows' KV as the profile's context axis counts it
                                  (`batch.attention_context`: varlen Σ, or padded per phase with
                                  the verify queries' padding scaled in)
    load rule      NoLoad         the step is priced whole (one rank, prefill mixed in): None
                   RankLoads      the step per attention rank (`phases.step_load`), when ranks are
                                  priced apart or a separate prefill batch runs beside decode
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from specplan.simulator.engine.batch import Batch, Rows, attention_context
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.phases import step_load
from specplan.simulator.engine.price.rank_load import StepLoad


class ContextRule(Protocol):
    def tokens(self, batch: Batch, rows: Rows, take: np.ndarray | None, longest: int) -> int:
        """The KV context of the rows the step runs (`longest`: the longest verify block it may take)."""
        ...


class NoContext:
    def tokens(self, batch: Batch, rows: Rows, take: np.ndarray | None, longest: int) -> int:
        return 0


class KvContext:
    """The running rows' KV context (`engine.attention`: varlen or padded)."""

    def __init__(self, config: EngineConfig) -> None:
        self.padded = config.padded_attention
        self.profiled_queries = config.profiled_queries

    def tokens(self, batch: Batch, rows: Rows, take: np.ndarray | None, longest: int) -> int:
        kv = batch.kv_tokens()
        scale = 1.0 if self.profiled_queries is None else longest / self.profiled_queries
        if rows.whole and take is None:
            return attention_context(kv, None, None, self.padded, scale)
        running = np.zeros(kv.size, dtype=bool)
        running[rows.index] = True
        return attention_context(kv, running, take, self.padded, scale)


class LoadRule(Protocol):
    def of(self, batch: Batch, rows: Rows, take: np.ndarray | None) -> StepLoad | None: ...


class NoLoad:
    def of(self, batch: Batch, rows: Rows, take: np.ndarray | None) -> StepLoad | None:
        return None


class RankLoads:
    """The step per attention rank (one rank with a separate prefill batch)."""

    def __init__(self, config: EngineConfig) -> None:
        self.ranks = 1 if config.dp is None else config.dp.ranks
        self.separate = config.chunked and config.prefill_schedule == "separate"

    def of(self, batch: Batch, rows: Rows, take: np.ndarray | None) -> StepLoad | None:
        return step_load(batch, rows, take, self.ranks, self.separate)


def context_rule(config: EngineConfig, reads_context: bool) -> ContextRule:
    return KvContext(config) if reads_context else NoContext()


def load_rule(config: EngineConfig, loads: bool) -> LoadRule:
    return RankLoads(config) if loads else NoLoad()
