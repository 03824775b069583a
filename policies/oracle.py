"""The oracle: verifies only drafts that the target will accept. An upper bound, not a policy.

It receives an `OracleView` (the true accepted prefix of every request)
and admits accepted drafts only, as many as maximise expected tokens ×
steps/s: all of them unless a step-time cliff makes the last ones cost
more than they return. Accepted drafts are admitted position by position
across requests (position 1 of every request, then position 2, ...).

Every report labels it "oracle". It is also not lossless as a sampler: it
never verifies the first rejected draft, so the target's residual
resampling at that position is replaced by a plain sample (`specplan audit
oracle` shows the shift). Only its token counts are meaningful: they bound
what any realisable policy can reach.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from specplan.policies.base import (
    Decision,
    LengthSetting,
    OracleView,
    Policy,
    StepView,
    ThetaChoice,
    water_fill,
)


class Oracle(Policy):
    """ℓ_r = accepted prefix of r, trimmed where Θ = τ · SPS(B) peaks."""

    name: ClassVar[str] = "oracle"
    oracle: ClassVar[bool] = True
    lossless: ClassVar[bool] = False
    length_setting: ClassVar[LengthSetting] = "hidden"  # an upper bound pays no scheduling overhead
    fits_budget: ClassVar[bool] = True

    def decide(self, view: StepView) -> Decision:
        if not isinstance(view, OracleView):
            raise TypeError("the oracle needs an OracleView (the engine builds one for oracle policies)")
        accepted = np.asarray(view.accepted_prefix, dtype=np.int64)
        total = min(int(accepted.sum()), view.verify_capacity)
        if total == 0:
            return Decision(np.zeros_like(accepted))
        base = view.base_tokens
        tau = view.batch_requests + np.arange(total + 1, dtype=float)
        theta = tau * view.price.steps_per_s_range(base, base + total + 1)
        best = int(np.argmax(theta))
        return Decision(water_fill(accepted, best), ThetaChoice(base + best, float(tau[best]), float(theta[best])))
