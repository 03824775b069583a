"""The running batch of one engine as a structure of numpy arrays.

Rows are requests admitted to the decode engine, oldest first. Integer
columns live in one (columns × rows) array, so admitting and retiring
requests writes and masks all of them at once:

    RID           request id (row of the RequestLog)
    REMAINING     output tokens still to emit
    TOTAL         prompt + output tokens (fixed)
    PREFILL_LEFT  prompt tokens still to prefill (chunked prefill; 0 when decoding)
    STEPS, ACCEPTED, VERIFIED   the request's step counters since admission, kept as a ledger
                  that the decode core resolves (`Ledger`): a step in which every row decodes
                  touches no counter column
    RANK          the attention rank holding the request's KV (data-parallel attention; 0 otherwise)

`Ledger.emit` applies a decode step to the rows' counters and `RetiredRows`
holds finished rows' counters until they are written to the request log.

Tokens in a request's KV cache are derived, never stored: `kv_tokens` =
TOTAL − REMAINING − PREFILL_LEFT (prompt computed so far + generated), and
its footprint (what the KV rule reserves) is that + PREFILL_LEFT + γ.
`acceptance` (rows × γ) holds each request's acceptance, fixed at
admission: its logits before token noise for policies that read
confidences, or its per-position probabilities with the token noise
averaged out for those that do not (specplan.simulator.engine.core.decode).
"""

from __future__ import annotations

import functools

import numpy as np

from specplan.simulator.engine.core.request_log import RequestLog

COLUMNS = ("rid", "remaining", "total", "prefill_left", "steps", "accepted", "verified", "rank")
RID, REMAINING, TOTAL, PREFILL_LEFT, STEPS, ACCEPTED, VERIFIED, RANK = range(len(COLUMNS))
ONES: dict[int, np.ndarray] = {}  # a read-only row of ones per size (`ones`)
ZERO = np.int64(0)  # numpy's own scalar: a Python int operand costs numpy more than a small array's operation
RETIRED_ROWS = 1024  # finished requests' counters are written to the log in bulk, this many at a time
LEDGER_STEPS, LEDGER_VERIFIED = len(COLUMNS), len(COLUMNS) + 1  # extra rows of RetiredRows.block


def ones(n: int) -> np.ndarray:
    """A read-only row of n ones (made once per n): an array operand where a Python scalar would cost numpy
    more than the operation itself (`x -= 1`, and `x.dot(ones(n))` for a sum, a third of `np.add.reduce`'s
    cost on a batch's rows)."""
    found = ONES.get(n)
    if found is None:
        found = ONES[n] = np.ones(n, dtype=np.int64)
        found.flags.writeable = False
    return found


class Rows:
    """Which rows of the batch a step runs: every row (`whole`: numpy reads them as a slice, no index array,
    the engine's fast path) or some, by ascending index. `index` indexes a row axis either way; `count` rows."""

    __slots__ = ("count", "index", "whole")

    def __init__(self, index: np.ndarray | slice, count: int, whole: bool) -> None:
        self.index, self.count, self.whole = index, count, whole

    @staticmethod
    @functools.cache
    def every(n: int) -> Rows:
        """Every one of `n` rows (one shared value per `n`: rows are never changed once made)."""
        return Rows(slice(None), n, True)

    @staticmethod
    def some(index: np.ndarray) -> Rows:
        return Rows(index, index.size, False)

    def of(self, values: np.ndarray) -> np.ndarray:
        """`values` (one entry per batch row) at these rows: the array itself when every row runs."""
        return values if self.whole else values[self.index]

    def indices(self) -> np.ndarray:
        """The rows as an index array."""
        return np.arange(self.count) if isinstance(self.index, slice) else self.index

    def head(self, count: int) -> Rows:
        """The first `count` of these rows."""
        return self if count == self.count else Rows.some(self.indices()[:count])

    def where(self, keep: np.ndarray) -> Rows:
        """These rows where `keep` (one entry per row of these) is True."""
        return Rows.some(self.indices()[keep])


