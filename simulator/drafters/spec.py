"""Drafter section of a scenario: family, block size, acceptance, confidence, latency.

Frozen dataclasses of the `drafter:` contract (DESIGN.md §3). The models
that turn them into numbers live beside them: `acceptance.py`,
`confidence.py`, `latency.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

from simulator.errors import ScenarioError
from simulator.schema import Tagged, num

FAMILIES = ("none", "mtp", "eagle3", "dflash", "dspark")
DOMAINS = ("math", "code", "chat")


@dataclass(frozen=True)
class AcceptanceSpec:
    """Per-position conditional acceptance: a named preset or explicit curves per domain.

    `domains` is the request mix (sums to 1); `request_sigma` and
    `token_sigma` spread acceptance in logit space per request and per step.
    """

    preset: str | None = None
    per_position: dict[str, tuple[float, ...]] | None = None
    domains: dict[str, float] = num({"chat": 1.0}, ge=0, le=1)
    request_sigma: float = num(0.0, ge=0)
    token_sigma: float = num(0.0, ge=0)

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
    """The drafter's confidence head: `perfect` (c = p) or a noisy, sharpened `model`."""

    kind: Literal["perfect", "model"] = "perfect"
    overconfidence: float = num(1.0, gt=0)
    noise: float = num(0.0, ge=0)
    calibration: Literal["none", "sts"] = "none"
    calibration_samples: int = num(20000, ge=100)


@dataclass(frozen=True)
class FixedLatency:
    """Drafting takes `ms` per engine step whatever the batch."""

    KIND: ClassVar[str] = "fixed"
    ms: float = num(ge=0)


Latency = Annotated[FixedLatency, Tagged("kind")]


@dataclass(frozen=True)
class DrafterSpec:
    family: Literal["none", "mtp", "eagle3", "dflash", "dspark"] = "none"
    block_size: int = num(0, ge=0)
    acceptance: AcceptanceSpec = field(default_factory=AcceptanceSpec)
    confidence: ConfidenceSpec = field(default_factory=ConfidenceSpec)
    latency: Latency = FixedLatency(ms=0.0)

    def validate(self, path: str) -> None:
        if self.family != "none" and self.block_size < 1:
            raise ScenarioError(f"{path}.block_size", f"a '{self.family}' drafter needs block_size >= 1")
        if self.family != "none" and self.acceptance.preset is None and self.acceptance.per_position is None:
            raise ScenarioError(f"{path}.acceptance", "give a 'preset' or 'per_position' curves")
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
