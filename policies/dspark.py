"""DSpark's confidence-scheduled verification: greedy (early stop), global, asynchronous.

All three rank the step's candidates (r, j) by prefix survival
`a_{r,j} = Π_{i≤j} c_{r,i}` and admit the top ones (policies.admission);
they differ in how many (DESIGN.md §1):

- `dspark-greedy` (Algorithm 1, synchronous, lossless): admit while the
  expected throughput Θ = τ · SPS(B) strictly improves; stop at the first
  candidate that does not. A sawtooth SPS traps it at the first cliff.
- `dspark-global` (synchronous, LOSSY, kept as a contrast): the argmax of Θ
  over every prefix of the ranking. It crosses cliffs, but whether x_k is
  verified can depend on c_{k+1}, which depends on x_k: the output
  distribution changes (`specplan audit dspark-global`).
- `dspark-async` (production, lossless): the step's capacity K must be fixed
  before the previous step ends, so K comes from a global search over the
  confidences of two steps earlier; the step then admits its top-K
  candidates by current survival. Scheduling latency is hidden
  (`hides_scheduling`).

How `dspark-async` turns the lagged search into K for the current batch:
the search of step t−2 gives every request then running an allotment (its
ℓ in that step's global argmax). K_t is the sum of the allotments of the
current drafting requests that were in step t−2's batch, plus, for each
request with no such history (it joined at t−1 or t), the mean allotment
per request of step t−2's search. With no lagged search at all (the
replica's first two speculating steps) each request gets `cold_length`.
K_t is capped by the step's capacity. Nothing in K_t depends on the
current step's drafts, which is the causal barrier that keeps it lossless.

All three accept `bypass: {...}` (policies.bypass): difficulty-aware
skipping of drafting for requests whose recent acceptance is low.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from policies.admission import Ranked, early_stop, global_best, rank_candidates, top_lengths
from policies.base import Policy, StepOutcome, StepView
from policies.bypass import BypassParams, DraftingBypass
from simulator.schema import num


@dataclass(frozen=True)
class DSparkParams:
    """`policy.params` of dspark-greedy and dspark-global."""

    bypass: BypassParams | None = None


@dataclass(frozen=True)
class DSparkAsyncParams:
    """`policy.params` of dspark-async: cold-start length and the optional bypass."""

    cold_length: int = num(1, ge=0)
    bypass: BypassParams | None = None


class DSparkPolicy(Policy):
    """Shared by the DSpark policies: ranking, per-step admission count, the bypass option."""

    Params: ClassVar[type] = DSparkParams

    def __init__(self, params: DSparkParams | DSparkAsyncParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.bypass = DraftingBypass(params.bypass) if params.bypass is not None else None

    def decide(self, view: StepView) -> np.ndarray:
        ranked = rank_candidates(view)
        return top_lengths(ranked, self.admit_count(view, ranked))

    def admit_count(self, view: StepView, ranked: Ranked) -> int:
        raise NotImplementedError

    def drafting_mask(self, request_ids: np.ndarray) -> np.ndarray | None:
        return None if self.bypass is None else self.bypass.mask(request_ids)

    def observe(self, outcome: StepOutcome) -> None:
        if self.bypass is not None:
            self.bypass.observe(outcome)


class DSparkGreedy(DSparkPolicy):
    """Algorithm 1 with early stop: synchronous and lossless; stops at the first Θ cliff."""

    name: ClassVar[str] = "dspark-greedy"

    def admit_count(self, view: StepView, ranked: Ranked) -> int:
        return early_stop(ranked.theta)


class DSparkGlobal(DSparkPolicy):
    """Synchronous global argmax of Θ: crosses cliffs but leaks drafts into admission (lossy)."""

    name: ClassVar[str] = "dspark-global"
    lossless: ClassVar[bool] = False

    def admit_count(self, view: StepView, ranked: Ranked) -> int:
        return global_best(ranked.theta)


@dataclass(frozen=True, eq=False)
class Allotment:
    """One step's global-search result, kept for the step two later: ids sorted, ℓ per id."""

    step_index: int
    request_ids: np.ndarray
    lengths: np.ndarray

    @property
    def mean_length(self) -> float:
        return float(self.lengths.mean()) if self.lengths.size else 0.0


class DSparkAsync(DSparkPolicy):
    """Capacity K from a global search two steps back, then top-K by current survival."""

    name: ClassVar[str] = "dspark-async"
    Params: ClassVar[type] = DSparkAsyncParams
    hides_scheduling: ClassVar[bool] = True
    LAG_STEPS: ClassVar[int] = 2

    def __init__(self, params: DSparkAsyncParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.cold_length = params.cold_length
        self.allotments: deque[Allotment] = deque(maxlen=self.LAG_STEPS + 1)

    def admit_count(self, view: StepView, ranked: Ranked) -> int:
        capacity = self.lagged_capacity(view)
        self.remember(view, ranked)
        return min(capacity, ranked.gains.size)

    def remember(self, view: StepView, ranked: Ranked) -> None:
        lengths = top_lengths(ranked, global_best(ranked.theta))
        order = np.argsort(view.request_ids, kind="stable")
        self.allotments.append(Allotment(view.step_index, view.request_ids[order], lengths[order]))

    def lagged(self, step_index: int) -> Allotment | None:
        """The latest global search of a step at least LAG_STEPS before this one."""
        for allotment in reversed(self.allotments):
            if allotment.step_index <= step_index - self.LAG_STEPS:
                return allotment
        return None

    def lagged_capacity(self, view: StepView) -> int:
        """K for this step, from information fixed two steps ago (see the module docstring)."""
        drafting = np.asarray(view.drafted, dtype=bool)
        past = self.lagged(view.step_index)
        if past is None or past.request_ids.size == 0:
            return self.cold_length * int(np.count_nonzero(drafting))
        ids = view.request_ids[drafting]
        pos = np.minimum(np.searchsorted(past.request_ids, ids), past.request_ids.size - 1)
        known = past.request_ids[pos] == ids
        newcomers = int(ids.size - np.count_nonzero(known))
        return int(past.lengths[pos[known]].sum()) + round(newcomers * past.mean_length)