class Ledger:
    """Per-request step counters (steps, accepted drafts, verified drafts) without a per-step write.

    A step in which every row decodes adds 1 step to each row and, for a
    fixed-length policy, the same ℓ of verified drafts: the core counts those
    in two scalars (`steps`, `verified`) and each row's columns hold its
    counters minus the scalars' values at its admission. Accepted drafts
    need no column update either: every decode step lowers REMAINING by
    accepted + 1, so a row's accepted drafts are
    `ACCEPTED − REMAINING − steps`, with ACCEPTED set to REMAINING at
    admission and lowered by every token emitted otherwise (a prompt's first
    token) or not emitted (REMAINING floored at the last token).
    """

    __slots__ = ("steps", "verified")

    def __init__(self) -> None:
        self.steps = 0
        self.verified = 0

    def opening(self, remaining: int) -> tuple[int, int, int]:
        """STEPS, ACCEPTED and VERIFIED of a row admitted now with `remaining` tokens to emit."""
        return -self.steps, remaining, -self.verified

    def counters(self, rows: np.ndarray, steps: int | np.ndarray | None = None,
                 verified: int | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, accepted, verified) of a block of rows (columns × rows).

        `steps` and `verified`: the ledger's scalars when the rows left the batch (default: now).
        """
        taken = rows[STEPS] + (self.steps if steps is None else steps)
        return (taken, rows[ACCEPTED] - rows[REMAINING] - taken,
                rows[VERIFIED] + (self.verified if verified is None else verified))

    def reopen(self, ints: np.ndarray) -> None:
        """Start every row's counters from zero again (after they were written out)."""
        ints[STEPS] = -self.steps
        ints[ACCEPTED] = ints[REMAINING]
        ints[VERIFIED] = -self.verified

    def emit(self, batch: Batch, rows: Rows, accepted: np.ndarray,
             lengths: np.ndarray | int) -> tuple[int, int, np.ndarray | None]:
        """One decode step of `rows`: each row emits its accepted drafts + 1.

        Each row's REMAINING drops by accepted + 1 and is then floored at 0
        (a row that reaches 0 has emitted its last token); its step and
        verified drafts are counted, in the scalars when every row decoded.
        Returns (tokens emitted, drafts accepted, what the floor took back
        per row or None when no row finished).
        """
        ints = batch.ints
        remaining = batch.remaining if rows.whole else ints[REMAINING, rows.index]
        one = ONES.get(accepted.size)
        if one is None:
            one = ones(accepted.size)
        # array operands only: a Python scalar operand costs numpy more than the operation (`-= 1`, a sum)
        np.subtract(remaining, accepted, out=remaining)
        np.subtract(remaining, one, out=remaining)
        total = int(accepted.dot(one))
        emitted = total + accepted.size
        over = None
        if remaining[remaining.argmin()] <= 0:  # some rows finish (argmin: a fifth of a min's cost)
            over = np.minimum(remaining, ZERO)
            emitted += int(over.dot(one))
            remaining -= over
        if rows.whole:  # the scalars count the step (and a fixed ℓ) for every row at once
            self.steps += 1
            if isinstance(lengths, int):
                self.verified += lengths
            else:
                ints[VERIFIED] += lengths
            if over is not None:
                ints[ACCEPTED] -= over
        else:
            index = rows.index
            ints[REMAINING, index] = remaining
            ints[STEPS, index] += 1
            ints[VERIFIED, index] += lengths
            if over is not None:
                ints[ACCEPTED, index] -= over
        return emitted, total, over

    def write(self, rows: np.ndarray, log: RequestLog) -> None:
        """Add a block of running rows' counters (columns × rows) to the request log."""
        log.add_counts(rows[RID], rows[REMAINING], *self.counters(rows))


class RetiredRows:
    """Finished rows' counters, held until they are written to the request log in bulk.

    A finished row leaves the batch at once, but its log row is written
    `RETIRED_ROWS` at a time: its columns and the ledger's scalars at the
    moment it left (`keep`), resolved when written (`write`).
    """

    def __init__(self) -> None:
        self.block = np.zeros((len(COLUMNS) + 2, RETIRED_ROWS), dtype=np.int64)
        self.filled = 0

    def keep(self, gone: np.ndarray, ledger: Ledger, log: RequestLog) -> None:
        start, k = self.filled, gone.shape[1]
        if start + k > RETIRED_ROWS:
            self.write(ledger, log)
            start = 0
        block = self.block[:, start:start + k]
        block[:LEDGER_STEPS] = gone
        block[LEDGER_STEPS] = ledger.steps
        block[LEDGER_VERIFIED] = ledger.verified
        self.filled = start + k

    def write(self, ledger: Ledger, log: RequestLog) -> None:
        rows = self.block[:, :self.filled]
        log.add_counts(rows[RID], rows[REMAINING], *ledger.counters(rows, rows[LEDGER_STEPS], rows[LEDGER_VERIFIED]))
        self.filled = 0


