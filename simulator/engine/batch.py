"""The running batch of one engine as a structure of numpy arrays.

Rows are requests admitted to the decode engine, oldest first. Integer
columns live in one (columns × rows) array, so admitting and retiring
requests is one concatenation and one mask for all of them:

    RID           request id (row of the RequestLog)
    REMAINING     output tokens still to emit
    TOTAL         prompt + output tokens (fixed)
    PREFILL_LEFT  prompt tokens still to prefill (chunked prefill; 0 when decoding)
    STEPS, ACCEPTED, VERIFIED   per-request counters since admission

Tokens in a request's KV cache are derived, never stored: `kv_tokens` =
TOTAL − REMAINING − PREFILL_LEFT (prompt computed so far + generated), and
its footprint (what the KV rule reserves) is that + PREFILL_LEFT + γ. `acceptance` (rows × γ) holds each request's acceptance, fixed at
admission: its logits before token noise for policies that read
confidences, or its per-position probabilities with the token noise
averaged out for those that do not (simulator.engine.decode).
"""

from __future__ import annotations

import numpy as np

COLUMNS = ("rid", "remaining", "total", "prefill_left", "steps", "accepted", "verified")
RID, REMAINING, TOTAL, PREFILL_LEFT, STEPS, ACCEPTED, VERIFIED = range(len(COLUMNS))


class Batch:
    """Rows are kept in arrival order (request id ascending); removal keeps that order.

    Admission is FIFO, so new rows go at the end; a request re-admitted after
    a preemption keeps its place by arrival (as a serving engine keeps a
    preempted request's priority), so it is not the first evicted again.
    """

    def __init__(self, block_size: int) -> None:
        self.ints = np.zeros((len(COLUMNS), 0), dtype=np.int64)
        self.acceptance = np.zeros((0, block_size))
        self.rids = self.ints[RID]
        self.n = 0

    def append(self, ints: np.ndarray, acceptance: np.ndarray) -> None:
        self.ints = np.concatenate((self.ints, ints), axis=1)
        self.acceptance = np.concatenate((self.acceptance, acceptance))
        if self.n and ints[RID].min() < self.ints[RID, self.n - 1]:  # a re-admitted request: back in order
            order = np.argsort(self.ints[RID], kind="stable")
            self.ints, self.acceptance = self.ints[:, order], self.acceptance[order]
        self.changed()

    def keep(self, mask: np.ndarray) -> None:
        self.ints = self.ints[:, mask]
        self.acceptance = self.acceptance[mask]
        self.changed()

    def changed(self) -> None:
        """After a change of rows: `rids` is a new object (until the next change), `n` the row count."""
        self.rids = self.ints[RID]
        self.n = self.ints.shape[1]

    def kv_tokens(self, rows: object = slice(None)) -> np.ndarray:
        """Tokens in each row's KV cache: prompt computed so far + generated."""
        ints = self.ints
        return ints[TOTAL][rows] - ints[REMAINING][rows] - ints[PREFILL_LEFT][rows]


def attention_context(kv_tokens: np.ndarray, decode: np.ndarray | None, prefill_take: np.ndarray | None,
                      padded: bool) -> int:
    """A step's KV context as a profile's context axis counts it (`engine.attention`).

    The rows the step runs are the decoding ones (`decode`; None: every row)
    and those taking a prompt chunk (`prefill_take > 0`; a prefilling row with
    no chunk this step is not in the forward). `varlen`: the Σ of their KV.
    `padded`: per phase (decode, prompt chunks), rows × the phase's longest
    KV, as an engine that pads attention within separate decode and prefill
    kernels.
    """
    phases = [kv_tokens if decode is None else kv_tokens[decode]]
    if prefill_take is not None:
        phases.append(kv_tokens[prefill_take > 0])
    if not padded:
        return int(sum(int(kv.sum()) for kv in phases))
    return int(sum(kv.size * int(kv.max()) for kv in phases if kv.size))
