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
