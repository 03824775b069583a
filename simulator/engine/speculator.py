"""The drafts of a step and what the target accepts of them: the speculator, chosen once per engine.

Place in the data flow: the decode core (specplan.simulator.engine.core.decode)
asks its speculator, per step, for the rows it runs: the verification lengths
ℓ, the drafts the target accepts, the drafting requests and the step's price
quote (`Speculation`). Which speculator runs is decided when the core is
assembled (`speculator`), never in the step:

    NoDrafts      no speculation (policy none, a block of 0): the step's quote, nothing drafted
    FixedLengths  a fixed-length policy (mtp-1, static, length-schedule): ℓ is the planned length,
                  known before drafting; the outcomes are drawn for that many positions from each
                  request's acceptance with the token noise averaged out (a draft is accepted when a
                  uniform draw falls below it: `outcomes` stream): the same outcome distribution
                  as drawing logits, for fewer draws
    DraftReader   a policy that reads the drafts: acceptance logits x = row + token noise
                  (`acceptance` stream), a draft accepted when a logistic draw falls below x
                  (`outcomes`), the confidence head reading x (`confidence`); the policy decides
                  from a `StepView` (never the truth, except the oracle's view)

A sample of the steps' drafts goes to the run's draft record
(specplan.simulator.engine.records.draft_record), through the recorders' sampler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from specplan.policies.base import Decision, OracleView, Policy, StepView
from specplan.simulator.core.streams import stream
from specplan.simulator.drafters.drafter import Drafter
from specplan.simulator.engine.batch import Batch, Rows, ones
from specplan.simulator.engine.budget import TokenBudget
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.price.pricer import QuoteBook
from specplan.simulator.engine.price.quote import StepQuote
from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.engine.records.recorders import DraftSampler

# A step's drafts as settled: (lengths ℓ per row or one for all, accepted drafts per row, Σℓ, drafting requests,
# the step's quote, the policy's Decision or None when nothing was decided this step). A plain tuple: the core
# unpacks it at once, and it is made every step.
Speculation = tuple[np.ndarray | int, np.ndarray, int, int, StepQuote, Decision | None]


class StepInputs(NamedTuple):
    """What a speculator reads of the step being scheduled (besides the batch and its rows)."""

    reserved: int            # prompt tokens already in the step (chunked prefill)
    room: int                # tokens the step may hold for a policy that chooses within it (max_step_tokens)
    context: int             # KV context the price is read at
    load: StepLoad | None    # the step per attention rank, when the price reads it
    now: float
    step_index: int


class Speculator(Protocol):
    reserve: int   # tokens per request the budget reserves before drafting, beyond the anchor

    def planned(self, r: int) -> int | None:
        """The length every row verifies, when it is known before drafting (None: decided per step)."""
        ...

    def longest(self, planned: int | None) -> int:
        """The longest verify block a request may take this step (1 + ℓ at most)."""
        ...

    def row_acceptance(self, domains: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Requests' acceptance rows, fixed at arrival (`Batch.acceptance`), from their domains and offsets
        (elementwise: a row reads its own request alone; `AcceptanceRows` makes them in blocks)."""
        ...

    def speculate(self, batch: Batch, rows: Rows, planned: int | None, step: StepInputs) -> Speculation: ...


