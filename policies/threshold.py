"""Static confidence threshold: verify while `c ≥ θ` (or while the survival `a ≥ θ`).

A baseline that uses the confidence head but ignores the hardware: each
request's length is its longest prefix of drafts that all pass the
threshold, whatever the batch size and the step-time curve. The decision
for position k uses c_1..c_k only (they depend on drafts before x_k), so
it is lossless. It decides from the drafts, so it pays the scheduling
overhead; it does not fit the token budget itself, so the engine reserves
the whole block per request before drafting and defers the requests the
budget cannot hold (deferring after seeing the drafts would make which
drafts get verified depend on the drafts themselves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from specplan.fields import bounded
from specplan.policies.admission import survival
from specplan.policies.base import Decision, Policy, StepView


@dataclass(frozen=True)
class ThresholdParams:
    """`threshold` θ in (0, 1]; `on`: the per-position confidence c or the prefix survival a."""

    threshold: float = bounded(0.5, gt=0, le=1, doc="verify while the quantity stays at or above θ",
                               unit="probability")
    on: Literal["confidence", "survival"] = bounded("confidence", doc="the per-position confidence c, or the prefix "
                                                    "survival a (the product of c up to the position)")


class Threshold(Policy):
    """ℓ_r = the longest prefix whose confidences (or survivals) are all ≥ θ."""

    name: ClassVar[str] = "threshold"
    Params: ClassVar[type] = ThresholdParams

    def decide(self, view: StepView) -> Decision:
        theta = self.params.threshold
        if self.params.on == "survival":
            passing = survival(view.confidences) >= theta
        else:
            passing = np.cumprod(view.confidences >= theta, axis=1, dtype=bool)
        return Decision(np.count_nonzero(passing, axis=1).astype(np.int64))
