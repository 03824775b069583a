"""Per-request and per-step records: what the summary and every report are computed from.

`RequestLog` is a structure of growable numpy arrays, one row per arrived
request. `StepLog` collects one row of `StepRecord`'s fields per engine
step, read by name from the step's plan and timing (converted to a frame
once at the end).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple, get_type_hints

import numpy as np
import pandas as pd

from specplan.simulator.engine.step import StepPlan, StepTiming

QUEUED, PREFILL, RUNNING, DONE, REJECTED, TRANSFER = range(6)
STATUS_NAMES = ("queued", "prefill", "running", "completed", "rejected", "transfer")  # transfer: KV on its way to decode
KV_CAPACITY = "kv_capacity"   # no cache the request may use can ever hold it (specplan.simulator.engine.intake)
REJECT_REASONS = (KV_CAPACITY,)  # why a request may be rejected; the summary counts each (requests_rejected_<reason>)

REQUEST_FIELDS: dict[str, type] = {
    "arrival_s": float, "prompt_tokens": np.int64, "output_tokens": np.int64, "domain": np.int64,
    "replica": np.int64, "prefill_start_s": float, "prefill_end_s": float, "kv_ready_s": float,
    "admitted_s": float, "first_token_s": float, "finish_s": float,
    "generated_tokens": np.int64, "steps": np.int64, "accepted_tokens": np.int64,
    "verified_tokens": np.int64, "preemptions": np.int64, "status": np.int64,
    "acceptance_offset": float,
}

# TTFT's parts, in order: each ends at a stage mark (`ttft_parts`); together they are first_token_s − arrival_s
TTFT_PARTS = ("ttft_queue_s", "ttft_prefill_s", "ttft_transfer_s", "ttft_decode_wait_s", "ttft_first_step_s")


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


STEP_FIELDS = StepRecord._fields
INT_FIELDS = tuple(name for name, kind in get_type_hints(StepRecord).items() if kind is int)


class SpecCounters:
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
        self.pending = np.zeros(self.BUFFERED, dtype=np.int64)
        self.filled = 0

    def add(self, accepted: np.ndarray, verifying: int, verified_tokens: int) -> None:
        """One step: accepted drafts per decoding row, rows that verified ≥ 1 draft, Σ ℓ."""
        self.drafts += verifying
        self.draft_tokens += verified_tokens
        start, n = self.filled, accepted.size
        if start + n > self.pending.size:
            self.flush()
            start = 0
            if n > self.pending.size:
                self.histogram += np.bincount(accepted, minlength=self.histogram.size)
                return
        self.pending[start:start + n] = accepted
        self.filled = start + n

    def flush(self) -> None:
        if self.filled:
            self.histogram += np.bincount(self.pending[:self.filled], minlength=self.histogram.size)
            self.filled = 0

    def merge(self, other: SpecCounters) -> SpecCounters:
        self.flush()
        other.flush()
        out = SpecCounters(max(self.histogram.size, other.histogram.size) - 1)
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


class RequestLog:
    """One row per arrived request; times are NaN until the event happens."""

    def __init__(self, capacity: int = 1024) -> None:
        self.size = 0
        self.columns = {name: self._empty(kind, capacity) for name, kind in REQUEST_FIELDS.items()}
        self.reject_reason: dict[int, str] = {}

    @staticmethod
    def _empty(kind: type, n: int) -> np.ndarray:
        return np.full(n, np.nan) if kind is float else np.zeros(n, dtype=np.int64)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def add(self, arrival_s: float, prompt: int, output: int, domain: int) -> int:
        if self.size == self.columns["arrival_s"].size:
            self._grow()
        rid = self.size
        self.size += 1
        c = self.columns
        c["arrival_s"][rid] = arrival_s
        c["prompt_tokens"][rid] = prompt
        c["output_tokens"][rid] = output
        c["domain"][rid] = domain
        c["replica"][rid] = -1
        return rid

    def _grow(self) -> None:
        for name, col in self.columns.items():
            extra = self._empty(REQUEST_FIELDS[name], col.size)
            self.columns[name] = np.concatenate([col, extra])

    def add_counts(self, rids: np.ndarray, remaining: np.ndarray, steps: np.ndarray, accepted: np.ndarray,
                   verified: np.ndarray) -> None:
        """Requests leaving a decode batch: tokens generated so far, and their step counters added."""
        c = self.columns
        c["generated_tokens"][rids] = c["output_tokens"][rids] - remaining
        c["steps"][rids] += steps
        c["accepted_tokens"][rids] += accepted
        c["verified_tokens"][rids] += verified

    def stamp(self, name: str, rids: int | np.ndarray, now: float) -> None:
        """Mark `name` (a stage's time) at `now` for the requests that have not passed it yet: a stage a
        preempted request goes through again keeps the time of its first pass."""
        column = self.columns[name]
        ids = np.atleast_1d(rids)
        column[ids[np.isnan(column[ids])]] = now

    def reject(self, rid: int, reason: str, detail: str) -> None:
        """Request `rid` is turned away for `reason` (one of REJECT_REASONS); requests.csv reads "reason: detail"."""
        if reason not in REJECT_REASONS:
            raise ValueError(f"unknown reject reason {reason!r} (known: {', '.join(REJECT_REASONS)})")
        self.columns["status"][rid] = REJECTED
        self.reject_reason[rid] = f"{reason}: {detail}"

    def frame(self, domain_names: tuple[str, ...]) -> pd.DataFrame:
        """The requests as a DataFrame (one row per request, `tps_user` derived)."""
        n = self.size
        df = pd.DataFrame({name: col[:n] for name, col in self.columns.items()})
        df.insert(0, "request_id", np.arange(n))
        names = np.array((*domain_names, "?"), dtype=object)
        df["domain"] = names[np.clip(df["domain"].to_numpy(), 0, len(domain_names))]
        df["status"] = np.array(STATUS_NAMES, dtype=object)[df["status"].to_numpy()]
        df["reject_reason"] = [self.reject_reason.get(i, "") for i in range(n)]
        df["ttft_s"] = df["first_token_s"] - df["arrival_s"]
        for name, part in zip(TTFT_PARTS, ttft_parts(df), strict=True):
            df[name] = part
        span = df["finish_s"] - df["first_token_s"]
        with np.errstate(divide="ignore", invalid="ignore"):
            df["tps_user"] = np.where(span > 0, (df["output_tokens"] - 1) / span, np.nan)
        return df


def ttft_parts(requests: pd.DataFrame) -> np.ndarray:
    """TTFT's parts (TTFT_PARTS) per request, in seconds: the gaps between its stage marks

        arrival → prefill_start_s    queue: waiting for its prefill to start
                → prefill_end_s      prefill: its prompt's KV computed
                → kv_ready_s         transfer: the KV at the decode side (a prefill pool's link)
                → max(admitted_s, kv_ready_s)   decode wait: until a decode slot holds it with its KV
                → first_token_s      first step: the decode step that emits its first token

    each mark cut at the first token, so a stage after it (a decode slot when the prefill stage
    streams the first token; chunked prefill's admission, which comes before its prefill) adds
    nothing, and the parts sum to first_token_s − arrival_s. NaN until the request has a first token.
    """
    first = requests["first_token_s"].to_numpy(dtype=float)
    ready = requests["kv_ready_s"].to_numpy(dtype=float)
    marks = np.vstack([requests["arrival_s"].to_numpy(dtype=float), requests["prefill_start_s"].to_numpy(dtype=float),
                       requests["prefill_end_s"].to_numpy(dtype=float), ready,
                       np.fmax(requests["admitted_s"].to_numpy(dtype=float), ready), first])
    return np.diff(np.minimum(marks, first), axis=0)


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
        """The step that ended at `end_s`: `StepRecord`'s fields, in its order."""
        self.rows.append((end_s, replica, batch_requests, plan.decode_requests, plan.drafting_requests,
                          plan.verify_tokens, plan.prefill_tokens, emitted_tokens, accepted_tokens,
                          plan.deferred_requests, plan.truncated_drafts, plan.context_tokens,
                          timing.draft_ms, timing.verify_ms, timing.overhead_ms))
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
            return pd.DataFrame({name: np.zeros(0) for name in STEP_FIELDS})
        df = pd.DataFrame(np.concatenate(self.blocks), columns=list(STEP_FIELDS))
        return df.astype(dict.fromkeys(INT_FIELDS, np.int64))
