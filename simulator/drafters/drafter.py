"""The drafter of a scenario: acceptance model + confidence head + drafting latency.

`build_drafter(spec, profile, calibration_seed)` assembles the three
models; the engine's decode core asks it for each admitted request's
acceptance row, and per step for the batch's acceptance logits, the
confidences and the drafting time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.drafters.acceptance import AcceptanceModel, acceptance_model
from specplan.simulator.drafters.confidence import PerfectConfidence
from specplan.simulator.drafters.heads import model_head
from specplan.simulator.drafters.latency import FixedDraftLatency
from specplan.simulator.drafters.latency_models import latency_model
from specplan.simulator.drafters.spec import DrafterSpec, FixedLatency


class ConfidenceHead(Protocol):
    kind: str

    def observe(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...


class DraftLatency(Protocol):
    uses_context: bool

    def ms(self, drafting_requests: int, block_size: int, context_tokens: float = 0.0,
           positions: int | None = None) -> float: ...


@dataclass
class Drafter:
    """What the engine asks of a drafter, per request and per step.

    row_logits(domains, offsets)   at admission: each request's acceptance logits before token noise
    row_probabilities(...)         at admission: its acceptance with the token noise averaged out
                                   (for policies that read no confidences)
    step_logits(rows, rng)         per step: x (R, γ), the true acceptance logits of the step's drafts
    confidences(x, rng)            per step: c (R, γ), what the confidence head reports of them
    draft_ms(drafting, context, length)  per step: the drafting time
    """

    spec: DrafterSpec
    acceptance: AcceptanceModel | None
    confidence: ConfidenceHead
    latency: DraftLatency

    @property
    def block_size(self) -> int:
        return self.spec.block_size if self.spec.speculates else 0

    def row_logits(self, domain_idx: np.ndarray, request_offset: np.ndarray) -> np.ndarray:
        if self.acceptance is None:
            return np.zeros((len(domain_idx), 0))
        return self.acceptance.row_logits(domain_idx, request_offset)

    def row_probabilities(self, domain_idx: np.ndarray, request_offset: np.ndarray) -> np.ndarray:
        if self.acceptance is None:
            return np.zeros((len(domain_idx), 0))
        return self.acceptance.row_probabilities(domain_idx, request_offset)

    def step_logits(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        assert self.acceptance is not None
        return self.acceptance.step_logits(rows, rng)

    def confidences(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.confidence.observe(x, rng)

    def draft_ms(self, drafting_requests: int, context_tokens: float = 0.0, length: int | None = None,
                 positions: int | None = None) -> float:
        """Drafting time of a step with `drafting_requests` whose KV context totals `context_tokens`.

        `length`: drafts per request when fewer than the block are drafted (a fixed-length policy
        sets it before drafting, as engines that take a per-step draft length do); default γ.
        `positions`: the drafts of all drafting requests together when their widths differ
        (`length` is then the widest); default `length` for each.
        """
        return self.latency.ms(drafting_requests, self.block_size if length is None else length, context_tokens,
                               positions)


def build_confidence(spec: DrafterSpec, acceptance: AcceptanceModel | None, seed: Any) -> ConfidenceHead:
    if spec.confidence.kind == "perfect" or acceptance is None:
        return PerfectConfidence()

    return model_head(spec.confidence, acceptance, seed)


def build_latency(spec: DrafterSpec, profile: StepProfile) -> DraftLatency:
    if isinstance(spec.latency, FixedLatency):
        return FixedDraftLatency(spec.latency.ms)

    return latency_model(spec, profile)


def build_drafter(spec: DrafterSpec, profile: StepProfile, calibration_seed: Any) -> Drafter:
    acceptance = acceptance_model(spec) if spec.speculates else None
    return Drafter(
        spec=spec,
        acceptance=acceptance,
        confidence=build_confidence(spec, acceptance, calibration_seed),
        latency=build_latency(spec, profile),
    )
