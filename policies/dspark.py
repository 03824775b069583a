"""DSpark's confidence-scheduled verification: greedy (early stop), global, asynchronous.

All three rank the step's candidates (r, j) by prefix survival
`a_{r,j} = Π_{i≤j} c_{r,i}` and admit the top ones (specplan.policies.admission);
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
  (`scheduling = "hidden"`). When that K is below the block γ, no request
  can verify more than K drafts, so it drafts only w = max(1, K) positions
  (`draft_width`): the same lengths, and a drafting forward priced at w
  (DSpark/DFlash F(R·(w+1)) + w·H(R) instead of F(R·(γ+1)) + γ·H(R); MTP
  and Eagle3 w·F(R) instead of γ·F(R)).

How `dspark-async` plans K for the current batch: it keeps, per step, the
survival rows of the drafting requests. At step t it takes the snapshot of
step t−2 and runs the global search (argmax of Θ) for the current batch
(its R, reserved tokens and capacity) with each request's survival row
from that snapshot. A request with no row there (it joined, or did not
draft, at t−2) is planned with the mean survival row of that snapshot;
requests that do not draft now get no candidates. With no snapshot two
steps back (the replica's first two speculating steps) each drafting
request gets `cold_length`. K is capped by the step's capacity; nothing in
it depends on the current step's drafts, the causal barrier that keeps the
policy lossless while it still crosses step-time cliffs.

All three accept `bypass: {...}` (specplan.policies.bypass): difficulty-aware
skipping of drafting for requests whose recent acceptance is low.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from specplan.policies.admission import (
    Ranked,
    early_stop,
    global_best,
    rank_candidates,
    record_plan,
    survival,
    top_k_lengths,
    top_lengths,
)
from specplan.policies.base import Policy, StepOutcome, StepView
from specplan.policies.bypass import BypassParams, DraftingBypass
from specplan.simulator.core.schema import num


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
    fits_budget: ClassVar[bool] = True

    def __init__(self, params: DSparkParams | DSparkAsyncParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.bypass = DraftingBypass(params.bypass) if params.bypass is not None else None

    def decide(self, view: StepView) -> np.ndarray:
        ranked = rank_candidates(view)
        n = self.admit_count(view, ranked)
        record_plan(self, view, ranked, n)
        return top_lengths(ranked, n)

    def admit_count(self, view: StepView, ranked: Ranked) -> int:
        raise NotImplementedError

    def drafting_mask(self, request_ids: np.ndarray) -> np.ndarray | None:
        return None if self.bypass is None else self.bypass.mask(request_ids)

    def observe(self, outcome: StepOutcome) -> None:
        if self.bypass is not None:
            self.bypass.observe(outcome)

    @property
    def learns(self) -> bool:
        return self.bypass is not None


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


class Snapshot:
    """One step's survival rows of its drafting requests (ids ascending), kept for the step two later."""

    __slots__ = ("request_ids", "step_index", "survivals")

    def __init__(self, step_index: int, request_ids: np.ndarray, survivals: np.ndarray) -> None:
        self.step_index, self.request_ids, self.survivals = step_index, request_ids, survivals


class DSparkAsync(DSparkPolicy):
    """Capacity K from a global search on confidences two steps old, then top-K by current survival."""

    name: ClassVar[str] = "dspark-async"
    Params: ClassVar[type] = DSparkAsyncParams
    scheduling: ClassVar[str] = "hidden"
    LAG_STEPS: ClassVar[int] = 2

    def __init__(self, params: DSparkAsyncParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.cold_length = params.cold_length
        self.snapshots: deque[Snapshot] = deque(maxlen=self.LAG_STEPS + 1)

    def decide(self, view: StepView) -> np.ndarray:
        self.draft_width = None
        drafted = view.drafted
        all_drafted = view.drafting == view.batch_requests
        capacity = min(self.lagged_capacity(view, drafted, all_drafted), view.verify_capacity)
        width = max(1, min(capacity, self.block_size))
        if width < self.block_size:  # K < γ, known before drafting: no request can verify more than K drafts
            view = dataclasses.replace(view, confidences=view.confidences[:, :width],
                                       price=view.price.redraft(width))
            capacity = min(self.lagged_capacity(view, drafted, all_drafted), view.verify_capacity, capacity)
            self.draft_width = width
        current = survival(view.confidences)
        self.remember(view, extend_survival(current, self.block_size), drafted, all_drafted)
        return top_k_lengths(current, capacity)

    def remember(self, view: StepView, current: np.ndarray, drafted: np.ndarray, all_drafted: bool) -> None:
        if all_drafted:
            self.snapshots.append(Snapshot(view.step_index, view.request_ids, current))
        else:
            self.snapshots.append(Snapshot(view.step_index, view.request_ids[drafted], current[drafted]))

    def lagged(self, step_index: int) -> Snapshot | None:
        """The latest snapshot of a step at least LAG_STEPS before this one."""
        for snapshot in reversed(self.snapshots):
            if snapshot.step_index <= step_index - self.LAG_STEPS:
                return snapshot
        return None

    def lagged_capacity(self, view: StepView, drafted: np.ndarray, all_drafted: bool) -> int:
        """K: the global argmax of Θ for this batch, planned with survivals two steps old."""
        past = self.lagged(view.step_index)
        if past is None or past.request_ids.size == 0:
            self.last_plan = None
            return self.cold_length * int(np.count_nonzero(drafted))
        if all_drafted and past.request_ids is view.request_ids:
            planned = past.survivals  # the same batch as two steps ago (the engine's same ids object)
        else:
            planned = lagged_survivals(past, view.request_ids, None if all_drafted else drafted)
        ranked = rank_candidates(view, planned)
        k = global_best(ranked.theta)
        record_plan(self, view, ranked, k)
        return k


def extend_survival(survivals: np.ndarray, block_size: int) -> np.ndarray:
    """Survival rows drafted to w < γ positions, continued to γ at the last drafted position's rate.

    The positions past w were never drafted, so later capacity plans (two steps on) read this
    geometric continuation a_{w+i} = a_w · (a_w / a_{w−1})^i instead of confidences nobody saw.
    """
    width = survivals.shape[1]
    if width >= block_size:
        return survivals
    last = survivals[:, -1:]
    before = survivals[:, -2:-1] if width > 1 else np.ones_like(last)
    rate = np.divide(last, before, out=np.zeros_like(last), where=before > 0)
    tail = last * rate ** np.arange(1, block_size - width + 1)
    return np.concatenate([survivals, tail], axis=1)


def lagged_survivals(past: Snapshot, request_ids: np.ndarray, drafted: np.ndarray | None) -> np.ndarray:
    """Each current request's survival row from `past`; the mean row for requests it lacks.

    Requests that do not draft this step (`drafted` False; None: all draft) get a zero row (no candidates).
    """
    ids, rows = past.request_ids, past.survivals
    pos = ids.searchsorted(request_ids)
    planned = rows.take(pos, axis=0, mode="clip")
    missing = (ids.take(pos, mode="clip") != request_ids).nonzero()[0]
    if missing.size:
        mean = np.add.reduce(rows, axis=0)
        mean /= rows.shape[0]
        planned[missing] = mean
    if drafted is not None:
        planned[~drafted] = 0.0
    return planned
