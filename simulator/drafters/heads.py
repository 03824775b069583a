"""Modelled confidence heads (`confidence.kind: model`), optionally STS-calibrated.

A real DSpark head estimates the conditional acceptance p_k of each draft
(trained on the soft label `1 − ½‖p_d − p_t‖₁`). The model here sees the
true p through estimation noise and sharpening:

    raw c_{r,k} = σ(overconfidence · (logit p_{r,k} + noise · η_{r,k})),   η ~ N(0, 1),

`noise` blurs which drafts are good (it lowers ROC-AUC), `overconfidence`
> 1 pushes confidences away from ½ (over-confidence: high ECE). With
`calibration: sts` the head is calibrated at build time, the way a
deployment would: a calibration sample of `calibration_samples` draft
blocks is drawn from the scenario's own acceptance model (domains, request
and token spread) with its own random stream, STS temperatures are fitted
on it (`calibration.fit_sts`), and every later `observe` returns
`σ(logit(raw c)/T_k)`. Policies see only `observe`'s output.
`evaluate_head` scores a scenario's head on a held-out sample (what
`specplan calibrate` reports).

Defaults (overconfidence 1.5, noise 0.4) put the raw head in the published
range (ECE 3–8%, ROC-AUC 0.81–0.91 per position) when acceptance varies as
much as real token-level acceptance does (request_sigma 1, token_sigma 2:
ECE 4–8%, AUC 0.85–0.90 on qwen3-8b DSpark, after STS ECE ≈ 0.5–1%); with milder spread AUC is lower because a draft's outcome is then
closer to a coin flip of nearly the same p for every draft, which no head
can discriminate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.core.errors import SpecplanError
from simulator.core.streams import seed_sequence, stream
from simulator.drafters.acceptance import AcceptanceModel, acceptance_model
from simulator.drafters.calibration import (
    CalibrationReport,
    calibration_report,
    clipped_logit,
    fit_sts,
    sigmoid,
)
from simulator.drafters.spec import ConfidenceSpec, DrafterSpec


class ModelHead:
    """A noisy, sharpened estimate of p; `temperatures` (γ,) apply STS when set."""

    kind = "model"

    def __init__(self, overconfidence: float, noise: float, temperatures: np.ndarray | None = None) -> None:
        self.overconfidence = overconfidence
        self.noise = noise
        self.temperatures = temperatures

    def raw_logit(self, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = clipped_logit(p)
        if self.noise > 0:
            x = x + rng.normal(0.0, self.noise, p.shape)
        return self.overconfidence * x

    def raw(self, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Uncalibrated confidences (R, γ)."""
        return sigmoid(self.raw_logit(p, rng))

    def observe(self, p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The confidences policies see (R, γ): raw, then STS-scaled if fitted."""
        x = self.raw_logit(p, rng)
        if self.temperatures is not None:
            x = x / self.temperatures[: p.shape[1]]
        return sigmoid(x)


@dataclass(frozen=True)
class CalibrationSample:
    """Draft blocks drawn from an acceptance model: true p, raw confidences, outcomes (n, γ)."""

    p: np.ndarray
    raw: np.ndarray
    accepted: np.ndarray


def draw_sample(acceptance: AcceptanceModel, head: ModelHead, n: int, rng: np.random.Generator) -> CalibrationSample:
    """n draft blocks: domains by the mix, request and token spread as in the simulation."""
    domain_idx = rng.choice(len(acceptance.domains), size=n, p=acceptance.mix)
    offsets = acceptance.request_offsets(n, rng)
    p = acceptance.sample(domain_idx, offsets, rng)
    raw = head.raw(p, rng)
    accepted = rng.random(p.shape) < p
    return CalibrationSample(p, raw, accepted)


def calibration_rng(seed: Any) -> np.random.Generator:
    """The calibration stream: a SeedSequence (the simulation's 'calibration' child) or an int."""
    return np.random.Generator(np.random.PCG64(seed))


def model_head(spec: ConfidenceSpec, acceptance: AcceptanceModel, seed: Any) -> ModelHead:
    """Build the head a scenario names; STS temperatures are fitted here, once."""
    head = ModelHead(spec.overconfidence, spec.noise)
    if spec.calibration != "sts":
        return head
    return ModelHead(spec.overconfidence, spec.noise, sts_temperatures(spec, acceptance, seed))


_FITTED: dict[tuple, np.ndarray] = {}
FITTED_CACHE_SIZE = 64


def sts_temperatures(spec: ConfidenceSpec, acceptance: AcceptanceModel, seed: Any) -> np.ndarray:
    """STS temperatures for a head on an acceptance model, memoised per (head, model, seed).

    A sweep rebuilds the same drafter for every point; the fit (≈ 0.3 s) is
    a pure function of these inputs, so it runs once per process.
    """
    key = (spec, model_key(acceptance), seed_key(seed))
    if key not in _FITTED:
        head = ModelHead(spec.overconfidence, spec.noise)
        sample = draw_sample(acceptance, head, spec.calibration_samples, calibration_rng(seed))
        if len(_FITTED) >= FITTED_CACHE_SIZE:
            _FITTED.pop(next(iter(_FITTED)))
        _FITTED[key] = fit_sts(sample.raw, sample.accepted)
    return _FITTED[key].copy()


def model_key(acceptance: AcceptanceModel) -> tuple:
    return (acceptance.domains, acceptance.mix.tobytes(), acceptance.base_p.tobytes(),
            acceptance.block_size, acceptance.request_sigma, acceptance.token_sigma)


def seed_key(seed: Any) -> tuple:
    if isinstance(seed, np.random.SeedSequence):
        return ("seq", seed.entropy, tuple(seed.spawn_key))
    return ("int", int(seed))


@dataclass(frozen=True)
class HeadEvaluation:
    """A scenario's head scored on fresh draft blocks: raw vs STS, and whether STS is applied."""

    report: CalibrationReport
    sts_applied: bool
    calibration_samples: int
    eval_samples: int


def evaluate_head(spec: DrafterSpec, seed: int, eval_samples: int = 50_000) -> HeadEvaluation:
    """Fit STS on the simulation's calibration stream, score on an independent sample.

    The head is the scenario's (`perfect` scores as c = p). STS is fitted
    even when the scenario does not apply it, to show what it would do.
    """
    if not spec.speculates:
        raise SpecplanError("drafter.family is 'none': there is no confidence head to calibrate")
    acceptance = acceptance_model(spec)
    conf = spec.confidence
    head = ModelHead(conf.overconfidence, conf.noise) if conf.kind == "model" else ModelHead(1.0, 0.0)
    fit = draw_sample(acceptance, head, conf.calibration_samples, calibration_rng(seed_sequence(seed, "calibration")))
    temperatures = fit_sts(fit.raw, fit.accepted)
    held_out = draw_sample(acceptance, head, eval_samples, stream(seed, "calibration-eval"))
    return HeadEvaluation(
        report=calibration_report(held_out.raw, held_out.accepted, temperatures),
        sts_applied=conf.kind == "model" and conf.calibration == "sts",
        calibration_samples=conf.calibration_samples,
        eval_samples=eval_samples,
    )