class AcceptanceRows:
    """Each request's acceptance row (`Speculator.row_acceptance` of its domain and offset), made for every
    request the log has registered since the last block when an admitted request's row is not made yet: the
    same numbers as one call per admission (the rule is elementwise), for one call per block of arrivals.

    A request's domain and offset are written when it registers (specplan.simulator.engine.intake.register),
    before any core can admit it, and never change. One per log, shared by the cores that admit its requests
    (`EngineParts.core`); `of(log, rids)` is what `DecodeCore.add_rows` reads.
    """

    def __init__(self, rule: Callable[[np.ndarray, np.ndarray], np.ndarray], width: int) -> None:
        self.rule = rule
        self.rows = np.zeros((256, width))
        self.made = 0  # rows 0 .. made − 1 are made

    def of(self, log: RequestLog, rids: np.ndarray) -> np.ndarray:
        """The rows of requests `rids` (k,) as a (k, γ) array."""
        if rids[rids.argmax()] >= self.made:
            self.make(log)
        return self.rows[rids]

    def make(self, log: RequestLog) -> None:
        """Rows for every request registered since the last block."""
        start, stop = self.made, log.size
        if stop > self.rows.shape[0]:  # storage doubles
            rows = np.zeros((max(stop, 2 * self.rows.shape[0]), self.rows.shape[1]))
            rows[:start] = self.rows[:start]
            self.rows = rows
        self.rows[start:stop] = self.rule(log["domain"][start:stop], log["acceptance_offset"][start:stop])
        self.made = stop


class Drawn:
    """A stream's draws made `BLOCK` at a time, handed out r × ℓ per step in the stream's order: the same
    numbers as one call per step (numpy fills an array one draw after another, each as a lone call makes it:
    uniform, normal σ·z, logistic), for one numpy call per block of steps. `draw(n)` makes n draws; the stream
    serves nothing else (one `Drawn` per stream, and only one of a stream's kinds of draw is ever taken)."""

    BLOCK = 1 << 14

    def __init__(self, draw: Callable[[int], np.ndarray]) -> None:
        self.draw = draw
        self.drawn = np.zeros(0)
        self.used = 0

    def take(self, rows: int, length: int) -> np.ndarray:
        """The next rows × length draws."""
        start, stop = self.used, self.used + rows * length
        if stop > self.drawn.size:  # the block's unused draws, then the next block
            self.drawn = np.concatenate([self.drawn[start:], self.draw(max(self.BLOCK, rows * length))])
            start, stop = 0, rows * length
        self.used = stop
        return self.drawn[start:stop].reshape(rows, length)


