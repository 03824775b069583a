"""Difficulty-aware drafting bypass: hard requests stop drafting for a while.

The DSpark paper's stated limitation (docs/model/policies.md): a request whose drafts
are rarely accepted still pays the fixed drafting cost every step, and the
scheduler can only decline to verify, not decline to draft. The bypass is
an option of the DSpark policies (`policy.params.bypass: {...}`):

- per request, the acceptance of verified drafts is tracked from step
  outcomes (`AcceptanceHistory`, decayed over `window_steps`);
- once a request has `min_trials` tried drafts and its estimated
  per-position acceptance is below `acceptance_below`, it skips drafting
  for the next `skip_steps` engine steps (the replica then charges no
  drafting for it and verifies only its anchor token);
- when the skip ends the request drafts again with a clean history, so it
  is judged afresh on its next `min_trials` drafts (a probe).

What it saves depends on the drafting-latency model. With a per-step cost
(a fixed drafting time, or a memory-bound drafter whose forward costs the
same for 1 or 64 requests) a step saves only when no request drafts, and a
hard request that skips while others draft just loses its few accepted
tokens. `scope` chooses: `batch` (the default: hard requests skip only in
steps where every request is hard; pays with a per-step cost, never costs
much) or `request` (each hard request skips on its own: pays when drafting
cost grows with the drafting requests, e.g. a compute-bound drafter at
high concurrency, and loses up to ~9% otherwise). `benchmarks/bypass_gain.py`
measures both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from specplan.fields import bounded
from specplan.policies.base import StepOutcome
from specplan.policies.history import AcceptanceHistory


@dataclass(frozen=True)
class BypassParams:
    """`policy.params.bypass` of the DSpark policies."""

    acceptance_below: float = bounded(0.35, gt=0, lt=1, doc="a request is hard when its recent acceptance is "
                                      "below this", unit="probability")
    min_trials: int = bounded(4, ge=1, doc="drafts a request must have had verified before it can be judged hard",
                              unit="drafts")
    skip_steps: int = bounded(32, ge=1, doc="steps drafting is skipped once bypassed", unit="steps")
    window_steps: int = bounded(16, ge=1, doc="steps of acceptance the judgement reads", unit="steps")
    scope: Literal["request", "batch"] = bounded("batch", doc="batch: skip drafting only when every request of the "
                                                 "step is hard; request: skip each hard request's drafting")


class DraftingBypass:
    """Decides, per step and request, whether to draft; learns from step outcomes."""

    def __init__(self, params: BypassParams) -> None:
        self.params = params
        self.history = AcceptanceHistory(params.window_steps)
        self.skip_until = np.zeros(0, dtype=np.int64)
        self.step = 0

    def mask(self, request_ids: np.ndarray) -> np.ndarray:
        """True where the request drafts this step (call once per speculating step)."""
        self.step += 1
        self.grow(request_ids)
        drafts = self.skip_until[request_ids] < self.step
        if self.params.scope == "batch" and drafts.any():
            return np.ones(request_ids.size, dtype=bool)
        return drafts

    def observe(self, outcome: StepOutcome) -> None:
        ids = outcome.request_ids
        self.history.record(ids, outcome.verify_lengths, outcome.accepted)
        p = self.params
        judged = self.history.trial_counts(ids) >= p.min_trials
        hard = judged & (self.history.rate(ids, prior=1.0) < p.acceptance_below)
        if hard.any():
            self.grow(ids)
            self.skip_until[ids[hard]] = self.step + p.skip_steps
            self.history.forget(ids[hard])

    def grow(self, request_ids: np.ndarray) -> None:
        need = int(request_ids.max()) + 1 if request_ids.size else 0
        if need > self.skip_until.size:
            size = max(need, 2 * self.skip_until.size, 64)
            self.skip_until = np.concatenate((self.skip_until, np.zeros(size - self.skip_until.size, dtype=np.int64)))
