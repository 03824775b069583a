"""DSpark's confidence-scheduled verification: greedy (early stop), global, asynchronous.

All three rank the step's candidates (r, j) by prefix survival
`a_{r,j} = Π_{i≤j} c_{r,i}` and admit the top ones (specplan.policies.admission);
they differ in how many (docs/model/policies.md):

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
  (`length_setting = "hidden"`). Its plan is known before drafting, so it
  drafts only what the plan can verify (`params.draft_widths`): by
  default (`capacity`) w = min(γ, K) positions per request when K < γ, no
  request being verifiable past K: the same lengths for cheaper drafting;
  with `plan`, request r drafts w_r = min(γ, K, ℓ_r^lag + 1), ℓ_r^lag its
  share of the K positions in the two-step-old plan (more saved under a
  tight budget, less room for the current survivals). Drafting is priced for
  what was drafted (DSpark/DFlash: F(Σ_r (w_r + 1)) + max w · H(R) instead
  of F(R·(γ+1)) + γ·H(R); MTP and Eagle3: max w · F(R) instead of γ·F(R));
  positions never drafted enter later plans as a geometric continuation of
  the last drafted survival. Where drafting costs the same whatever is
  drafted (a fixed latency) it drafts the whole block.

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
from typing import ClassVar, Literal

import numpy as np

from specplan.fields import bounded
from specplan.policies.admission import (
    Ranked,
    choice_at,
    early_stop,
    global_best,
    rank_candidates,
    survival,
    theta_choice,
    throughput_curve,
    top_k_lengths,
    top_lengths,
)
from specplan.policies.base import (
    NEW,
    Decision,
    LengthSetting,
    Policy,
    StepOutcome,
    StepView,
    ThetaChoice,
)
from specplan.policies.bypass import BypassParams, DraftingBypass


@dataclass(frozen=True)
class DSparkParams:
    """`policy.params` of dspark-greedy and dspark-global."""

    bypass: BypassParams | None = bounded(None, doc="a difficulty-aware drafting bypass (the paper's stated future "
                                          "work)")


@dataclass(frozen=True)
class DSparkAsyncParams:
    """`policy.params` of dspark-async: cold-start length and the optional bypass."""

    cold_length: int = bounded(1, ge=0, verify_length=True,
                               doc="drafts verified per request before two steps of confidences exist", unit="tokens")
    bypass: BypassParams | None = bounded(None, doc="a difficulty-aware drafting bypass")
    draft_widths: Literal["capacity", "plan"] = bounded(
        "capacity", doc="what it drafts once its capacity K is known: capacity, min(γ, K) per request; plan, "
                        "each request's share of the lagged plan + 1")


class DSparkPolicy(Policy):
    """Shared by the DSpark policies: ranking, per-step admission count, the bypass option."""

    Params: ClassVar[type] = DSparkParams
    fits_budget: ClassVar[bool] = True

    def __init__(self, params: DSparkParams | DSparkAsyncParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.bypass = DraftingBypass(params.bypass) if params.bypass is not None else None

    def decide(self, view: StepView) -> Decision:
        ranked = rank_candidates(view)
        n = self.admit_count(view, ranked)
        return Decision(top_lengths(ranked, n), theta_choice(view, ranked, n))

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
    length_setting: ClassVar[LengthSetting] = "hidden"
    LAG_STEPS: ClassVar[int] = 2

    def __init__(self, params: DSparkAsyncParams, block_size: int) -> None:
        super().__init__(params, block_size)
        self.cold_length = params.cold_length
        self.snapshots: deque[Snapshot] = deque(maxlen=self.LAG_STEPS + 1)
        self.planned: np.ndarray | None = None  # the survivals the last capacity plan read (`plan` widths only)
        self.keeps_plan = params.draft_widths == "plan"
        self.buffers: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # plan_buffer's, by (R, γ)

    def decide(self, view: StepView) -> Decision:
        drafted = view.drafted
        all_drafted = view.drafting == view.batch_requests
        capacity, plan = self.lagged_capacity(view, drafted, all_drafted)
        capacity = min(capacity, view.verify_capacity)
        widths = self.draft_widths(view, capacity) if view.price.redrafts else None
        width = None
        if widths is not None:  # known before drafting: draft only what the plan can verify, priced as such
            view, width = self.narrowed(view, widths)
            narrowed, plan = self.lagged_capacity(view, drafted, all_drafted)
            capacity = min(narrowed, view.verify_capacity, capacity)
        current = survival(view.confidences)
        self.remember(view, current if widths is None else extend_survival(current, widths), drafted, all_drafted)
        return NEW(Decision, (top_k_lengths(current, capacity), plan, width))

    def draft_widths(self, view: StepView, capacity: int) -> np.ndarray | None:
        """Drafts per request the step's plan can verify (None: the whole block each).

        `capacity`: no request can be verified more than K drafts, so each drafts w = min(γ, K) ≥ 1,
        which changes no length. `plan`: request r drafts w_r = min(γ, K, ℓ_r + 1) ≥ 1, ℓ_r its share
        of the K positions in the lagged plan (one spare position for the current survivals to move
        into); before any plan, min(γ, K) each.
        """
        block = self.block_size
        cap = max(1, min(capacity, block))
        if self.params.draft_widths == "capacity" or self.planned is None:
            if cap >= block:
                return None
            widths = np.full(view.batch_requests, cap, dtype=np.int64)
        else:
            widths = np.minimum(top_k_lengths(self.planned, capacity) + 1, cap)
        widths = np.where(view.drafted, widths, 0)
        return None if widths.sum() >= block * view.drafting else widths

    def narrowed(self, view: StepView, widths: np.ndarray) -> tuple[StepView, tuple[int, int]]:
        """The view of a step that drafted `widths` positions per request (no confidence past them, its
        price) and its (widest, all) draft width."""
        drafted = np.arange(self.block_size) < widths[:, None]
        width = (int(widths.max()), int(widths.sum()))
        return dataclasses.replace(view, confidences=np.where(drafted, view.confidences, 0.0),
                                   price=view.price.redraft(*width)), width

    def remember(self, view: StepView, current: np.ndarray, drafted: np.ndarray, all_drafted: bool) -> None:
        if all_drafted:
            self.snapshots.append(Snapshot(view.step_index, view.request_ids, current))
        else:
            self.snapshots.append(Snapshot(view.step_index, view.request_ids[drafted], current[drafted]))

    def lagged(self, step_index: int) -> Snapshot | None:
        """The latest snapshot of a step at least LAG_STEPS before this one."""
        last = step_index - self.LAG_STEPS
        for snapshot in reversed(self.snapshots):
            if snapshot.step_index <= last:
                return snapshot
        return None

    def lagged_capacity(self, view: StepView, drafted: np.ndarray,
                        all_drafted: bool) -> tuple[int, ThetaChoice | None]:
        """K and its plan: the global argmax of Θ for this batch, planned with survivals two steps old.

        The plan's rows are written straight into the buffer its candidates are sorted in (one copy,
        not three); the rows themselves are kept (`planned`) only where a later step reads them.
        """
        past = self.lagged(view.step_index)
        self.planned = None
        if past is None or past.request_ids.size == 0:
            return self.cold_length * int(np.count_nonzero(drafted)), None
        ordered, planned = self.plan_buffer(view.confidences.shape)
        if all_drafted and same_requests(past.request_ids, view.request_ids):
            planned[...] = past.survivals  # the same requests as two steps ago: their rows as they were
        else:
            lagged_survivals(past, view.request_ids, None if all_drafted else drafted, out=planned)
        if self.keeps_plan:
            self.planned = planned.copy()
        _, tau, theta = throughput_curve(view, ordered)
        k = global_best(theta)
        return k, choice_at(view, tau, theta, k)

    def plan_buffer(self, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The buffer a plan of `shape` (R, γ) is written and sorted in, and its head as the plan's rows.

        One per batch size, kept between steps: nothing a Decision holds points into it.
        """
        buffer = self.buffers.get(shape)
        if buffer is None:
            ordered = np.empty(shape[0] * shape[1] + 1)
            buffer = self.buffers[shape] = (ordered, ordered[:-1].reshape(shape))
        return buffer


