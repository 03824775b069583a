"""The drafter of a scenario: acceptance model + confidence head + drafting latency.

`build_drafter(spec, streams)` assembles the three models; the replica calls
`draft(...)` once per engine step for the whole batch and `draft_ms(...)`
for the step's drafting time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from simulator.drafters.acceptance import AcceptanceModel, acceptance_model
from simulator.drafters.confidence import PerfectConfidence
from simulator.drafters.heads import model_head
from simulator.drafters.latency import FixedDraftLatency
from simulator.drafters.latency_models import latency_model
from simulator.drafters.spec import DrafterSpec, FixedLatency


class ConfidenceHead(Protocol):
    kind: str

    def observe(self, p: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...


class DraftLatency(Protocol):
    def ms(self, drafting_requests: int, block_size: int) -> float: ...


@dataclass
class Drafter:
    spec: DrafterSpec
    acceptance: AcceptanceModel | None
    confidence: ConfidenceHead
    latency: DraftLatency

    @property
    def block_size(self) -> int:
        return self.spec.block_size if self.spec.speculates else 0

    def draft(
        self, domain_idx: np.ndarray, request_offset: np.ndarray,
        rng_p: np.random.Generator, rng_c: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray]:
        """True acceptance p and confidences c, both (R, γ), for one step of the batch."""
        assert self.acceptance is not None
        p = self.acceptance.sample(domain_idx, request_offset, rng_p)
        return p, self.confidence.observe(p, rng_c)

    def draft_ms(self, drafting_requests: int) -> float:
        return self.latency.ms(drafting_requests, self.block_size)


def build_confidence(spec: DrafterSpec, acceptance: AcceptanceModel | None, seed: Any) -> ConfidenceHead:
    if spec.confidence.kind == "perfect" or acceptance is None:
        return PerfectConfidence()

    return model_head(spec.confidence, acceptance, seed)


def build_latency(spec: DrafterSpec, profile: Any) -> DraftLatency:
    if isinstance(spec.latency, FixedLatency):
        return FixedDraftLatency(spec.latency.ms)

    return latency_model(spec, profile)


def build_drafter(spec: DrafterSpec, profile: Any, calibration_seed: Any) -> Drafter:
    acceptance = acceptance_model(spec) if spec.speculates else None
    return Drafter(
        spec=spec,
        acceptance=acceptance,
        confidence=build_confidence(spec, acceptance, calibration_seed),
        latency=build_latency(spec, profile),
    )
