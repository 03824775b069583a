"""A run's recorded draft record → reliability curves of its confidence head, for the calibration figure.

The run records the confidences its policy saw and the outcomes of those
drafts (specplan.simulator.engine.records.draft_record: a sample of its steps,
binned as specplan.simulator.drafters.head_calibration bins them: predicted
prefix survival `a_k = Π_{i≤k} c_i` against "drafts 1..k all accepted",
every position pooled). This module only turns those bins into curves; it
draws nothing and builds no model, so the figure shows what was simulated.
A model head's record also holds its raw output (before STS), as a second
curve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.simulator.engine.records.draft_record import DraftRecord, ReliabilityBins


@dataclass(frozen=True)
class ReliabilityCurve:
    """Per-bin mean predicted and observed prefix survival, with the pooled ECE."""

    name: str
    style: str
    counts: np.ndarray
    mean_pred: np.ndarray
    observed: np.ndarray
    ece: float


def reliability_curves(record: DraftRecord, head_kind: str) -> list[ReliabilityCurve]:
    """[raw head (when recorded), confidences the policy saw]; empty when the run saw no confidences."""
    if record.seen is None:
        return []
    curves = []
    if record.raw is not None:
        curves.append(curve("raw head", "o--", record.raw))
    name = "seen by the policy" if record.raw is not None else f"{head_kind} head (c = p)"
    curves.append(curve(name, "o-", record.seen))
    return curves


def curve(name: str, style: str, bins: ReliabilityBins) -> ReliabilityCurve:
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_pred, observed = bins.predicted / bins.counts, bins.observed / bins.counts
    return ReliabilityCurve(name, style, bins.counts, mean_pred, observed, bins.ece)
