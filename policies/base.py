"""The verification-policy protocol: what a policy sees, what it returns, what it learns.

Per engine step the replica builds a `StepView` (calibrated confidences of
the running requests, the profile's steps/s table, the step's capacity) and
asks its policy for verification lengths `ℓ` (R integers in [0, γ]). After
the step, `observe(StepOutcome)` tells the policy what was accepted, for
policies that learn. This is the vLLM v1 split between "what I decided from
what I could see" and "what happened".

A `StepView` carries no true acceptance probabilities: a policy cannot reach
them. Only the oracle receives an `OracleView`, which adds the number of
drafts each request's target will accept; its class says `oracle = True`
and every report labels it.

Adding a policy: one module defining a `Policy` subclass (with a `Params`
dataclass for its `policy.params`), plus one line in `policies.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True, eq=False)
class StepView:
    """What a real engine can see when it schedules one step.

    confidences     (R, γ) calibrated confidences c_{r,k} (read-only)
    request_ids     (R,) stable request ids, to match history across steps
    steps_per_s     dense table: steps_per_s[B] for B in 0..max_step_tokens
    max_step_tokens tokens one forward may hold, `reserved_tokens` included
    reserved_tokens tokens already in this step (chunked-prefill chunks)
    max_batch_requests, block_size, step_index, now_s: engine facts
    drafted         (R,) bool: which requests drafted this step (bypass)
    """

    confidences: np.ndarray
    request_ids: np.ndarray
    steps_per_s: np.ndarray
    max_step_tokens: int
    reserved_tokens: int
    max_batch_requests: int
    block_size: int
    step_index: int
    now_s: float
    drafted: np.ndarray

    @property
    def batch_requests(self) -> int:
        return int(self.confidences.shape[0])

    @property
    def verify_capacity(self) -> int:
        """Most draft tokens the step can still take beyond each request's anchor."""
        return max(0, self.max_step_tokens - self.reserved_tokens - self.batch_requests)


@dataclass(frozen=True, eq=False)
class OracleView(StepView):
    """A StepView plus the truth: `accepted_prefix[r]` drafts of request r will be accepted."""

    accepted_prefix: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def step_view(policy: Policy, accepted_prefix: np.ndarray, **fields: Any) -> StepView:
    """The view an engine hands its policy: an OracleView with the truth for the oracle only."""
    if policy.oracle:
        return OracleView(**fields, accepted_prefix=accepted_prefix)
    return StepView(**fields)


@dataclass(frozen=True, eq=False)
class StepOutcome:
    """What happened: per request, the length verified and the drafts accepted."""

    request_ids: np.ndarray
    verify_lengths: np.ndarray
    accepted: np.ndarray
    now_s: float


@dataclass(frozen=True)
class NoParams:
    """A policy without parameters."""


class Policy:
    """Base class of verification policies. Subclasses override `decide`.

    Class attributes describe the policy to the engine and to reports:
    `lossless` (False for the synchronous global search), `oracle` (sees the
    truth), `hides_scheduling` (asynchronous: no scheduling overhead on the
    step), `drafts` (False for no speculation).
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams
    lossless: ClassVar[bool] = True
    oracle: ClassVar[bool] = False
    hides_scheduling: ClassVar[bool] = False
    drafts: ClassVar[bool] = True

    def __init__(self, params: Any, block_size: int) -> None:
        self.params = params
        self.block_size = block_size

    def decide(self, view: StepView) -> np.ndarray:
        raise NotImplementedError

    def observe(self, outcome: StepOutcome) -> None:
        """Learn from the step's outcome; most policies need nothing."""

    def drafting_mask(self, request_ids: np.ndarray) -> np.ndarray | None:
        """Which requests draft this step (None: all of them). Called before drafting."""
        return None

    @classmethod
    def label(cls) -> str:
        """The name reports show, with the lossy / oracle warning where it applies."""
        if cls.oracle:
            return f"{cls.name} (oracle: upper bound, not realisable)"
        if not cls.lossless:
            return f"{cls.name} (lossy: changes the output distribution)"
        return cls.name


def fit_capacity(lengths: np.ndarray, view: StepView) -> np.ndarray:
    """Shorten lengths, longest first, until Σ(1 + ℓ) fits the step's token capacity."""
    return water_fill(lengths, view.verify_capacity)


def water_fill(lengths: np.ndarray, budget: int) -> np.ndarray:
    """Cap lengths so that Σℓ ≤ budget, taking from the longest first.

    The result is the largest common cap c with Σ min(ℓ, c) ≤ budget, plus
    one extra draft for the first rows (row order) still longer than c, up
    to the budget: the same per-level order as admitting positions 1, 2, ...
    of every request in turn.
    """
    total = int(lengths.sum())
    if total <= budget:
        return lengths
    ordered = np.sort(lengths)
    n = ordered.size
    prefix = np.concatenate(([0], np.cumsum(ordered)))
    caps = np.arange(int(ordered[-1]) + 1)
    idx = np.searchsorted(ordered, caps, side="left")
    used = prefix[idx] + caps * (n - idx)
    cap = int(caps[used <= budget][-1])
    capped = np.minimum(lengths, cap)
    spare = budget - int(capped.sum())
    extra = np.flatnonzero(lengths > cap)[:spare]
    capped[extra] += 1
    return capped