class Outcomes:
    """Accepted drafts per row: the first position whose draw is not below its bound (`outcomes` stream).

    Outcomes go into a buffer with one extra, always-rejected column, so a
    single argmin gives the block length for a fully accepted block. A
    fixed-length policy's uniform draws come a block at a time (`Drawn`);
    a policy that reads the drafts draws logistic ones per step (their
    cost is the draws themselves: blocks would save nothing).
    """

    def __init__(self, seed: int, index: int, max_batch_requests: int) -> None:
        self.rng = stream(seed, "outcomes", index)
        self.max_batch_requests = max_batch_requests
        self.buffers: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.uniform = Drawn(self.rng.random).take  # (rows, length) → the stream's next uniform draws

    def first_rejected(self, draws: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        views = self.buffers.get(draws.shape)
        if views is None:  # a buffer per (rows, length), its views made once: a step only writes and reads them
            r, length = draws.shape
            buffer = np.zeros((r, length + 1), bool)
            views = self.buffers[draws.shape] = (buffer, buffer[:, :length])
        ok, drawn = views
        drawn[...] = draws < bounds  # a contiguous comparison, then one strided copy: faster than `out=`
        return ok.argmin(axis=1)


class NoDrafts:
    """No speculation: every step's quote with nothing drafted (the module docstring)."""

    reserve = 0

    def __init__(self, drafter: Drafter, quotes: QuoteBook) -> None:
        self.row_acceptance = drafter.row_probabilities
        self.quotes = quotes

    def planned(self, r: int) -> int | None:
        return None

    def longest(self, planned: int | None) -> int:
        return 1

    def speculate(self, batch: Batch, rows: Rows, planned: int | None, step: StepInputs) -> Speculation:
        r = rows.count
        return (0, np.zeros(r, dtype=np.int64), 0, 0,
                self.quotes.quote(batch.n, r, 0, step.context, 0, step.load, step.reserved), None)


class FixedLengths(NoDrafts):
    """A fixed-length policy: ℓ planned before drafting, outcomes drawn for ℓ positions (the module docstring)."""

    def __init__(self, policy: Policy, drafter: Drafter, quotes: QuoteBook, outcomes: Outcomes,
                 sampler: DraftSampler) -> None:
        super().__init__(drafter, quotes)
        self.policy, self.block_size, self.outcomes, self.sampler = policy, drafter.block_size, outcomes, sampler
        self.reserve = 0 if policy.fits_budget else drafter.block_size

    def planned(self, r: int) -> int | None:
        return self.policy.planned_length(r)

    def longest(self, planned: int | None) -> int:
        return 1 + (self.block_size if planned is None else planned)

    def speculate(self, batch: Batch, rows: Rows, planned: int | None, step: StepInputs) -> Speculation:
        r = rows.count
        if r == 0 or not planned:
            return super().speculate(batch, rows, planned, step)
        quote = self.quotes.quote(batch.n, r, r, step.context, planned, step.load, step.reserved)
        accepted = self.draw(batch, rows, planned)
        if self.sampler.due(step.step_index):
            self.sampler.outcomes(rows.of(batch.rids), planned, accepted)
        return planned, accepted, planned * r, r, quote, None

    def draw(self, batch: Batch, rows: Rows, planned: int) -> np.ndarray:
        """Drafts accepted out of `planned` per row: uniform draws below each request's acceptance."""
        bounds = batch.acceptance if planned == self.block_size else batch.acceptance[:, :planned]
        return self.outcomes.first_rejected(self.outcomes.uniform(rows.count, planned), rows.of(bounds))


class DraftReader(FixedLengths):
    """A policy that reads the drafts: logits, outcomes, confidences, its Decision (the module docstring)."""

    def __init__(self, policy: Policy, drafter: Drafter, quotes: QuoteBook, outcomes: Outcomes,
                 sampler: DraftSampler, budget: TokenBudget, seed: int, index: int, max_batch_requests: int) -> None:
        super().__init__(policy, drafter, quotes, outcomes, sampler)
        assert drafter.acceptance is not None  # a speculating drafter has an acceptance model
        self.acceptance, self.confidence, self.budget = drafter.acceptance, drafter.confidence, budget
        self.row_acceptance = drafter.row_logits
        self.rng_p = stream(seed, "acceptance", index)
        # the token noise (`acceptance` stream) and the logistic draws (`outcomes`), a block at a time (`Drawn`)
        sigma = self.acceptance.token_sigma
        self.noise = Drawn(lambda n: self.rng_p.normal(0.0, sigma, n)).take if sigma else None
        self.logistic = Drawn(lambda n: outcomes.rng.logistic(size=n)).take
        self.rng_c = stream(seed, "confidence", index)
        self.max_batch_requests = max_batch_requests
        self.drafted_all = np.ones(max_batch_requests, dtype=bool)

    def planned(self, r: int) -> int | None:
        return None

    def speculate(self, batch: Batch, rows: Rows, planned: int | None, step: StepInputs) -> Speculation:
        r = rows.count
        if r == 0:
            return NoDrafts.speculate(self, batch, rows, planned, step)
        x, prefix = self.draw_logits(batch, rows)
        return self.decide(batch, rows, x, prefix, step)

    def draw_logits(self, batch: Batch, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        """A step's drafts: acceptance logits x (R, γ) and the accepted prefixes (logistic draws below x).

        x is the rows plus this step's token noise (`AcceptanceModel.step_logits`: σ · a standard normal per
        entry), the noise taken from the stream's block of draws: the same numbers as one draw per step."""
        rows_x = rows.of(batch.acceptance)
        r, length = rows_x.shape
        x = rows_x if self.noise is None else rows_x + self.noise(r, length)
        return x, self.outcomes.first_rejected(self.logistic(r, length), x)

    def decide(self, batch: Batch, rows: Rows, x: np.ndarray, prefix: np.ndarray, step: StepInputs) -> Speculation:
        """Confidences, the drafting mask, the view, the policy's Decision; ℓ and what it accepts."""
        r, ids = rows.count, rows.of(batch.rids)
        c = self.confidence.observe(x, self.rng_c)
        mask = self.policy.drafting_mask(ids)
        if self.sampler.due(step.step_index):
            self.sampler.drafts(ids, c, prefix, mask)
        c = self.budget.capped(c, batch, rows)
        if mask is None:
            drafted, drafting = self.drafted_all[:r], r
        else:
            drafted = np.asarray(mask, dtype=bool)
            c = np.where(drafted[:, None], c, 0.0)
            prefix = np.where(drafted, prefix, 0)
            drafting = int(np.count_nonzero(drafted))
        quote = self.quotes.quote(batch.n, r, drafting, step.context, self.block_size, step.load, step.reserved)
        view = self.view(c, ids, quote, drafted, drafting, prefix, step)
        decision: Decision = self.policy.decide(view)
        lengths = decision.lengths
        if decision.draft_width is not None:  # the policy drafted fewer positions: drafting is charged for those
            quote = self.quotes.drafted(batch.n, r, drafting, step.context, *decision.draft_width, load=step.load,
                                        prefill_tokens=step.reserved)
        if mask is not None:
            lengths = np.where(drafted, lengths, 0)
        lengths, accepted, verified = self.settle(lengths, prefix, r)
        return lengths, accepted, verified, drafting, quote, decision

    def view(self, c: np.ndarray, ids: np.ndarray, quote: StepQuote, drafted: np.ndarray, drafting: int,
             prefix: np.ndarray, step: StepInputs) -> StepView:
        """The step's view; the oracle's adds the truth (how many drafts each request will have accepted)."""
        # StepView's fields in order (made every step: positional is faster): confidences, request_ids, price,
        # max_step_tokens, reserved_tokens, max_batch_requests, block_size, step_index, now_s, drafted, drafting
        fields = (c, ids, quote, step.room, step.reserved, self.max_batch_requests, self.block_size, step.step_index,
                  step.now, drafted, drafting)
        return OracleView(*fields, accepted_prefix=prefix) if self.policy.oracle else StepView(*fields)

    def settle(self, lengths: np.ndarray | int, prefix: np.ndarray, r: int) -> tuple[np.ndarray | int, np.ndarray, int]:
        """A decision's ℓ in its cheapest form, the accepted drafts cut at ℓ, and Σℓ: the engine's fast paths.

        One ℓ for every row (`Decision.uniform`, or per-row lengths that all
        verify the whole block) stays one int: nothing to sum per step, and
        at ℓ = γ nothing to cut. Otherwise the block's accepted prefixes are
        cut at each row's ℓ.
        """
        if isinstance(lengths, int):
            return lengths, prefix if lengths >= self.block_size else np.minimum(prefix, lengths), lengths * r
        lengths = np.asarray(lengths, dtype=np.int64)
        verified = int(lengths.dot(ones(lengths.size)))  # a third of np.add.reduce's cost on a batch's rows
        if verified == r * self.block_size:  # every row verifies its whole block
            return self.block_size, prefix, verified
        return lengths, np.minimum(prefix, lengths), verified


def speculator(policy: Policy, drafter: Drafter, quotes: QuoteBook, budget: TokenBudget, sampler: DraftSampler,
               seed: int, index: int, max_batch_requests: int) -> Speculator:
    """The engine's speculator for its policy and drafter (the module docstring)."""
    if not policy.drafts or drafter.block_size == 0:
        return NoDrafts(drafter, quotes)
    outcomes = Outcomes(seed, index, max_batch_requests)
    if policy.length_setting == "fixed":
        return FixedLengths(policy, drafter, quotes, outcomes, sampler)
    return DraftReader(policy, drafter, quotes, outcomes, sampler, budget, seed, index, max_batch_requests)
