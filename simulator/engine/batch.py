"""The running batch of one engine as a structure of numpy arrays.

Rows are requests admitted to the decode engine, oldest first. Integer
columns live in one (columns × rows) array, so admitting and retiring
requests is one concatenation and one mask for all of them:

    RID           request id (row of the RequestLog)
    REMAINING     output tokens still to emit
    KV            tokens in the request's KV cache: prompt computed so far + generated
    PREFILL_LEFT  prompt tokens still to prefill (chunked prefill; 0 when decoding)
    STEPS, ACCEPTED, VERIFIED   per-request counters since admission

A request's KV footprint (what the KV rule reserves) is KV + PREFILL_LEFT
+ γ. `acceptance` (rows × γ) holds each request's acceptance, fixed at
admission: its logits before token noise for policies that read
confidences, or its per-position probabilities with the token noise
averaged out for those that do not (simulator.engine.decode).
"""

from __future__ import annotations

import numpy as np

COLUMNS = ("rid", "remaining", "kv", "prefill_left", "steps", "accepted", "verified")
RID, REMAINING, KV, PREFILL_LEFT, STEPS, ACCEPTED, VERIFIED = range(len(COLUMNS))


class Batch:
    """Rows are kept in admission order (oldest first); removal keeps that order."""

    def __init__(self, block_size: int) -> None:
        self.ints = np.zeros((len(COLUMNS), 0), dtype=np.int64)
        self.acceptance = np.zeros((0, block_size))

    @property
    def n(self) -> int:
        return self.ints.shape[1]

    def append(self, ints: np.ndarray, acceptance: np.ndarray) -> None:
        self.ints = np.concatenate((self.ints, ints), axis=1)
        self.acceptance = np.concatenate((self.acceptance, acceptance))

    def keep(self, mask: np.ndarray) -> None:
        self.ints = self.ints[:, mask]
        self.acceptance = self.acceptance[mask]


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
