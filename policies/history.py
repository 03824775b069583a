"""Per-request acceptance history, learnt from step outcomes (never from true probabilities).

Policies that learn (the goodput baseline, the drafting bypass) keep, for
every request id, exponentially decayed counts of verified draft positions
that the target tried (`trials`) and accepted (`successes`). One step with
verification length ℓ and `accepted` drafts tried `accepted + 1` positions
when a draft was rejected, `accepted` when all ℓ passed; so
`successes / trials` estimates the per-position conditional acceptance
(the maximum-likelihood estimate for a constant p); `trial_counts` is the
undecayed number of tried drafts, for "judge after n drafts" rules. Arrays are indexed by
request id and grow on demand: every update is one vectorised assignment.
"""

from __future__ import annotations

import numpy as np


class AcceptanceHistory:
    """Decayed success/trial counts per request id; `decay` = 1 − 1/window_steps."""

    def __init__(self, window_steps: int) -> None:
        self.decay = 1.0 - 1.0 / window_steps
        self.successes = np.zeros(0)
        self.trials = np.zeros(0)
        self.tried_total = np.zeros(0)

    def grow(self, request_ids: np.ndarray) -> None:
        need = int(request_ids.max()) + 1 if request_ids.size else 0
        if need <= self.trials.size:
            return
        size = max(need, 2 * self.trials.size, 64)
        pad = np.zeros(size - self.trials.size)
        self.successes = np.concatenate((self.successes, pad))
        self.trials = np.concatenate((self.trials, pad))
        self.tried_total = np.concatenate((self.tried_total, pad))

    def record(self, request_ids: np.ndarray, verify_lengths: np.ndarray, accepted: np.ndarray) -> np.ndarray:
        """Fold one step's outcome in; returns the mask of rows that tried at least one draft."""
        self.grow(request_ids)
        tried = accepted + (accepted < verify_lengths)
        rows = tried > 0
        ids = request_ids[rows]
        self.successes[ids] = self.decay * self.successes[ids] + accepted[rows]
        self.trials[ids] = self.decay * self.trials[ids] + tried[rows]
        self.tried_total[ids] += tried[rows]
        return rows

    def rate(self, request_ids: np.ndarray, prior: float) -> np.ndarray:
        """Estimated per-position acceptance; `prior` where a request has no trials yet."""
        self.grow(request_ids)
        trials = self.trials[request_ids]
        seen = trials > 0
        out = np.full(request_ids.size, prior)
        out[seen] = self.successes[request_ids[seen]] / trials[seen]
        return out

    def trial_counts(self, request_ids: np.ndarray) -> np.ndarray:
        """Drafts tried since the request started (or was last forgotten), undecayed."""
        self.grow(request_ids)
        return self.tried_total[request_ids]

    def forget(self, request_ids: np.ndarray) -> None:
        """Start these requests afresh (no trials, no successes)."""
        self.successes[request_ids] = 0.0
        self.trials[request_ids] = 0.0
        self.tried_total[request_ids] = 0.0
