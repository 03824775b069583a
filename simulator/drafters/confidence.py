"""Confidence heads: what the drafter tells the scheduler about each draft.

`perfect`: c = p, the head knows the true conditional acceptance.
`model` (with STS calibration) is built in `specplan.simulator.drafters.heads`.
Heads read the acceptance logit x = logit p (the engine draws in logit
space); policies only ever see the output of `observe`, never p.
"""

from __future__ import annotations

import numpy as np

from specplan.simulator.drafters.curves import sigmoid


class PerfectConfidence:
    """c_{r,k} = p_{r,k}: an ideal, perfectly calibrated head."""

    kind = "perfect"

    def observe(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return sigmoid(x)
