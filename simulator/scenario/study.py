"""The `sweep:` and `sla:` blocks of a scenario: a study over variants, loads and seeds, and its SLA.

    sweep:
      load: {users: [1, 4, 16]}          # closed loop; or {rate_per_s: [...]}, {rate_scale: [...]}
      variants:                          # deep-merged over the base scenario (specplan.simulator.scenario.merge)
        - {label: MTP-1, drafter: {family: mtp, block_size: 1}, policy: {name: mtp-1}}
      seeds: [1, 2, 3]                   # default: the scenario's own seed
    sla: {tps_user: [80, 120], statistic: p50, ttft_s: 2.0}

The load axis scales the workload the scenario wrote (users of a closed
loop; the mean rate of poisson / gamma / mmpp / piecewise arrivals; a
multiple of any open-loop or trace workload's own rate), never replacing
its kind or its lengths (`specplan.simulator.scenario.scaling`).
Only the structure is checked here; each variant is validated as a whole
scenario when the sweep expands its points (`specplan.simulator.study.points.plan_sweep`).
These dataclasses never import the scenario module (the scenario imports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.schema import num

STATISTICS = ("p10", "p50", "p90", "mean")
LOAD_AXES = ("users", "rate_per_s", "rate_scale")  # the axes of specplan.simulator.scenario.scaling


@dataclass(frozen=True)
class LoadSpec:
    """The load axis of a sweep: closed-loop users, a mean arrival rate, or a scale of the workload's rate."""

    users: tuple[int, ...] | None = num(None, ge=1)
    rate_per_s: tuple[float, ...] | None = num(None, gt=0)
    rate_scale: tuple[float, ...] | None = num(None, gt=0)

    def validate(self, path: str) -> None:
        given = [k for k in LOAD_AXES if getattr(self, k) is not None]
        if len(given) != 1:
            raise ScenarioError(path, f"give exactly one of {', '.join(repr(k) for k in LOAD_AXES)}")
        if not getattr(self, given[0]):
            raise ScenarioError(f"{path}.{given[0]}", "needs at least one value")

    @property
    def kind(self) -> str:
        return next(k for k in LOAD_AXES if getattr(self, k) is not None)

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(getattr(self, self.kind) or ())


@dataclass(frozen=True)
class SweepSpec:
    """Variants × loads × seeds; each variant is a partial scenario with a `label`."""

    load: LoadSpec | None = None
    variants: tuple[dict[str, Any], ...] = ()
    seeds: tuple[int, ...] | None = num(None, ge=0)

    def validate(self, path: str) -> None:
        seen: set[str] = set()
        for i, variant in enumerate(self.variants):
            label = variant.get("label")
            if not isinstance(label, str) or not label.strip():
                raise ScenarioError(f"{path}.variants[{i}].label", "every variant needs a text label")
            if label in seen:
                raise ScenarioError(f"{path}.variants[{i}].label", f"duplicate label '{label}'")
            seen.add(label)
        if self.seeds is not None and not self.seeds:
            raise ScenarioError(f"{path}.seeds", "needs at least one seed")
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ScenarioError(f"{path}.seeds", "seeds must be distinct")


@dataclass(frozen=True)
class SlaSpec:
    """Service-level targets: tokens/s/user thresholds on a statistic, optional TTFT p99 bound."""

    tps_user: tuple[float, ...] = num((), gt=0)
    statistic: Literal["p10", "p50", "p90", "mean"] = "p50"
    ttft_s: float | None = num(None, gt=0)

    @property
    def column(self) -> str:
        """The summary column the SLA reads: tps_user_p10 / _p50 / _p90 / _mean."""
        return tps_column(self.statistic)


def tps_column(statistic: str) -> str:
    if statistic not in STATISTICS:
        raise SpecplanError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    return f"tps_user_{statistic}"
