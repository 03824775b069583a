"""Per-step records: what the summary and every report are computed from, beside the request log.

`StepLog` collects one row of `StepRecord`'s fields per engine step, read
by name from the step's plan and timing (converted to a frame once at the
end); `ChunkLog` the tokens each request received at each decode step (the
chunks a streaming client reads); `SpeculationCounters` vLLM's speculative-decoding
counters. The per-request record is specplan.simulator.engine.core.request_log.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple, get_type_hints

import numpy as np
import pandas as pd

from specplan.engines import REASONS
from specplan.engines.modes import ALL_TO_ALL_MODES, MODES
from specplan.simulator.engine.core.step import StepPlan, StepTiming


class StepRecord(NamedTuple):
    """One engine step, as steps.csv has it."""

    end_s: float
    replica: int
    batch_requests: int       # running rows (decoding, prefilling, deferred)
    decode_requests: int      # rows that decoded this step
    drafting_requests: int
    verify_tokens: int        # B: tokens in the verify forward (prompt chunks included)
    prefill_tokens: int
    emitted_tokens: int
    accepted_tokens: int      # accepted drafts (bonus tokens not included)
    deferred_requests: int    # decoding rows the token budget left for the next step
    truncated_drafts: int     # drafts the token budget cut at its edge (engine.budget: truncate)
    context_tokens: int       # KV context the step was priced at (0: the profile has no context axis)
    draft_ms: float
    verify_ms: float
    overhead_ms: float        # host time and the scheduling overhead the policy pays
    mode: str                 # graph, piecewise, eager (unmodelled: no capture list)
    mode_reason: str          # why (a key of specplan.engines.REASONS)
    all_to_all: str           # the MoE all-to-all's mode: none, low_latency, normal, megamoe


STEP_FIELDS = StepRecord._fields
INT_FIELDS = tuple(name for name, kind in get_type_hints(StepRecord).items() if kind is int)
# the text columns, kept as codes in the numeric blocks: code → text
TEXT_CODES: dict[str, tuple[str, ...]] = {"mode": MODES, "mode_reason": tuple(REASONS), "all_to_all": ALL_TO_ALL_MODES}
CODE_OF = {name: {text: code for code, text in enumerate(texts)} for name, texts in TEXT_CODES.items()}
MODE_CODE, REASON_CODE, A2A_CODE = CODE_OF["mode"], CODE_OF["mode_reason"], CODE_OF["all_to_all"]


class SpeculationCounters:
    """Speculative-decoding counters with vLLM's meaning, accumulated over a whole run.

    drafts            request-steps that verified at least one draft (vLLM: num_drafts)
    draft_tokens      drafts verified, Σ ℓ (num_draft_tokens)
    accepted_tokens   drafts accepted (num_accepted_tokens)
    accepted_per_position[k]   request-steps whose draft k + 1 was accepted (num_accepted_tokens_per_pos)

    The mean accepted length vLLM reports is 1 + accepted_tokens / drafts;
    the conditional rate at position k is accepted_per_position[k] /
    accepted_per_position[k − 1] (drafts for k = 0): pooled over proposals.
    """

    BUFFERED = 1 << 15  # accepted counts held before they are binned (one bincount, not one per step)

    def __init__(self, block_size: int) -> None:
        self.drafts = 0
        self.draft_tokens = 0
        self.histogram = np.zeros(block_size + 1, dtype=np.int64)  # request-steps by accepted drafts
        self.pending: list[np.ndarray] = []  # the steps' accepted arrays, as the steps made them (never changed)
        self.filled = 0

    def add(self, accepted: np.ndarray, verifying: int, verified_tokens: int) -> None:
        """One step: accepted drafts per decoding row, rows that verified ≥ 1 draft, Σ ℓ."""
        self.drafts += verifying
        self.draft_tokens += verified_tokens
        self.pending.append(accepted)
        self.filled += accepted.size
        if self.filled >= self.BUFFERED:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.histogram += np.bincount(np.concatenate(self.pending), minlength=self.histogram.size)
            self.pending.clear()
            self.filled = 0

    def merge(self, other: SpeculationCounters) -> SpeculationCounters:
        self.flush()
        other.flush()
        out = SpeculationCounters(max(self.histogram.size, other.histogram.size) - 1)
        out.drafts, out.draft_tokens = self.drafts + other.drafts, self.draft_tokens + other.draft_tokens
        out.histogram[: self.histogram.size] += self.histogram
        out.histogram[: other.histogram.size] += other.histogram
        return out

    @property
    def accepted_per_position(self) -> np.ndarray:
        self.flush()
        return self.histogram[::-1].cumsum()[::-1][1:]

    @property
    def accepted_tokens(self) -> int:
        return int(self.accepted_per_position.sum())


class ChunkLog:
    """Tokens each request received at each decode step: the chunks a streaming client reads.

    Kept for every run: the summary's inter-token latency and a benchmark
    client's read it. One row per (step, decoding request): the step's end
    time, the request id, the tokens it emitted (accepted drafts + 1, cut at
    what it had left; kept only for a benchmark client), and when that
    request last received tokens before (NaN for its first step: its gap
    starts at its first token), tracked as the steps arrive so that no sort
    is needed later. Rows live in growable numpy columns, so a long run
    holds a few arrays, not one object per step for the garbage collector.
    """

    def __init__(self, keep_tokens: bool = True) -> None:
        self.keep_tokens = keep_tokens  # a benchmark client's SGLang ITL reads them; the summary does not
        self.size = 0
        self.columns = {"time": np.zeros(4096), "rid": np.zeros(4096, dtype=np.int64), "previous": np.zeros(4096),
                        **({"tokens": np.zeros(4096, dtype=np.int64)} if keep_tokens else {})}
        self.last = np.full(1024, np.nan)  # per request id: the end of its last step with tokens

    def add(self, end_s: float, rids: np.ndarray, tokens: np.ndarray) -> None:
        try:
            previous = self.last[rids]
        except IndexError:
            self.last = np.concatenate([self.last, np.full(max(self.last.size, int(rids.max()) + 1), np.nan)])
            previous = self.last[rids]
        self.last[rids] = end_s
        start, stop = self.size, self.size + rids.size
        if stop > self.columns["time"].size:
            self.grow(stop)
        columns = self.columns
        columns["time"][start:stop] = end_s
        columns["rid"][start:stop] = rids
        columns["previous"][start:stop] = previous
        if self.keep_tokens:
            columns["tokens"][start:stop] = tokens
        self.size = stop

    def grow(self, needed: int) -> None:
        capacity = max(needed, 2 * self.columns["time"].size)
        for name, column in self.columns.items():
            wider = np.zeros(capacity, dtype=column.dtype)
            wider[:self.size] = column[:self.size]
            self.columns[name] = wider

    def column(self, name: str) -> np.ndarray:
        return self.columns[name][:self.size]

    def emissions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time, request id, that request's previous emission time or NaN) per chunk."""
        return self.column("time"), self.column("rid"), self.column("previous")

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time, request id, tokens) per chunk, in step order."""
        if not self.keep_tokens:
            raise ValueError("this chunk log was kept without tokens (no benchmark client)")
        return self.column("time"), self.column("rid"), self.column("tokens")

    def extend(self, other: ChunkLog, rid_map: np.ndarray | None = None) -> None:
        """Append another log's rows (its request ids mapped through `rid_map` when given)."""
        start, stop = self.size, self.size + other.size
        if stop > self.columns["time"].size:
            self.grow(stop)
        for name in self.columns:
            values = other.column(name)
            self.columns[name][start:stop] = rid_map[values] if name == "rid" and rid_map is not None else values
        self.size = stop

    @staticmethod
    def merge(logs: list[ChunkLog]) -> ChunkLog:
        """One log of every log's rows (one log: itself, not a copy of its columns)."""
        if len(logs) == 1:
            return logs[0]
        out = ChunkLog(keep_tokens=all(log.keep_tokens for log in logs))
        for log in logs:
            out.extend(log)
        return out


