"""How a study runs: `RunOptions`, shared by every product of study/ (sweep, plan, tune, replication), and
`PlanOptions`, what a plan alone takes.

Every entry point takes (source, what, options): the scenario (a path, a
mapping or a Scenario; a folder of cases for the replication), what it is
asked (a sweep block, a plan's target, a tune's ask, a replication's ask)
and the shared options: worker processes, the backend, the results folder
(the entry point writes its own files there, and resumes from them),
progress and overrides. A plan (plan_capacity, plan_search) also takes its
own `PlanOptions`: the replica cap and the sampling of large fleets. A
refusal names a field by `RunOptions.names` (the field's own name unless the
caller, the `specplan` command, maps it to its flag).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.study import LOAD_AXES
from specplan.simulator.study.backends import BACKENDS, worker_count

DEFAULT_MAX_REPLICAS = 256
DEFAULT_REPLICA_SAMPLE = 8
Source = str | Path | Scenario | dict


@dataclass(frozen=True)
class RunOptions:
    """How a study runs, whichever product (see the module docstring); `names` words the refusals."""

    workers: int | None = None               # processes (None: one per core)
    out_dir: str | Path | None = None        # the entry point's files (a plan's probe runs under out_dir/probes/)
    progress: bool | None = None
    overrides: tuple[str, ...] = ()
    backend: str = "local"                   # a search's points: local processes or Ray tasks
    address: str | None = None               # an existing Ray cluster
    names: Mapping[str, str] = field(default_factory=dict)  # field → how a refusal names it (default: itself)

    def check(self) -> int:
        """One line naming the first bad option; returns the worker processes to use."""
        names = self.names
        if self.backend not in BACKENDS:
            raise SpecplanError(f"{names.get('backend', 'backend')} must be one of {', '.join(BACKENDS)}, "
                                f"got {self.backend!r}")
        return worker_count(self.workers, names.get("workers", "workers"))

    @property
    def out_path(self) -> Path | None:
        """The results folder, as a Path (None: keep nothing)."""
        return Path(self.out_dir) if self.out_dir is not None else None

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


@dataclass(frozen=True)
class PlanOptions:
    """What a plan alone takes (plan_capacity, plan_search): how far it looks and how it samples large fleets."""

    max_replicas: int = DEFAULT_MAX_REPLICAS
    replica_sample: int = DEFAULT_REPLICA_SAMPLE  # probes above this many independent replicas sample them
    sample_any_router: bool = False          # sample under every router (an approximation but for random routing)

    def check(self, names: Mapping[str, str]) -> None:
        """One line naming the first bad option (`names`: how a refusal names each field, RunOptions.names)."""
        if not isinstance(self.max_replicas, int) or self.max_replicas < 1:
            raise SpecplanError(f"{names.get('max_replicas', 'max_replicas')} must be >= 1, got {self.max_replicas}")
        if not isinstance(self.replica_sample, int) or self.replica_sample < 0:
            raise SpecplanError(f"{names.get('replica_sample', 'replica_sample')} must be an integer >= 0, "
                                f"got {self.replica_sample}")
