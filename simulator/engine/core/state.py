"""The engine's requests as state, apart from the rules that read it: the queue, the running batch, the KV they hold.

`BatchState` is what the decode core's rules take as input (the KV rule's
admission and preemption, the token budget, the prefill schedule) and what
the core changes when a step commits:

    queue        request ids waiting for a decode slot, FIFO (a preempted one at the head)
    batch        the running rows (specplan.simulator.engine.batch.Batch: columns × rows, arrival order)
    ledger       the rows' step counters, resolved without a per-step write (`Ledger`)
    retired      finished rows' counters until they are written to the log in bulk (`RetiredRows`)
    footprint    Σ KV tokens the rows reserve: prompt + generated + the draft block γ each
    prefilling   rows whose prompt is still being computed (chunked prefill)
    finishing    a row may have emitted its last token this step (the commit retires it)

The rules answer with row indices or admitted requests; only the core
changes the state (`add`, `remove`).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from specplan.simulator.engine.batch import (
    PREFILL_LEFT,
    REMAINING,
    RID,
    TOTAL,
    Batch,
    Ledger,
    RetiredRows,
    Rows,
    ones,
)
from specplan.simulator.engine.core.request_log import RequestLog


class BatchState:
    """One engine's waiting queue, running batch and the KV they hold (the module docstring)."""

    def __init__(self, block_size: int, max_batch_requests: int) -> None:
        self.block_size = block_size
        self.queue: deque[int] = deque()
        self.batch = Batch(block_size, max_batch_requests)
        self.ledger = Ledger()
        self.retired = RetiredRows()
        self.footprint = 0
        self.prefilling = 0
        self.finishing = False

    def footprints(self, rows: Rows | None = None) -> np.ndarray:
        """KV tokens the rows (default: every row) reserve: prompt (computed or not) + generated + the draft block."""
        return self.batch.footprints(self.block_size, slice(None) if rows is None else rows.index)

    def add(self, block: np.ndarray, acceptance: np.ndarray, kv_tokens: int, prefilling: int) -> None:
        """Rows admitted now (columns × k ints, k × γ acceptance), holding `kv_tokens` of KV (prompt + generated),
        `prefilling` of them with prompt tokens to compute."""
        self.batch.append(block, acceptance)
        self.prefilling += prefilling
        self.footprint += kv_tokens + self.block_size * block.shape[1]

    def remove(self, index: np.ndarray, log: RequestLog, finished: bool = False) -> np.ndarray:
        """Take the rows at `index` out of the batch (in that order); returns their ids.

        Their counters go to the request log: at once for preempted requests
        (re-admission reads them), in bulk for finished ones (`RetiredRows`).
        """
        gone = self.batch.ints[:, index]
        if finished:
            self.retired.keep(gone, self.ledger, log)
        else:
            self.ledger.write(gone, log)
        kept = gone[TOTAL] if finished else gone[TOTAL] - gone[REMAINING]  # a finished row has nothing left
        self.footprint -= int(kept.dot(ones(kept.size))) + self.block_size * index.size
        if self.prefilling:
            self.prefilling -= int(np.count_nonzero(gone[PREFILL_LEFT]))
        self.batch.drop(index if finished or index.size == 1 else np.sort(index))  # finished rows come ascending
        return gone[RID]

    def finished_rows(self) -> np.ndarray:
        """Rows with nothing left to emit."""
        return np.logical_not(self.batch.ints[REMAINING]).nonzero()[0]  # == 0 without a scalar operand

    def drain(self, log: RequestLog) -> None:
        """Write every request's counters to the log (at the end of a run, or before reading them)."""
        self.retired.write(self.ledger, log)
        self.ledger.write(self.batch.ints, log)
        self.ledger.reopen(self.batch.ints)