class StepLog:
    """One row of `StepRecord`'s fields per engine step (`add`), sealed into numpy blocks.

    A step's row is written here and only here, its counts read by name from
    the step's plan and timing (tests/test_engine.py checks every field lands
    under its name); no record object is built per step. Every `SEAL_ROWS`
    rows become one float64 block (every field is a number; integers up to
    2^53 are exact), so a long run holds a few arrays instead of millions of
    rows for the garbage collector to walk.
    """

    SEAL_ROWS = 4096

    def __init__(self) -> None:
        self.rows: list[tuple[float, ...]] = []
        self.blocks: list[np.ndarray] = []

    def add(self, end_s: float, replica: int, batch_requests: int, plan: StepPlan, emitted_tokens: int,
            accepted_tokens: int, timing: StepTiming) -> None:
        """The step that ended at `end_s`: `StepRecord`'s fields, in its order (text fields as codes)."""
        mode = plan.mode
        self.rows.append((end_s, replica, batch_requests, plan.decode_requests, plan.drafting_requests,
                          plan.verify_tokens, plan.prefill_tokens, emitted_tokens, accepted_tokens,
                          plan.deferred_requests, plan.truncated_drafts, plan.context_tokens,
                          timing.draft_ms, timing.verify_ms, timing.overhead_ms,
                          MODE_CODE[mode.mode], REASON_CODE[mode.reason], A2A_CODE[mode.all_to_all]))
        if len(self.rows) >= self.SEAL_ROWS:
            self.seal()

    def seal(self) -> None:
        """Move the records in `rows` into a block."""
        if self.rows:
            n, width = len(self.rows), len(STEP_FIELDS)
            values = np.fromiter(itertools.chain.from_iterable(self.rows), dtype=float, count=n * width)
            self.blocks.append(values.reshape(n, width))
            self.rows.clear()

    def frame(self) -> pd.DataFrame:
        self.seal()
        if not self.blocks:
            return pd.DataFrame({name: np.zeros(0) if name not in TEXT_CODES else np.zeros(0, dtype=object)
                                 for name in STEP_FIELDS})
        df = pd.DataFrame(np.concatenate(self.blocks), columns=list(STEP_FIELDS))
        df = df.astype(dict.fromkeys(INT_FIELDS, np.int64))
        for name, texts in TEXT_CODES.items():
            df[name] = np.array(texts, dtype=object)[df[name].to_numpy(dtype=np.int64)]
        return df
