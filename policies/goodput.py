"""Goodput-optimal uniform length per batch (SmartSpec / vLLM dynamic-speculation style).

One length ℓ for the whole batch, the one maximising expected tokens ×
steps/s: `Θ(ℓ) = (R + Σ_r Σ_{j≤ℓ} α_r^j) · SPS(B₀ + D·ℓ)` over ℓ = 0..γ,
where D is the number of drafting requests and SPS the step's price (the
whole step the engine charges). It decides each step after the previous
step's outcomes, synchronously, so it pays the scheduling overhead. Like SmartSpec it uses no
per-token confidence head: α_r is request r's acceptance rate estimated
from its past step outcomes (`AcceptanceHistory`, decayed over
`window_steps`; `prior_acceptance` until a request has been verified).
Decisions therefore depend only on the past: lossless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from specplan.fields import bounded
from specplan.policies.base import Decision, Policy, StepOutcome, StepView, ThetaChoice
from specplan.policies.history import AcceptanceHistory


@dataclass(frozen=True)
class GoodputParams:
    """`policy.params` of goodput: its acceptance estimate before and while it learns."""

    prior_acceptance: float = bounded(0.7, gt=0, lt=1, doc="acceptance assumed before any is observed",
                                      unit="probability")
    window_steps: int = bounded(16, ge=1, doc="steps of observed acceptance the estimate reads", unit="steps")


class Goodput(Policy):
    """The batch-wide ℓ with the best expected tokens × steps/s, from learnt acceptance rates."""

    name: ClassVar[str] = "goodput"
    Params: ClassVar[type] = GoodputParams
    fits_budget: ClassVar[bool] = True

    def __init__(self, params: GoodputParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.history = AcceptanceHistory(params.window_steps)
        self.positions = np.arange(1, block_size + 1)

    def decide(self, view: StepView) -> Decision:
        drafted = np.asarray(view.drafted, dtype=bool)
        drafting = int(np.count_nonzero(drafted))
        lengths = np.zeros(view.batch_requests, dtype=np.int64)
        if drafting == 0 or view.verify_capacity == 0:
            return Decision(lengths)
        best, plan = self.best_length(view, drafted, drafting)
        lengths[drafted] = best
        return Decision(lengths, plan)

    def best_length(self, view: StepView, drafted: np.ndarray, drafting: int) -> tuple[int, ThetaChoice]:
        rates = self.history.rate(view.request_ids[drafted], self.params.prior_acceptance)
        gain = (rates[:, None] ** self.positions[: view.block_size]).sum(axis=0).cumsum()
        longest = min(view.block_size, view.verify_capacity // drafting)
        tokens = view.base_tokens + drafting * np.arange(longest + 1)
        tau = view.batch_requests + np.concatenate(([0.0], gain[:longest]))
        theta = tau * view.price.steps_per_s(tokens)
        best = int(np.argmax(theta))
        return best, ThetaChoice(int(tokens[best]), float(tau[best]), float(theta[best]))

    def observe(self, outcome: StepOutcome) -> None:
        self.history.record(outcome.request_ids, outcome.verify_lengths, outcome.accepted)
