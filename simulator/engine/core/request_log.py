"""A request's life, written in one place: the request log and its named transitions.

`RequestLog` is a structure of growable numpy arrays, one row per arrived
request (times NaN until the event happens). Its status and its stage times
are written here and only here, by the transitions a request goes through
(every driver, the prefill stage and pool, admission and the decode core
call them):

    queued(rid)                     waits for a decode slot (its KV at the engine, or its prompt to chunk)
    prefill(rid)                    waits for or runs in a prefill stage or pool
    prefill_started(rids, now)      its prompt's computation starts       (prefill_start_s)
    transfer(rids, now)             its prompt is computed, its KV on the way   (prefill_end_s, TRANSFER)
    kv_ready(rids, now, computed=)  its KV is at the decode engine        (kv_ready_s; prefill_end_s too when
                                                                           it was computed there: `computed`)
    admitted(rids, now)             a decode slot holds it                (admitted_s, the first time; RUNNING)
    first_token(rids, now, counted=) its first token is out               (first_token_s, the first time)
    finished(rids, now)             its last token is out                 (finish_s, COMPLETED)
    rejected(rid, reason, detail)   turned away                           (REJECTED, the reason)
    preempted(rids)                 evicted from the batch                (preemptions + 1)

A stage a preempted request goes through again keeps the time of its first
pass. `first_token` is the one rule for a first token: the first time only;
`counted=True` when the token was emitted outside a decode step (a prefill
stage's, a completed prompt chunk's: its generated count becomes 1), False
when the decode step that emitted it counts it. The step counters
(generated, steps, accepted, verified tokens) are written in bulk when a
row leaves the batch (`add_counts`, from specplan.simulator.engine.batch's
ledger).
"""

from __future__ import annotations

import math
from enum import IntEnum

import numpy as np
import pandas as pd


class Status(IntEnum):
    """Where a request is; requests.csv's `status` column names it (`STATUS_NAMES`)."""

    QUEUED = 0
    PREFILL = 1
    RUNNING = 2
    COMPLETED = 3
    REJECTED = 4
    TRANSFER = 5    # KV on its way to decode


STATUS_NAMES = tuple(status.name.lower() for status in Status)

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


class RequestLog:
    """One row per arrived request and its transitions (the module docstring)."""

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

    def _stamp(self, name: str, rids: int | np.ndarray, now: float) -> np.ndarray:
        """Mark `name` at `now` for the requests that have not passed it yet; returns those."""
        column = self.columns[name]
        ids = rids if isinstance(rids, np.ndarray) else np.atleast_1d(rids)
        fresh = ids[np.isnan(column[ids])]
        column[fresh] = now
        return fresh

    def _mark(self, name: str, rids: int | np.ndarray, now: float) -> None:
        """`_stamp` without its answer: one request is marked without array operations."""
        if isinstance(rids, (int, np.integer)):
            column = self.columns[name]
            if math.isnan(column[rids]):
                column[rids] = now
        else:
            self._stamp(name, rids, now)

    def _set_status(self, rids: int | np.ndarray, status: Status) -> None:
        self.columns["status"][rids] = int(status)  # a plain int: numpy reads an IntEnum slowly

    # ---- transitions (the module docstring) ------------------------------------------------------
    def queued(self, rid: int) -> None:
        self._set_status(rid, Status.QUEUED)

    def prefill(self, rid: int) -> None:
        self._set_status(rid, Status.PREFILL)

    def prefill_started(self, rids: int | np.ndarray, now: float) -> None:
        self._mark("prefill_start_s", rids, now)

    def transfer(self, rids: int | np.ndarray, now: float) -> None:
        self._mark("prefill_end_s", rids, now)
        self._set_status(rids, Status.TRANSFER)

    def kv_ready(self, rids: int | np.ndarray, now: float, computed: bool = False) -> None:
        if computed:
            self._mark("prefill_end_s", rids, now)
        self._mark("kv_ready_s", rids, now)

    def admitted(self, rid: int, now: float) -> None:
        column = self.columns["admitted_s"]
        if math.isnan(column[rid]):
            column[rid] = now
        self._set_status(rid, Status.RUNNING)

    def first_token(self, rids: int | np.ndarray, now: float, counted: bool = False) -> np.ndarray:
        """The requests among `rids` whose first token this is (now); `counted`: emitted outside a decode step."""
        fresh = self._stamp("first_token_s", rids, now)
        if counted:
            self.columns["generated_tokens"][fresh] = 1
        return fresh

    def finished(self, rids: int | np.ndarray, now: float) -> None:
        self.columns["finish_s"][rids] = now
        self._set_status(rids, Status.COMPLETED)

    def rejected(self, rid: int, reason: str, detail: str) -> None:
        """Request `rid` is turned away for `reason` (one of REJECT_REASONS); requests.csv reads "reason: detail"."""
        if reason not in REJECT_REASONS:
            raise ValueError(f"unknown reject reason {reason!r} (known: {', '.join(REJECT_REASONS)})")
        self._set_status(rid, Status.REJECTED)
        self.reject_reason[rid] = f"{reason}: {detail}"

    def preempted(self, rids: np.ndarray) -> None:
        self.columns["preemptions"][rids] += 1

    def routed(self, rid: int, replica: int) -> None:
        """The decode replica that holds the request (-1 until one does)."""
        self.columns["replica"][rid] = replica

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
