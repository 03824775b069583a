"""Workload section of a scenario: arrival processes and length distributions.

These frozen dataclasses are the `workload:` contract (DESIGN.md §3); the
generators that turn them into request streams live beside them in
`traces/`. Each arrival or length kind is one dataclass whose `KIND` is the
value of `kind:` in YAML.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from simulator.errors import ScenarioError
from simulator.schema import Tagged, num


@dataclass(frozen=True)
class PoissonArrivals:
    """Open loop: exponential inter-arrival gaps at `rate_per_s`."""

    KIND: ClassVar[str] = "poisson"
    rate_per_s: float = num(gt=0)


@dataclass(frozen=True)
class ClosedLoopArrivals:
    """`users` each send a request, wait for it to finish, think, and send the next."""

    KIND: ClassVar[str] = "closed_loop"
    users: int = num(ge=1)
    think_s: float = num(0.0, ge=0)


@dataclass(frozen=True)
class TraceArrivals:
    """Replay of a recorded request trace (timestamps and lengths from the file)."""

    KIND: ClassVar[str] = "trace"
    path: str = num(path=True)
    format: str = "azure"
    time_scale: float = num(1.0, gt=0)


Arrivals = Annotated[PoissonArrivals | ClosedLoopArrivals | TraceArrivals, Tagged("kind")]


@dataclass(frozen=True)
class FixedLength:
    KIND: ClassVar[str] = "fixed"
    value: int = num(ge=1)


@dataclass(frozen=True)
class LognormalLength:
    """Lognormal with the given median and log-space sigma, rounded, clipped to [min, max]."""

    KIND: ClassVar[str] = "lognormal"
    median: float = num(gt=0)
    sigma: float = num(ge=0)
    max: int = num(1_000_000, ge=1)
    min: int = num(1, ge=1)

    def validate(self, path: str) -> None:
        if self.min > self.max:
            raise ScenarioError(f"{path}.min", f"must be <= max ({self.max}), got {self.min}")


Lengths = Annotated[FixedLength | LognormalLength, Tagged("kind")]


@dataclass(frozen=True)
class WorkloadSpec:
    arrivals: Arrivals
    prompt_tokens: Lengths = FixedLength(value=512)
    output_tokens: Lengths = FixedLength(value=256)

    def validate(self, path: str) -> None:
        if isinstance(self.arrivals, TraceArrivals):
            return
        for key in ("prompt_tokens", "output_tokens"):
            if getattr(self, key) is None:
                raise ScenarioError(f"{path}.{key}", "required key is missing")
