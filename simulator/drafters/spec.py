"""Drafter section of a scenario: family, block size, acceptance, confidence, latency.

Frozen dataclasses of the `drafter:` contract (docs/reference/scenario.md). The models
that turn them into numbers live beside them: `acceptance.py`,
`confidence.py`, `latency.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from specplan.hwprofiles import load_profile
from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.schema import Tagged, num
from specplan.simulator.drafters.presets import check_block_size, check_preset

FAMILIES = ("none", "mtp", "eagle3", "dflash", "dspark")


@dataclass(frozen=True)
class AcceptanceSpec:
    """Per-position conditional acceptance: a named preset or explicit curves per domain.

    `domains` is the request mix (sums to 1). Curves are *pooled* figures,
    as papers and engines report them (accepted at position k / proposals
    reaching k, over many requests); `request_sigma` and `token_sigma` spread
    acceptance in logit space per request and per step around them, and
    the pooled figures hold whatever the spread. The defaults are the spread
    at which the modelled confidence head lands in the published ECE and
    ROC-AUC ranges (heads.py): real token-level acceptance is far from a coin
    of one p. Set both to 0 for a homogeneous model.
    """

    preset: str | None = num(None, doc="a published acceptance preset (qwen3-4b, qwen3-8b, qwen3-14b, gemma4-12b, "
                             "deepseek-v3, deepseek-v4-pro, deepseek-v4-pro-nothink, deepseek-v4.1-flash, "
                             "weak-dspark); give it or per_position")
    per_position: dict[str, tuple[float, ...]] | None = num(
        None, doc="your own pooled curves, one per domain: p_k at positions 1, 2, ... (at least block_size of them)",
        unit="probability")
    domains: dict[str, float] = num({"chat": 1.0}, ge=0, le=1, doc="the request mix over math, code and chat (sums "
                                    "to 1); a request's domain sets its curve", unit="share")
    request_sigma: float = num(0.7, ge=0, doc="spread of acceptance between requests, in logit space (the pooled "
                               "figures hold at any spread)", unit="logit")
    token_sigma: float = num(2.0, ge=0, doc="spread of acceptance between steps and positions, in logit space",
                             unit="logit")
    extrapolate: bool = num(False, doc="allow a block_size beyond the preset's fitted range (its tail rule "
                            "continued)")

    def validate(self, path: str) -> None:
        if self.preset is not None and self.per_position is not None:
            raise ScenarioError(path, "give either 'preset' or 'per_position', not both")
        for name in self.domains:
            if name not in DOMAINS:
                raise ScenarioError(f"{path}.domains.{name}", f"unknown domain (valid: {', '.join(DOMAINS)})")
        total = sum(self.domains.values())
        if abs(total - 1.0) > 1e-6:
            raise ScenarioError(f"{path}.domains", f"request mix must sum to 1, got {total:g}")
        if self.per_position is not None:
            self.validate_curves(path)

    def validate_curves(self, path: str) -> None:
        assert self.per_position is not None
        for name, curve in self.per_position.items():
            where = f"{path}.per_position.{name}"
            if name not in DOMAINS:
                raise ScenarioError(where, f"unknown domain (valid: {', '.join(DOMAINS)})")
            if not curve:
                raise ScenarioError(where, "needs at least one acceptance probability")
            for i, p in enumerate(curve):
                if not 0.0 <= p <= 1.0:
                    raise ScenarioError(f"{where}[{i}]", f"probability must be in [0, 1], got {p:g}")
        for name, share in self.domains.items():
            if share > 0 and name not in self.per_position:
                raise ScenarioError(f"{path}.per_position", f"no curve for domain '{name}' of the mix")


@dataclass(frozen=True)
class ConfidenceSpec:
    """The drafter's confidence head: `perfect` (c = p) or a noisy, sharpened `model`.

    For `model`: `overconfidence` sharpens the raw head's logit (1 = none),
    `noise` is its estimation noise in logit space (sets ROC-AUC);
    `calibration: sts` fits Sequential Temperature Scaling on
    `calibration_samples` draft blocks at build time (`heads.py`). The
    defaults land the raw head in the published range (ECE 3–8%, AUC
    0.81–0.91) under realistic acceptance spread. `perfect` ignores them.
    """

    kind: Literal["perfect", "model"] = num("perfect", doc="perfect: c = p exactly; model: a noisy, sharpened "
                                            "head")
    overconfidence: float = num(1.5, gt=0, doc="model: sharpening of the raw head's logit (1 = none)",
                                unit="factor")
    noise: float = num(0.4, ge=0, doc="model: the head's estimation noise (sets its ROC-AUC)", unit="logit")
    calibration: Literal["none", "sts"] = num("none", doc="model: Sequential Temperature Scaling fitted at build "
                                              "time, or none")
    calibration_samples: int = num(20000, ge=100, doc="model with sts: draft blocks the calibration is fitted on",
                                   unit="blocks")


@dataclass(frozen=True)
class FixedLatency:
    """Drafting takes `ms` per engine step whatever the batch."""

    KIND: ClassVar[str] = "fixed"
    ms: float = num(ge=0, doc="drafting time of every engine step, whatever the batch", unit="ms", example=1.2)


@dataclass(frozen=True)
class LayersLatency:
    """Drafting cost derived from the target's step-time profile by layer fraction.

    One drafter forward over N tokens costs
    `(drafter_layers / target_layers + lm_head_fraction) · target.step_ms(N)`;
    `lm_head_fraction` is the drafter's vocabulary projection as a share of a
    target step (Qwen3-8B's full 152k vocabulary is ≈ 0.076 of its weights;
    Eagle3's 32k draft vocabulary ≈ 0.016). DSpark's sequential Markov head
    costs `markov_head_fraction · target.step_ms(R)` per draft position
    (rank-256 W2 over a 152k vocabulary ≈ 0.005 of Qwen3-8B's weights).
    """

    KIND: ClassVar[str] = "layers"
    target_layers: int = num(ge=1, doc="the target's layers", unit="layers", example=32)
    drafter_layers: float = num(1.0, gt=0, doc="the drafter's layers", unit="layers")
    lm_head_fraction: float = num(0.0, ge=0, le=1, doc="the drafter's LM head as a share of a target step",
                                  unit="share of a target step")
    markov_head_fraction: float = num(0.005, ge=0, le=1, doc="DSpark's Markov head per draft position, as a "
                                      "share of a target step at R tokens", unit="share of a target step")


@dataclass(frozen=True)
class ProfileLatency:
    """Drafting cost from a drafter step-time profile (CSV) measured by the harness.

    `path` is the drafter's forward time against tokens in the forward; the
    family sets how many forwards over how many tokens a step takes
    (`latency_models.py`). DSpark's Markov head is priced as in `layers`.
    """

    KIND: ClassVar[str] = "profile"
    path: str = num(path=True, doc="the drafter's forward-time profile: `builtin:NAME` or a CSV path",
                    example="builtin:h200-llama3.1-8b-vllm-drafter-2l")
    markov_head_fraction: float = num(0.005, ge=0, le=1, doc="DSpark's Markov head per draft position, as a "
                                      "share of a target step at R tokens", unit="share of a target step")
    match_target: bool = num(True, doc="refuse a drafter profile whose model, GPU or topology (its header) differs "
                             "from the target profile's; false prices drafting there anyway, and run and check "
                             "print the difference as a warning")

    def validate(self, path: str) -> None:
        try:
            load_profile(self.path)
        except SpecplanError as exc:
            raise ScenarioError(f"{path}.path", str(exc)) from None


Latency = Annotated[FixedLatency | LayersLatency | ProfileLatency, Tagged("kind")]


@dataclass(frozen=True)
class DrafterSpec:
    """The drafter: its family, the block it drafts per step, its acceptance, confidence head and cost."""

    family: Literal["none", "mtp", "eagle3", "dflash", "dspark"] = num(
        "none", doc="the drafter family (sets how drafting is priced and which presets apply)")
    block_size: int = num(0, ge=0, doc="γ: draft tokens proposed per request per step", unit="tokens")
    acceptance: AcceptanceSpec = num(AcceptanceSpec(), doc="per-position acceptance: a preset or your curves, "
                                     "the request mix and its spread")
    confidence: ConfidenceSpec = num(ConfidenceSpec(), doc="the confidence head the policies read")
    latency: Latency = num(FixedLatency(ms=0.0), doc="drafting cost: fixed, derived from the target's layers, or "
                           "a drafter profile")

    def validate(self, path: str) -> None:
        if self.family != "none" and self.block_size < 1:
            raise ScenarioError(f"{path}.block_size", f"a '{self.family}' drafter needs block_size >= 1")
        if self.family != "none" and self.acceptance.preset is None and self.acceptance.per_position is None:
            raise ScenarioError(f"{path}.acceptance", "give a 'preset' or 'per_position' curves")
        if self.family != "none" and self.acceptance.preset is not None:
            check_preset(self.acceptance.preset, self.family, f"{path}.acceptance.preset")
            check_block_size(self.acceptance.preset, self.block_size, self.acceptance.extrapolate,
                             f"{path}.block_size")
        curves = self.acceptance.per_position or {}
        for name, curve in curves.items():
            if len(curve) < self.block_size:
                raise ScenarioError(
                    f"{path}.acceptance.per_position.{name}",
                    f"has {len(curve)} positions, block_size is {self.block_size}",
                )

    @property
    def speculates(self) -> bool:
        return self.family != "none" and self.block_size > 0