class Batch:
    """Rows are kept in arrival order (request id ascending); removal keeps that order.

    Admission is FIFO, so new rows go at the end; a request re-admitted after
    a preemption keeps its place by arrival (as a serving engine keeps a
    preempted request's priority), so it is not the first evicted again.

    Rows live in preallocated storage (`capacity` rows, grown when needed):
    `ints` and `acceptance` are views of its first `n` rows, so admitting a
    request writes in place. `rids` is a copy made at each change of rows,
    so callers may keep it (the asynchronous policy keeps a step's ids).
    """

    def __init__(self, block_size: int, capacity: int = 64) -> None:
        self.store = np.zeros((len(COLUMNS), max(capacity, 1)), dtype=np.int64)
        self.acceptance_store = np.zeros((max(capacity, 1), block_size))
        self.n = 0
        self.changed()

    def append(self, ints: np.ndarray, acceptance: np.ndarray) -> None:
        """Add rows (columns × k ints, k × γ acceptance), keeping arrival order."""
        n, k = self.n, ints.shape[1]
        if n + k > self.store.shape[1]:
            self.grow(n + k)
        self.store[:, n:n + k] = ints
        self.acceptance_store[n:n + k] = acceptance
        if self.out_of_order(n, k):  # a re-admitted request: back in order
            order = np.argsort(self.store[RID, :n + k], kind="stable")
            self.store[:, :n + k] = self.store[:, order]
            self.acceptance_store[:n + k] = self.acceptance_store[order]
        self.n = n + k
        self.changed()

    def out_of_order(self, n: int, k: int) -> bool:
        """Whether rows n − 1 .. n + k − 1 are not in ascending id order."""
        ids = self.store[RID]
        if k == 1:
            return bool(n and ids[n] < ids[n - 1])
        block = ids[max(n - 1, 0):n + k]
        return bool((block[1:] < block[:-1]).any())

    def drop(self, index: np.ndarray) -> None:
        """Remove the rows at `index` (ascending), keeping the others in order."""
        if index.size != 1:
            mask = np.ones(self.n, dtype=bool)
            mask[index] = False
            self.keep(mask)
            return
        i, n = int(index[0]), self.n
        self.store[:, i:n - 1] = self.store[:, i + 1:n]
        self.acceptance_store[i:n - 1] = self.acceptance_store[i + 1:n]
        self.n = n - 1
        self.changed()

    def keep(self, mask: np.ndarray) -> None:
        """Keep the rows where `mask` is True, in order."""
        kept = self.ints[:, mask]
        m = kept.shape[1]
        self.acceptance_store[:m] = self.acceptance[mask]
        self.store[:, :m] = kept
        self.n = m
        self.changed()

    def grow(self, rows: int) -> None:
        """Storage for at least `rows` rows (doubling), the current rows copied over."""
        capacity = max(rows, 2 * self.store.shape[1])
        store = np.zeros((self.store.shape[0], capacity), dtype=np.int64)
        store[:, :self.n] = self.ints
        acceptance = np.zeros((capacity, self.acceptance_store.shape[1]))
        acceptance[:self.n] = self.acceptance
        self.store, self.acceptance_store = store, acceptance

    def changed(self) -> None:
        """After a change of rows: fresh views of the first n rows (and of their REMAINING), and a fresh copy of
        their ids."""
        self.ints = self.store[:, :self.n]
        self.remaining = self.ints[REMAINING]  # a view: the ledger writes a step's emissions through it
        self.acceptance = self.acceptance_store[:self.n]
        self.rids = self.ints[RID].copy()

    def kv_tokens(self) -> np.ndarray:
        """Tokens in each row's KV cache: prompt computed so far + generated."""
        ints = self.ints
        return ints[TOTAL] - ints[REMAINING] - ints[PREFILL_LEFT]

    def footprints(self, block_size: int, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """KV tokens the rows reserve (the KV rule): prompt (computed or not) + generated + the draft block."""
        ints = self.ints
        return ints[TOTAL][rows] - ints[REMAINING][rows] + block_size


def attention_context(kv_tokens: np.ndarray, decode: np.ndarray | None, prefill_take: np.ndarray | None,
                      padded: bool, query_scale: float = 1.0) -> int:
    """A step's KV context as a profile's context axis counts it (`engine.attention`).

    The rows the step runs are the decoding ones (`decode`; None: every row)
    and those taking a prompt chunk (`prefill_take > 0`; a prefilling row with
    no chunk this step is not in the forward). `varlen`: the Σ of their KV.
    `padded`: per phase (decode, prompt chunks), rows × the phase's longest
    KV, as an engine that pads attention within separate decode and prefill
    kernels; the decode phase × `query_scale` when its queries are padded too
    (the longest verify block against the profile's queries per request).
    """
    phases = [kv_tokens if decode is None else kv_tokens[decode]]
    if prefill_take is not None:
        phases.append(kv_tokens[prefill_take > 0])
    if not padded:
        return int(sum(int(kv.sum()) for kv in phases))
    padded_kv = [kv.size * int(kv.max()) if kv.size else 0 for kv in phases]
    if query_scale != 1.0:
        padded_kv[0] = round(padded_kv[0] * query_scale)
    return int(sum(padded_kv))
