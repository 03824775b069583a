"""A step's terms: what a step costs besides its forward's kernels, one class per term, each added once.

Place in the data flow: the pricer (specplan.simulator.engine.price.pricer)
builds the engine's terms once at assembly (`step_terms`: each class of
`TERMS`, in order, from the engine's configuration; a term that would add
nothing is left out), hands the verify terms to the forward it chose
(specplan.simulator.engine.price.forwards) and adds the fixed terms to every
quote. Whichever forward ran (token-dense, request-padded or per rank), the
same terms are added after it, in this order:

    verify part, at each B (read at the B the step verifies, after the forward's kernels):
      ModeTerm         what the step's mode adds (step_modes.ModeCharge: the host's launch floor, syncs,
                       the assumed eager surcharge, DeepEP normal mode's share of the MoE block)
      SamplerTerm      engine.sampling_ms_per_token · B
    fixed part, once the batch is known (each into one of the quote's three parts):
      HostTerm         host_overhead_ms + host_overhead_per_request_ms · requests             host
      SpeculationTerm  spec_cycle_ms + spec_step_fraction · a plain step's verify time
                       (B = the decoding requests, spread evenly), when the step drafts          host
      SchedulingTerm   scheduling_overhead_ms, when the policy decides per step and the step
                       decodes                                                                  scheduling
      DraftingTerm     the drafter's forwards at the drafting requests' share of the context   draft

A new engine term is one class here (its `of` reads its key from the
configuration and returns None where the term adds nothing) and its place in
`TERMS`; every forward pays it. A verify term reads only the B, the mode's
charge and the MoE block at the tokens the forward ran (`ForwardRun`), so a
token-dense forward may add it to its whole table once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.step_modes import ModeCharge, apply_charge

DraftMs = Callable[[int, float, int, int | None], float]


class PriceSetup(NamedTuple):
    """What the terms are built from: the engine's configuration, the drafter's price, whether the policy pays
    the scheduling overhead."""

    config: EngineConfig
    draft_ms: DraftMs
    pays_scheduling: bool


class ForwardRun(NamedTuple):
    """What a verify term reads of the forward that ran: the verified B of each column, the step's mode charge,
    and the MoE block at the tokens the forward ran (None where the charge does not read it)."""

    tokens: np.ndarray
    charge: ModeCharge
    moe_ms: np.ndarray | None


class StepFacts(NamedTuple):
    """What a fixed term reads of the step: its requests (all rows, decoding, drafting), their KV context, and
    its drafting (`draft_length` drafts per drafting request; `positions`: all drafts together, when widths
    differ)."""

    batch_requests: int
    decode_requests: int
    drafting: int
    context_tokens: int
    draft_length: int
    positions: int | None


class Parts(Protocol):
    """A quote's fixed parts (ms), which the fixed terms add to, and a plain step's verify time."""

    draft_ms: float
    host_ms: float
    scheduling_ms: float

    def plain_ms(self, requests: int) -> float: ...


class StepTerm:
    """One cost of a step: it adds to the verify time at each B, to the fixed parts, or both (nothing by
    default). `verifies` / `fixes` say which, so a quote calls only the terms that add."""

    verifies = False
    fixes = False

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        """The term for this engine, or None where it adds nothing."""
        raise NotImplementedError

    def verify(self, ms: np.ndarray, run: ForwardRun) -> np.ndarray:
        """The forward's time at each B (an array over B, or rows over B) with this term added."""
        return ms

    def fix(self, quote: Parts, step: StepFacts) -> None:
        """Add this term to the quote's fixed parts."""


class ModeTerm(StepTerm):
    """What the step's mode adds to its kernels (specplan.simulator.engine.step_modes)."""

    verifies = True

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        return cls()

    def verify(self, ms: np.ndarray, run: ForwardRun) -> np.ndarray:
        return ms if run.charge.free else apply_charge(ms, run.charge, run.moe_ms)


class SamplerTerm(StepTerm):
    """The sampler's time per verified token (logits processing, rejection sampling): the worked example of
    CONTRIBUTING's "an engine term"."""

    verifies = True

    def __init__(self, ms_per_token: float) -> None:
        self.ms_per_token = ms_per_token

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        per_token = setup.config.engine.sampling_ms_per_token
        return cls(per_token) if per_token else None

    def verify(self, ms: np.ndarray, run: ForwardRun) -> np.ndarray:
        return ms + self.ms_per_token * run.tokens


class HostTerm(StepTerm):
    """Host time every step pays, and per running request (`engine.host_overhead_ms`, `_per_request_ms`)."""

    fixes = True

    def __init__(self, step_ms: float, per_request_ms: float) -> None:
        self.step_ms, self.per_request_ms = step_ms, per_request_ms

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        engine = setup.config.engine
        return cls(engine.host_overhead_ms, engine.host_overhead_per_request_ms)

    def fix(self, quote: Parts, step: StepFacts) -> None:
        quote.host_ms += self.step_ms + self.per_request_ms * step.batch_requests


class SpeculationTerm(StepTerm):
    """A speculating step's host time (`engine.host`): its cycle, or a share of a plain step's verify time."""

    fixes = True

    def __init__(self, cycle_ms: float, fraction: float) -> None:
        self.cycle_ms, self.fraction = cycle_ms, fraction

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        config = setup.config
        return cls(config.spec_cycle_ms, config.spec_step_fraction) \
            if config.spec_cycle_ms or config.spec_step_fraction else None

    def fix(self, quote: Parts, step: StepFacts) -> None:
        if step.drafting:
            if self.cycle_ms:
                quote.host_ms += self.cycle_ms
            if self.fraction:
                quote.host_ms += self.fraction * quote.plain_ms(step.decode_requests)


class SchedulingTerm(StepTerm):
    """The policy's per-step decision (`engine.scheduling_overhead_ms`), paid where it decides synchronously and
    the step decodes."""

    fixes = True

    def __init__(self, ms: float) -> None:
        self.ms = ms

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        return cls(setup.config.engine.scheduling_overhead_ms) if setup.pays_scheduling else None

    def fix(self, quote: Parts, step: StepFacts) -> None:
        if step.decode_requests:
            quote.scheduling_ms += self.ms


class DraftingTerm(StepTerm):
    """The drafter's forwards (its latency model) at the drafting requests' share of the decoding rows' context."""

    fixes = True

    def __init__(self, draft_ms: DraftMs) -> None:
        self.draft_ms = draft_ms

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        return cls(setup.draft_ms)

    def fix(self, quote: Parts, step: StepFacts) -> None:
        if step.drafting:
            share = step.context_tokens * step.drafting / step.decode_requests
            quote.draft_ms += self.draft_ms(step.drafting, share, step.draft_length, step.positions)


TERMS: tuple[type[StepTerm], ...] = (ModeTerm, SamplerTerm, HostTerm, SpeculationTerm, SchedulingTerm, DraftingTerm)


def step_terms(setup: PriceSetup) -> tuple[StepTerm, ...]:
    """The engine's terms, in `TERMS`'s order, each that adds something."""
    return tuple(term for term in (kind.of(setup) for kind in TERMS) if term is not None)


def add_verify(terms: tuple[StepTerm, ...], ms: np.ndarray, run: ForwardRun) -> np.ndarray:
    """The forward's time with every verify term added, in order."""
    for term in terms:
        ms = term.verify(ms, run)
    return ms
