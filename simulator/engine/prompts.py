"""Where a request's prompt is computed: before the engine (a prefill stage or pool) or in its own steps, in chunks.

Chosen once when the core is assembled (`prompts`), never a branch in the step:

    Staged    the prompt's KV reaches the engine computed (disaggregated prefill): nothing to compute
    Chunked   the engine computes the prompt in chunks (chunked prefill, the schedule in
              specplan.simulator.engine.phases), less what its prefix cache holds
              (`engine.prefix_cache`, specplan.simulator.engine.cluster.prefix_cache); the step that computes
              a prompt's last chunk emits its first token

    prompts.to_compute(rid, tokens, rank)    prompt tokens an admitted request still computes (on that rank)
    prompts.started(rids, now, log)          their computation starts at admission (TTFT's queue ends)
    prompts.advance(state, take, now, log)   a step computed `take` tokens per row; returns tokens emitted
    prompts.remember(rid, blocks)            an arrival's prompt block hashes, for the prefix cache
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from specplan.simulator.engine.batch import ACCEPTED, PREFILL_LEFT, REMAINING, RID
from specplan.simulator.engine.cluster.kv_tiers import ReplicaTiers
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.state import BatchState


class Prompts(Protocol):
    def to_compute(self, rid: int, tokens: int, rank: int = 0) -> int: ...

    def started(self, rids: np.ndarray, now: float, log: RequestLog) -> None: ...

    def advance(self, state: BatchState, take: np.ndarray, now: float, log: RequestLog) -> int: ...

    def remember(self, rid: int, blocks: Sequence[int] | None) -> None: ...


class Staged:
    """Prompts computed before the engine (a prefill stage or pool): nothing left to compute here."""

    def to_compute(self, rid: int, tokens: int, rank: int = 0) -> int:
        return 0

    def started(self, rids: np.ndarray, now: float, log: RequestLog) -> None:
        pass

    def advance(self, state: BatchState, take: np.ndarray, now: float, log: RequestLog) -> int:
        raise AssertionError("a staged prompt has no chunks")

    def remember(self, rid: int, blocks: Sequence[int] | None) -> None:
        pass


class Chunked(Staged):
    """The engine computes prompts in chunks, after the prefix its cache holds (the module docstring)."""

    def __init__(self, cache: ReplicaTiers | None) -> None:
        self.cache = cache

    def to_compute(self, rid: int, tokens: int, rank: int = 0) -> int:
        """Tokens the prefix cache of the request's attention rank holds are not computed again (their KV still
        counts)."""
        return tokens if self.cache is None else tokens - self.cache.cached_tokens(rid, tokens, rank)

    def started(self, rids: np.ndarray, now: float, log: RequestLog) -> None:
        log.prefill_started(rids, now)

    def remember(self, rid: int, blocks: Sequence[int] | None) -> None:
        if blocks is not None and len(blocks) and self.cache is not None:
            self.cache.remember(rid, blocks)

    def advance(self, state: BatchState, take: np.ndarray, now: float, log: RequestLog) -> int:
        """Apply this step's prompt chunks; a request whose first prompt completes emits its first token."""
        ints = state.batch.ints
        was = ints[PREFILL_LEFT] > 0
        ints[PREFILL_LEFT] -= take
        done = was & (ints[PREFILL_LEFT] == 0)
        state.prefilling -= int(np.count_nonzero(done))
        ids = ints[RID][done]
        if self.cache is not None and ids.size:
            self.cache.prompts_done(ids)
        log.kv_ready(ids, now, computed=True)  # its KV is in this engine's cache already
        first = log.first_token(ids, now, counted=True)
        if first.size == 0:
            return 0
        fresh = done if first.size == ids.size else done & np.isin(ints[RID], first)   # first: ids not yet served
        ints[REMAINING, fresh] -= 1
        ints[ACCEPTED, fresh] -= 1  # an emitted token that was not an accepted draft (Ledger)
        state.footprint += first.size
        state.finishing = True
        return int(first.size)


def prompts(chunked: bool, cache: ReplicaTiers | None) -> Prompts:
    return Chunked(cache) if chunked else Staged()
