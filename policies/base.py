"""The verification-policy protocol: what a policy sees, what it returns, what it learns.

Per engine step the decode core builds a `StepView` (calibrated confidences
of the running requests, the step's price, the step's capacity) and asks
its policy to `decide`: the policy returns one `Decision`, its verification
lengths `ℓ` (R integers in [0, γ], or one integer for every row:
`Decision.uniform(n)`) together with the Θ choice it optimised, if any.
After the step, `observe(StepOutcome)` tells the policy what was accepted,
for policies that learn. This is the vLLM v1 split between "what I decided
from what I could see" and "what happened".

The price in the view (`StepView.price`, a `specplan.simulator.engine.price`
quote for this batch) is the function the engine's clock charges: the
whole step, drafting, verify at B tokens and the batch's KV context, host
time and the scheduling overhead the policy pays. A policy that weighs
tokens against time reads it and nothing else, so what it maximises is
what the step costs.

What a policy declares to the engine (class attributes):

- `length_setting`, how its lengths are set: `fixed` (before drafting, by
  `planned_length(R)`: none, mtp-1, static, length-schedule; no per-step
  decision, so no scheduling overhead, as production MTP-1 runs with
  zero-overhead scheduling), `per_step` (decided from the current step's
  drafts or outcomes, synchronously: pays `engine.scheduling_overhead_ms`),
  `hidden` (decided per step but ahead, the overhead overlapping the
  previous step: dspark-async; and the oracle, an upper bound).
- `fits_budget`: the policy chooses within `view.verify_capacity` itself.
  For the others the engine reserves `planned_length` (or the whole block)
  per request before drafting. Under `engine.budget: defer` (this
  project's rule) the requests beyond the step's token budget (the
  youngest) wait for the next step and are counted
  (`request_steps_deferred`). Under `engine.budget: truncate` (vLLM's
  rule: its scheduler gives each request min(its new tokens, the token
  budget left) and drops the draft tokens past the budget's edge) the
  request at the edge keeps the drafts that fit (`draft_tokens_truncated`)
  and the ones after it wait.

A `StepView` carries no true acceptance probabilities: a policy cannot reach
them. Only the oracle receives an `OracleView`, which adds the number of
drafts each request's target will accept; its class says `oracle = True`
and every report labels it.

Adding a policy: one module defining a `Policy` subclass (its
`length_setting`, a `decide` that returns a `Decision`, and a `Params`
dataclass for its `policy.params`, bounds declared with
`specplan.fields.bounded`), plus one line in `specplan.policies.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple, Protocol

import numpy as np


class Price(Protocol):
    """A step's price as policies read it (specplan.simulator.engine.price.quote.StepQuote)."""

    def steps_per_s(self, tokens: np.ndarray) -> np.ndarray: ...

    def steps_per_s_range(self, start: int, stop: int) -> np.ndarray: ...

    def step_ms(self, tokens: int) -> float: ...

    @property
    def redrafts(self) -> bool:
        """Whether `redraft` reprices drafting (its cost depends on how many positions are drafted)."""
        ...

    def redraft(self, widest: int, positions: int | None = None) -> Price:
        """The same step with `positions` drafts in all, `widest` per request at most (the pricer reprices drafting)."""
        ...


class SpsTable:
    """A price given directly as a dense steps/s table (`sps[B]`, B = 0..len − 1).

    The engine prices steps with `specplan.simulator.engine.price`; this form is for
    set-ups defined by their steps/s figures alone (the audit's
    counterexample, policy benchmarks).
    """

    def __init__(self, sps: np.ndarray) -> None:
        self.sps = np.asarray(sps, dtype=float)

    def steps_per_s(self, tokens: np.ndarray) -> np.ndarray:
        return self.sps[tokens]

    def steps_per_s_range(self, start: int, stop: int) -> np.ndarray:
        return self.sps[start:stop]

    def step_ms(self, tokens: int) -> float:
        return 1000.0 / float(self.sps[tokens])

    redrafts = False  # a steps/s table knows no drafting part

    def redraft(self, widest: int, positions: int | None = None) -> SpsTable:
        """A steps/s table knows no drafting part: the same table."""
        return self


@dataclass(slots=True, eq=False)
class StepView:
    """What a real engine can see when it schedules one step (policies read it, never write it).

    confidences     (R, γ) calibrated confidences c_{r,k}, probabilities in [0, 1]
    request_ids     (R,) stable request ids, ascending (arrival order), to match history across steps
    price           the whole step's price at B tokens for this batch (see the module docstring)
    max_step_tokens tokens one forward may hold, `reserved_tokens` included
    reserved_tokens tokens already in this step (chunked-prefill chunks)
    max_batch_requests, block_size, step_index, now_s: engine facts
    drafted         (R,) bool: which requests drafted this step (bypass)
    drafting        how many of them did

    Derived once at construction: `batch_requests` (R), `base_tokens` (B with
    no draft verified: one anchor per request plus the reserved tokens) and
    `verify_capacity` (most draft tokens the step can still take beyond
    each request's anchor).
    """

    confidences: np.ndarray
    request_ids: np.ndarray
    price: Price
    max_step_tokens: int
    reserved_tokens: int
    max_batch_requests: int
    block_size: int
    step_index: int
    now_s: float
    drafted: np.ndarray
    drafting: int
    batch_requests: int = field(init=False)
    base_tokens: int = field(init=False)
    verify_capacity: int = field(init=False)

    def __post_init__(self) -> None:
        self.batch_requests = r = self.confidences.shape[0]
        self.base_tokens = base = r + self.reserved_tokens
        self.verify_capacity = max(0, self.max_step_tokens - base)


