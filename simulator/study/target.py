"""What a plan must meet, and how it runs: a plan's two inputs beside its scenario.

    target = Target("rate_per_s", 40.0, (Bound("tps_user_p10", ">=", 80.0),), statistic="p10", seeds=3)
    options = RunOptions(workers=4, out_dir="out/plan")
    plan_capacity("poisson.yaml", target, options)         (specplan.simulator.study.planner)
    plan_search("search.yaml", target, options)            (specplan.simulator.study.search_plan)

`Target`: the demand, one load axis and its value (`rate_per_s`, `rate_scale`
or `users`: the scenario's own workload scaled the way a sweep's load axis
scales it, specplan.simulator.scenario.scaling); the SLA, one form only: its
bounds on summary keys (`Bound`, specplan.simulator.scenario.study), none
meaning the scenario's own `sla.bounds` (`resolved`); a bound may be given
as text (`"tps_user_p10>=80"`, parsed as `--sla` parses it); the tokens/s/user
statistic a table shows; the seeds per probe; the price of a GPU-hour (a
capacity plan's cost column; a search prices each GPU type itself).

`RunOptions`: where and how the probes run (the replica cap, worker
processes, sampling of large fleets, the probe store, progress, overrides,
the backend). Neither knows the command's flags: a refusal names a field
by `names` (the field's own name unless the caller, the `specplan`
command, maps it to its flag).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.study import LOAD_AXES, Bound, parse_bound, tps_column
from specplan.simulator.study.backends import BACKENDS, worker_count
from specplan.simulator.study.points import read_source, validated

DEFAULT_SEEDS = 3
DEFAULT_MAX_REPLICAS = 256
DEFAULT_REPLICA_SAMPLE = 8
Source = str | Path | Scenario | dict


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
        if self.axis == "users" and self.value != int(self.value):
            raise SpecplanError(f"{names.get('users', 'users')} must be a whole number, got {self.value:g}")
        if not isinstance(self.seeds, int) or self.seeds < 1:
            raise SpecplanError(f"{names.get('seeds', 'seeds')} must be an integer >= 1, got {self.seeds}")
        check_bounds(self.bounds, names)

    def demand_text(self) -> str:
        return {"rate_per_s": f"demand {self.value:g} req/s",
                "rate_scale": f"demand the workload's rate x {self.value:g}",
                "users": f"demand {self.value:g} closed-loop users"}[self.axis]

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


@dataclass(frozen=True)
class RunOptions:
    """How a plan's probes run (see the module docstring); `names` words the refusals."""

    max_replicas: int = DEFAULT_MAX_REPLICAS
    workers: int | None = None               # processes (None: one per core)
    replica_sample: int = DEFAULT_REPLICA_SAMPLE  # probes above this many independent replicas sample them
    sample_any_router: bool = False          # sample under every router (an approximation but for random routing)
    out_dir: str | Path | None = None        # every probe run stored under out_dir/probes/ (a re-run reuses them)
    progress: bool | None = None
    overrides: tuple[str, ...] = ()
    backend: str = "local"                   # a search's points: local processes or Ray tasks
    address: str | None = None               # an existing Ray cluster
    names: Mapping[str, str] = field(default_factory=dict)  # field → how a refusal names it (default: itself)

    def check(self) -> int:
        """One line naming the first bad option; returns the worker processes to use."""
        names = self.names
        if not isinstance(self.max_replicas, int) or self.max_replicas < 1:
            raise SpecplanError(f"{names.get('max_replicas', 'max_replicas')} must be >= 1, got {self.max_replicas}")
        if not isinstance(self.replica_sample, int) or self.replica_sample < 0:
            raise SpecplanError(f"{names.get('replica_sample', 'replica_sample')} must be an integer >= 0, "
                                f"got {self.replica_sample}")
        if self.backend not in BACKENDS:
            raise SpecplanError(f"{names.get('backend', 'backend')} must be one of {', '.join(BACKENDS)}, "
                                f"got {self.backend!r}")
        return worker_count(self.workers, names.get("workers", "workers"))

    @property
    def probes_dir(self) -> Path | None:
        return Path(self.out_dir) / "probes" if self.out_dir is not None else None

    @property
    def kept(self) -> str:
        """What an interrupted plan keeps, for the one line Ctrl-C prints."""
        if self.probes_dir is None:
            return f"nothing is kept (give {self.names.get('out_dir', 'out_dir')} to store probes and resume)"
        return f"every finished probe is stored under {self.probes_dir}: run the same command again to resume"

    def load_names(self) -> dict[str, str]:
        """How a refusal names each load axis."""
        return {axis: self.names.get(axis, axis) for axis in LOAD_AXES}
