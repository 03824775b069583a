"""The running batch of one replica as a structure of numpy arrays.

Rows are requests admitted to the decode engine. Columns:

    rid           request id (row of the RequestLog)
    remaining     output tokens still to emit
    generated     output tokens emitted so far (the first one included)
    kv_tokens     prompt + generated: the request's KV-cache footprint
    domain        index into the acceptance model's domains
    offset        the request's logit offset z_r (request_sigma)
    prefill_left  prompt tokens still to prefill (chunked prefill; 0 when decoding)
    steps, accepted, verified   per-request counters since admission
"""

from __future__ import annotations

import numpy as np

INT_COLUMNS = ("rid", "remaining", "generated", "kv_tokens", "domain", "prefill_left",
               "steps", "accepted", "verified")
FLOAT_COLUMNS = ("offset",)


class Batch:
    """Rows are kept in admission order (oldest first); removal keeps that order."""

    def __init__(self) -> None:
        self.cols: dict[str, np.ndarray] = {c: np.zeros(0, dtype=np.int64) for c in INT_COLUMNS}
        self.cols.update({c: np.zeros(0) for c in FLOAT_COLUMNS})

    @property
    def n(self) -> int:
        return int(self.cols["rid"].size)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def append(self, rows: dict[str, list]) -> None:
        for name, col in self.cols.items():
            self.cols[name] = np.concatenate([col, np.asarray(rows[name], dtype=col.dtype)])

    def keep(self, mask: np.ndarray) -> None:
        for name, col in self.cols.items():
            self.cols[name] = col[mask]


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