def same_requests(before: np.ndarray, now: np.ndarray) -> bool:
    """Whether two steps ran the same requests, by value (the same unchanged array answers at once).

    Ids of one dtype compare as bytes: a fifth of an elementwise comparison's cost, every step.
    """
    if before is now:
        return True
    if before.size != now.size:
        return False
    if before.dtype == now.dtype:
        return before.tobytes() == now.tobytes()
    return bool((before == now).all())


def extend_survival(survivals: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Survival rows drafted to w_r positions, continued past them at the last drafted position's rate.

    The positions past w_r were never drafted, so later capacity plans (two steps on) read this
    geometric continuation a_{w+i} = a_w · (a_w / a_{w−1})^i instead of confidences nobody saw.
    Rows that drafted nothing (w_r = 0) stay zero.
    """
    rows = np.arange(survivals.shape[0])
    last_at = np.maximum(widths, 1) - 1
    last = survivals[rows, last_at]
    before = np.where(last_at > 0, survivals[rows, np.maximum(last_at - 1, 0)], 1.0)
    rate = np.divide(last, before, out=np.zeros_like(last), where=before > 0)
    beyond = np.arange(survivals.shape[1]) - last_at[:, None]
    tail = last[:, None] * rate[:, None] ** np.maximum(beyond, 0)
    return np.where((beyond > 0) & (widths[:, None] > 0), tail, survivals)


def lagged_survivals(past: Snapshot, request_ids: np.ndarray, drafted: np.ndarray | None,
                     out: np.ndarray | None = None) -> np.ndarray:
    """Each current request's survival row from `past`; the mean row for requests it lacks.

    Requests that do not draft this step (`drafted` False; None: all draft) get a zero row (no candidates).
    `out` (R, γ), when given, receives the rows (and is returned).
    """
    ids, rows = past.request_ids, past.survivals
    pos = ids.searchsorted(request_ids)
    if out is None or out.dtype == rows.dtype:
        planned = rows.take(pos, axis=0, mode="clip", out=out)
    else:  # take writes only into its own dtype
        planned = out
        planned[...] = rows.take(pos, axis=0, mode="clip")
    found = ids.take(pos, mode="clip")
    if found.tobytes() != request_ids.tobytes():  # some request is new to `past` (bytes: cheaper than ==)
        missing = (found != request_ids).nonzero()[0]
        mean = np.add.reduce(rows, axis=0)
        mean /= rows.shape[0]
        planned[missing] = mean
    if drafted is not None:
        planned[~drafted] = 0.0
    return planned
