"""What a run's drafts did: acceptance by position and the confidence head's reliability, as simulated.

The report's acceptance and calibration figures read this record, never the
scenario's model: they show what the engine drew. The decode core hands a
sample of its steps here (every `SAMPLE_EVERY`-th step with drafts; the
choice reads no draw, so it biases nothing), rows buffered and binned in bulk:

    outcomes(domains, positions, accepted)
        per decoding row: its domain, the drafts drawn (γ for a policy that
        reads them, the planned ℓ for a fixed-length one) and the accepted
        prefix among them. Position k was *reached* when drafts 1..k−1 were
        accepted and k was drawn; the conditional acceptance at k is
        accepted ÷ reached, pooled over proposals (docs/model/drafters.md, as a
        serving engine's metrics pool it), request and token spread included.
    confidences(c, accepted)
        per row of a policy that reads confidences: the head's output c (R, γ)
        before any policy uses it and the accepted prefix of the whole block.
        Prediction a_k = Π_{i≤k} c_i against "drafts 1..k accepted", binned
        as specplan.simulator.drafters.head_calibration bins it (20 equal-width
        bins); for a model head also its raw output, recovered from c by
        undoing STS's per-position temperatures.

`DraftRecord.as_json()` is what summary.json keeps (`draft_record`); records
merge by adding counts (replicas, split runs, a sweep label's points).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specplan.simulator.drafters.drafter import Drafter
from specplan.simulator.drafters.head_calibration import N_BINS, bin_of
from specplan.simulator.drafters.heads import ModelHead

SAMPLE_EVERY = 8      # the core records every 8th step with drafts
BUFFER_ROWS = 4096    # rows held before they are binned


@dataclass
class ReliabilityBins:
    """Per-bin counts and sums of predicted and observed prefix survival (all positions pooled)."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(N_BINS))
    predicted: np.ndarray = field(default_factory=lambda: np.zeros(N_BINS))
    observed: np.ndarray = field(default_factory=lambda: np.zeros(N_BINS))

    def add(self, survival: np.ndarray, label: np.ndarray) -> None:
        idx = bin_of(survival)
        self.counts += np.bincount(idx, minlength=N_BINS)
        self.predicted += np.bincount(idx, weights=survival, minlength=N_BINS)
        self.observed += np.bincount(idx, weights=label, minlength=N_BINS)

    def merged(self, other: ReliabilityBins) -> ReliabilityBins:
        return ReliabilityBins(self.counts + other.counts, self.predicted + other.predicted,
                               self.observed + other.observed)

    @property
    def ece(self) -> float:
        """Σ_b (n_b/n)·|mean predicted − observed| (NaN without blocks)."""
        n = self.counts.sum()
        return float(np.abs(self.predicted - self.observed).sum() / n) if n else float("nan")

    def as_json(self) -> dict[str, list[float]]:
        return {"counts": self.counts.tolist(), "predicted": self.predicted.tolist(),
                "observed": self.observed.tolist()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReliabilityBins:
        return cls(*(np.asarray(data[k], dtype=float) for k in ("counts", "predicted", "observed")))


@dataclass
class DraftRecord:
    """Reached and accepted drafts per domain and position, and the head's reliability bins."""

    domains: tuple[str, ...]
    reached: np.ndarray                        # (domains, γ) request-steps that reached position k
    accepted: np.ndarray                       # (domains, γ) of those, the ones whose draft k was accepted
    seen: ReliabilityBins | None = None        # the confidences policies see
    raw: ReliabilityBins | None = None         # a model head's raw output (before STS)

    @property
    def acceptance(self) -> np.ndarray:
        """Conditional acceptance per domain and position (NaN where no request-step reached it)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.reached > 0, self.accepted / np.maximum(self.reached, 1), np.nan)

    def merged(self, other: DraftRecord) -> DraftRecord:
        if self.domains != other.domains or self.reached.shape != other.reached.shape:
            raise ValueError("draft records of different drafters do not merge")
        return DraftRecord(self.domains, self.reached + other.reached, self.accepted + other.accepted,
                           merged_bins(self.seen, other.seen), merged_bins(self.raw, other.raw))

    def as_json(self) -> dict[str, Any]:
        return {"domains": list(self.domains), "reached": self.reached.tolist(), "accepted": self.accepted.tolist(),
                "seen": None if self.seen is None else self.seen.as_json(),
                "raw": None if self.raw is None else self.raw.as_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DraftRecord:
        bins = {k: None if data.get(k) is None else ReliabilityBins.from_json(data[k]) for k in ("seen", "raw")}
        return cls(tuple(data["domains"]), np.asarray(data["reached"], dtype=np.int64),
                   np.asarray(data["accepted"], dtype=np.int64), bins["seen"], bins["raw"])


def merged_bins(a: ReliabilityBins | None, b: ReliabilityBins | None) -> ReliabilityBins | None:
    if a is None or b is None:
        return a if b is None else b
    return a.merged(b)


class DraftTally:
    """The decode core's side: sampled rows buffered, then binned into a `DraftRecord`.

    `raw_of` maps the confidences policies see back to a model head's raw
    output (None: the head has no raw output of its own).
    """

    def __init__(self, domains: tuple[str, ...], block_size: int,
                 raw_of: Callable[[np.ndarray], np.ndarray] | None) -> None:
        self.domains, self.block_size, self.raw_of = domains, block_size, raw_of
        width = block_size + 1
        self.histogram = np.zeros(len(domains) * width * width, dtype=np.int64)  # (domain, drawn, accepted)
        self.pending = np.zeros(BUFFER_ROWS, dtype=np.int64)
        self.filled = 0
        self.c = np.zeros((BUFFER_ROWS, block_size))
        self.prefix = np.zeros(BUFFER_ROWS, dtype=np.int64)
        self.c_filled = 0
        self.seen: ReliabilityBins | None = None
        self.raw: ReliabilityBins | None = None

    def outcomes(self, domains: np.ndarray, drawn: int, accepted: np.ndarray) -> None:
        """Rows' domains, the drafts drawn per row (one count for the step) and their accepted prefixes."""
        width = self.block_size + 1
        n = accepted.size
        if self.filled + n > BUFFER_ROWS:
            self.bin_outcomes()
        codes = self.pending[self.filled:self.filled + n]
        np.multiply(domains, width * width, out=codes)
        codes += drawn * width
        codes += accepted
        self.filled += n

    def confidences(self, c: np.ndarray, accepted: np.ndarray) -> None:
        """Rows' confidences (R, γ) as the head gave them and the accepted prefix of the whole block."""
        n = accepted.size
        if self.c_filled + n > BUFFER_ROWS:
            self.bin_confidences()
        self.c[self.c_filled:self.c_filled + n] = c
        self.prefix[self.c_filled:self.c_filled + n] = accepted
        self.c_filled += n

    def bin_outcomes(self) -> None:
        self.histogram += np.bincount(self.pending[:self.filled], minlength=self.histogram.size)
        self.filled = 0

    def bin_confidences(self) -> None:
        n = self.c_filled
        if n == 0:
            return
        label = (np.arange(self.block_size)[None, :] < self.prefix[:n, None]).ravel().astype(float)
        if self.seen is None:
            self.seen = ReliabilityBins()
        self.seen.add(np.cumprod(self.c[:n], axis=1).ravel(), label)
        if self.raw_of is not None:
            if self.raw is None:
                self.raw = ReliabilityBins()
            self.raw.add(np.cumprod(self.raw_of(self.c[:n]), axis=1).ravel(), label)
        self.c_filled = 0

    def record(self) -> DraftRecord:
        """Everything tallied so far, binned."""
        self.bin_outcomes()
        self.bin_confidences()
        width = self.block_size + 1
        counts = self.histogram.reshape(len(self.domains), width, width)  # [domain, drawn, accepted]
        k = np.arange(1, width)
        drawn, accepted = np.arange(width)[:, None, None], np.arange(width)[None, :, None]
        reached = np.einsum("dna,nak->dk", counts, ((drawn >= k) & (accepted >= k - 1)).astype(np.int64))
        took = np.einsum("dna,nak->dk", counts, ((drawn >= k) & (accepted >= k)).astype(np.int64))
        return DraftRecord(self.domains, reached, took, self.seen, self.raw)


def draft_tally(drafter: Drafter) -> DraftTally | None:
    """The tally of a speculating drafter's core (None without drafts to record)."""
    acceptance = drafter.acceptance
    if acceptance is None or drafter.block_size == 0:
        return None
    head = drafter.confidence
    return DraftTally(tuple(acceptance.domains), drafter.block_size,
                      head.unscaled if isinstance(head, ModelHead) else None)


def merged_record(records: list[DraftRecord | None]) -> DraftRecord | None:
    """Several cores' (or runs') records as one; None when none recorded drafts."""
    kept = [r for r in records if r is not None]
    if not kept:
        return None
    out = kept[0]
    for record in kept[1:]:
        out = out.merged(record)
    return out
