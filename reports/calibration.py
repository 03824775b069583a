"""A label's drafter → reliability curves of its confidence head, for the calibration figure.

Draft blocks are drawn from the scenario's own acceptance model (domain mix,
request and token spread, requests weighted as proposals are, exactly as
`specplan calibrate` draws them: `heads.proposal_requests`), on a stream of
their own so the figure never shifts the simulation's draws. Heads read the
acceptance *logit* x = logit p (as the engine hands it to them), never p. Prediction and label follow
`specplan.simulator.drafters.calibration`: predicted prefix survival
`a_k = Π_{i≤k} c_i` against "drafts 1..k all accepted", every position
pooled. A head with a raw output (`confidence.kind: model`) is drawn twice
on the same noise: raw, and as policies see it (after STS when set).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.simulator.core.streams import seed_sequence, stream
from specplan.simulator.drafters.calibration import ece, reliability, sigmoid, survival
from specplan.simulator.drafters.drafter import build_drafter
from specplan.simulator.drafters.heads import proposal_requests
from specplan.simulator.scenario import Scenario


@dataclass(frozen=True)
class ReliabilityCurve:
    """Per-bin mean predicted and observed prefix survival, with the pooled ECE."""

    name: str
    style: str
    counts: np.ndarray
    mean_pred: np.ndarray
    observed: np.ndarray
    ece: float


def reliability_curves(scenario: Scenario, blocks: int = 20000) -> list[ReliabilityCurve]:
    """[raw head (when it has one), confidences the policy sees] for one scenario's drafter."""
    drafter = build_drafter(scenario.drafter, load_profile(scenario.hardware.profile),
                            seed_sequence(scenario.seed, "calibration"))
    acceptance = drafter.acceptance
    assert acceptance is not None, "reliability needs a speculating drafter"
    rng = stream(scenario.seed, "report.calibration")
    domain_idx, offsets = proposal_requests(acceptance, blocks, rng)
    x = acceptance.step_logits(acceptance.row_logits(domain_idx, offsets), rng)
    labels = survival(rng.random(x.shape) < sigmoid(x)).ravel()
    head = drafter.confidence
    curves = []
    raw = getattr(head, "raw", None)
    if raw is not None:
        curves.append(curve("raw head", "o--", raw(x, stream(scenario.seed, "report.head")), labels))
    seen = head.observe(x, stream(scenario.seed, "report.head"))
    name = "seen by the policy" if raw is not None else f"{head.kind} head (c = p)"
    curves.append(curve(name, "o-", seen, labels))
    return curves


def curve(name: str, style: str, confidences: np.ndarray, labels: np.ndarray) -> ReliabilityCurve:
    predicted = np.cumprod(confidences, axis=1).ravel()
    bins = reliability(predicted, labels)
    return ReliabilityCurve(name, style, bins.counts, bins.mean_pred, bins.observed, ece(predicted, labels))
