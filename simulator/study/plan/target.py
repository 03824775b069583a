"""What a plan must meet: its target, the `what` beside its scenario (the source) and its run options.

    target = Target("rate_per_s", 40.0, (Bound("tps_user_p10", ">=", 80.0),), statistic="p10", seeds=3)
    options = RunOptions(workers=4, out_dir="out/plan")      (specplan.simulator.study.options)
    plan_capacity("poisson.yaml", target, options)         (specplan.simulator.study.plan.planner)
    plan_search("search.yaml", target, options)            (specplan.simulator.study.plan.search)

`Target`: the demand, one load axis and its value (`rate_per_s`, `rate_scale`,
`users` or `lanes`: the scenario's own workload scaled the way a sweep's load
axis scales it, specplan.simulator.scenario.scaling); the SLA, one form only: its
bounds on summary keys (`Bound`, specplan.simulator.scenario.study), none
meaning the scenario's own `sla.bounds` (`resolved`); a bound may be given
as text (`"tps_user_p10>=80"`, parsed as `--sla` parses it); the tokens/s/user
statistic a table shows; the seeds per probe; the price of a GPU-hour (a
capacity plan's cost column; a search prices each GPU type itself).

Where and how the probes run is `RunOptions`, shared by every study. A
target does not know the command's flags: a refusal names a field by
`names` (the field's own name unless the caller, the `specplan` command,
maps it to its flag). A bound on an agent session's job-level figures
(`session_wall_p90_s<=900`, `session_output_tokens_per_s_mean>=20`) needs a
session workload (`check_session_bounds`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario.study import (
    COUNTED_AXES,
    LOAD_AXES,
    SESSION_KEYS,
    Bound,
    parse_bound,
    tps_column,
)
from specplan.simulator.study.options import Source
from specplan.simulator.study.points import read_source, validated

DEFAULT_SEEDS = 3


@dataclass(frozen=True)
class Target:
    """The demand (`axis` at `value`), the SLA (`bounds`, all together), seeds per probe, the GPU price."""

    axis: str
    value: float
    bounds: tuple[Bound, ...] = ()
    statistic: str = "p10"
    seeds: int = DEFAULT_SEEDS
    gpu_hour_usd: float | None = None

    def __post_init__(self) -> None:
        """Bounds given as text (`"tps_user_p10>=80"`, one or several) are parsed as `--sla` parses them."""
        given = (self.bounds,) if isinstance(self.bounds, (str, Bound)) else tuple(self.bounds)
        object.__setattr__(self, "bounds", tuple(as_bound(b) for b in given))

    def check(self, names: Mapping[str, str]) -> None:
        """One line naming the first bad field (by `names`), or nothing."""
        tps_column(self.statistic)
        if self.axis not in LOAD_AXES:
            raise SpecplanError(f"the demand's load axis must be one of {', '.join(LOAD_AXES)}, got {self.axis!r}")
        for name, value in ((self.axis, self.value), ("gpu_hour_usd", self.gpu_hour_usd)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise SpecplanError(f"{names.get(name, name)} must be a positive number, got {value:g}")
        if self.axis in COUNTED_AXES and self.value != int(self.value):
            raise SpecplanError(f"{names.get(self.axis, self.axis)} must be a whole number, got {self.value:g}")
        if not isinstance(self.seeds, int) or self.seeds < 1:
            raise SpecplanError(f"{names.get('seeds', 'seeds')} must be an integer >= 1, got {self.seeds}")
        check_bounds(self.bounds, names)

    def demand_text(self) -> str:
        return {"rate_per_s": f"demand {self.value:g} req/s",
                "rate_scale": f"demand the workload's rate x {self.value:g}",
                "users": f"demand {self.value:g} closed-loop users",
                "lanes": f"demand {self.value:g} agent session lanes"}[self.axis]

    def sla_text(self) -> str:
        return "SLA " + ", ".join(b.text() for b in self.bounds)

    def resolved(self, source: Source, overrides: tuple[str, ...] | list[str] = ()) -> Target:
        """This target with the scenario's own sla.bounds when it gives none."""
        if self.bounds:
            return self
        raw, folder, name = read_source(source, overrides)
        sla = validated(raw, folder, name, "").sla
        return dataclasses.replace(self, bounds=sla.parsed_bounds if sla is not None else ())


def as_bound(bound: Bound | str) -> Bound:
    if isinstance(bound, Bound):
        return bound
    if isinstance(bound, str):
        return parse_bound(bound, "Target bounds")
    raise SpecplanError(f"Target bounds: each is a Bound or a 'KEY<=VALUE' string, got {bound!r}")


def check_bounds(bounds: tuple[Bound, ...], names: Mapping[str, str]) -> None:
    if not bounds:
        raise SpecplanError(f"give an SLA: {names.get('bounds', 'bounds (Bound: KEY<=VALUE / KEY>=VALUE)')}, "
                            "or a scenario sla.bounds list")
    keys = [b.key for b in bounds]
    if len(set(keys)) != len(keys):
        raise SpecplanError(f"the SLA bounds {next(k for k in keys if keys.count(k) > 1)} twice")


def check_session_bounds(bounds: tuple[Bound, ...], arrivals: object, name: str) -> None:
    """Refuse a bound on a session's job-level figures (session_wall_*, session_output_tokens_per_s_*) for a
    workload that plays no sessions, where no run has them."""
    kind = getattr(arrivals, "KIND", "")
    misplaced = [b.text() for b in bounds if b.key in SESSION_KEYS]
    if misplaced and kind != "sessions":
        raise SpecplanError(f"{name}: the SLA bound {misplaced[0]} reads agent sessions' job-level figures, but "
                            f"workload.arrivals is '{kind}', not sessions")