@dataclass(slots=True, eq=False)
class OracleView(StepView):
    """A StepView plus the truth: `accepted_prefix[r]` drafts of request r will be accepted."""

    accepted_prefix: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class StepOutcome:
    """What happened: per request, the length verified and the drafts accepted."""

    request_ids: np.ndarray
    verify_lengths: np.ndarray
    accepted: np.ndarray
    now_s: float


NEW = tuple.__new__  # a NamedTuple made from a tuple of all its fields, for one made every step (no Python call)


class ThetaChoice(NamedTuple):
    """What a throughput-maximising policy chose for a step: B, expected tokens, Θ = tokens · SPS(B)."""

    verify_tokens: int
    expected_tokens: float
    theta: float


class Decision(NamedTuple):
    """What a policy hands the engine for one step: its lengths and the Θ choice it optimised (if any).

    lengths      ℓ per request (R,), or one int: every request verifies that many (`Decision.uniform`)
    theta        the ThetaChoice behind the lengths; None for policies that do not maximise Θ
    draft_width  (widest, all) drafts the step needed when the policy knew them before drafting and
                 they are fewer than the whole blocks (the engine prices drafting for them); else None
    """

    lengths: np.ndarray | int
    theta: ThetaChoice | None = None
    draft_width: tuple[int, int] | None = None

    @classmethod
    def uniform(cls, length: int, theta: ThetaChoice | None = None) -> Decision:
        """Every request verifies `length` drafts."""
        return cls(int(length), theta)

    def per_request(self, requests: int) -> np.ndarray:
        """ℓ as an (R,) array, whichever form the policy gave."""
        if isinstance(self.lengths, int):
            return np.full(requests, self.lengths, dtype=np.int64)
        return np.asarray(self.lengths, dtype=np.int64)


LengthSetting = Literal["fixed", "per_step", "hidden"]
# the summary's and the reports' word for who pays engine.scheduling_overhead_ms
SCHEDULING_OVERHEAD: dict[str, str] = {"fixed": "none", "per_step": "per-step", "hidden": "hidden"}


@dataclass(frozen=True)
class NoParams:
    """A policy without parameters."""


class Policy:
    """Base class of verification policies. Subclasses override `decide`.

    Class attributes describe the policy to the engine and to reports:
    `lossless` (False for the synchronous global search), `oracle` (sees the
    truth), `length_setting` (`fixed` | `per_step` | `hidden`: how its
    lengths are set, and so who pays the scheduling overhead),
    `fits_budget` (chooses within the step's token capacity itself),
    `drafts` (False for no speculation). Policies that maximise
    Θ = expected tokens · SPS(B) return their ThetaChoice in the Decision; a policy
    that knew before drafting how many drafts each request can be verified
    returns (the widest, all of them) as the Decision's `draft_width`, and
    the engine charges drafting for those.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams
    lossless: ClassVar[bool] = True
    oracle: ClassVar[bool] = False
    length_setting: ClassVar[LengthSetting] = "per_step"
    fits_budget: ClassVar[bool] = False
    drafts: ClassVar[bool] = True

    def __init__(self, params: Any, block_size: int) -> None:
        self.params = params
        self.block_size = block_size

    def planned_length(self, batch_requests: int) -> int | None:
        """The length every request verifies in a step of R requests, if known before drafting."""
        return None

    def decide(self, view: StepView) -> Decision:
        raise NotImplementedError

    def observe(self, outcome: StepOutcome) -> None:
        """Learn from the step's outcome; most policies need nothing."""

    @property
    def learns(self) -> bool:
        """Whether `observe` does anything (the engine skips building outcomes otherwise)."""
        return type(self).observe is not Policy.observe

    def drafting_mask(self, request_ids: np.ndarray) -> np.ndarray | None:
        """Which requests draft this step (None: all of them). Called before drafting."""
        return None

    @classmethod
    def pays_scheduling(cls) -> bool:
        return cls.length_setting == "per_step"

    @classmethod
    def scheduling_overhead(cls) -> str:
        """Who pays the scheduling overhead, in the summary's words: none, per-step or hidden."""
        return SCHEDULING_OVERHEAD[cls.length_setting]

    @classmethod
    def label(cls) -> str:
        """The name reports show, with the lossy / oracle warning where it applies."""
        if cls.oracle:
            return f"{cls.name} (oracle: upper bound, not realisable)"
        if not cls.lossless:
            return f"{cls.name} (lossy: changes the output distribution)"
        return cls.name


class FixedLengthPolicy(Policy):
    """A policy whose lengths are set before drafting: no decision per step, no overhead."""

    length_setting: ClassVar[LengthSetting] = "fixed"

    def planned_length(self, batch_requests: int) -> int | None:
        raise NotImplementedError

    def decide(self, view: StepView) -> Decision:
        """The planned length for every request (the engine asks `planned_length` before drafting)."""
        return Decision.uniform(self.planned_length(view.batch_requests) or 0)


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
    extra = (lengths > cap).nonzero()[0][:spare]
    capped[extra] += 1
    return capped
