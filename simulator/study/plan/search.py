"""A deployment search: for every point of the scenario's `search:` space, the fewest GPUs meeting the SLA.

    plan = plan_search("azure-search.yaml", target, RunOptions(backend="local", out_dir="out/search"))
    plan.deployments[i].sizing.replicas / .gpus, plan.ranked(), plan.winner
    deployment_rows(plan), search_json(plan)   plan.csv and plan.json (specplan.simulator.study.plan.plan_json)

The space (`specplan.simulator.scenario.search`) expands into points: a
hardware option (GPU type at a parallelism, a per-GPU price) × a serving
mode (aggregated, or disaggregated at a prefill:decode ratio) × a drafter /
policy variant (× block size). Each point is sized exactly as `specplan
plan` sizes a variant (`specplan.simulator.study.plan.replica_search`): the demand is
the scenario's own workload at the target's load (a trace's rate scaled by
`rate_scale`, its burstiness kept), n decode replicas (and, disaggregated,
ceil(ratio · n) prefill replicas) are simulated whole with every seed, n is
found by doubling then bisection, the answer confirmed by its own run and
n − 1 by a run that failed. Every GPU of both pools counts.

Ranking: points that meet the SLA first, cheapest first ($/hour from the
hardware option's `gpu_hour_usd`, or GPUs without prices), ties by $ per
million output tokens ($/hour ÷ the simulated output tokens/s at the
answer); then the points that meet it nowhere up to the cap.

Where probes run (specplan.simulator.study.plan.runs): in this process, on a
local process pool (one point per worker), or as Ray tasks (`options.backend
"ray"`, one point per task, `options.address` for an existing cluster). Every
probe run is stored by its point key under out_dir/probes/
(`specplan.simulator.study.plan.probe_store`), so a re-run on either backend reuses
what any finished, and the answer does not depend on where it ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.inline import InlineProfile
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.merge import strip_study_blocks
from specplan.simulator.scenario.search import (
    SearchPoint,
    search_notes,
    search_points,
    usd_per_hour,
    usd_per_million_tokens,
)
from specplan.simulator.study.launch import Deployment, launch_config
from specplan.simulator.study.options import PlanOptions, RunOptions, Source
from specplan.simulator.study.plan.planner import distinct_notes, seeds_replay_of
from specplan.simulator.study.plan.probe import Probe
from specplan.simulator.study.plan.probe_store import ProbeStore, stored_summaries, write_fresh
from specplan.simulator.study.plan.replica_search import ReplicaSizing, size_replicas
from specplan.simulator.study.plan.runs import run_sizings
from specplan.simulator.study.plan.target import Target, check_session_bounds
from specplan.simulator.study.points import fits, loaded, read_source, validated
from specplan.simulator.study.shadows import check_sized, check_variants, override_paths


@dataclass(frozen=True)
class PointInfo:
    """What a search point is, as plain data (a SearchPoint's builder does not pickle)."""

    index: int
    label: str
    hardware: str
    profile: str
    mode: str
    prefill_per_decode: float | None
    variant: str
    block_size: int | None
    gpu_hour_usd: float | None

    @staticmethod
    def of(index: int, point: SearchPoint) -> PointInfo:
        profile = point.hardware.profile if isinstance(point.hardware.profile, str) else "inline"
        return PointInfo(index=index, label=point.label, hardware=point.hardware.label, profile=profile,
                         mode=point.serving.KIND, prefill_per_decode=point.prefill_per_decode,
                         variant=point.variant, block_size=point.block_size,
                         gpu_hour_usd=point.hardware.gpu_hour_usd)


@dataclass
class DeploymentSizing:
    """One deployment's answer: its fewest decode replicas (every probe) and the figures the ranking reads."""

    info: PointInfo
    sizing: ReplicaSizing

    @property
    def meets_sla(self) -> bool:
        return self.sizing.replicas is not None

    @property
    def shown(self) -> Probe | None:
        """The answer's probe, or (met nowhere) the largest cluster simulated."""
        return self.sizing.shown

    def output_tokens_per_s(self) -> float:
        shown = self.shown
        if shown is None:
            return math.nan
        return float(pd.Series([r.get("throughput_tokens_per_s") for r in shown.runs], dtype=float).mean())

    def usd_per_hour(self) -> float | None:
        return usd_per_hour(self.sizing.gpus, self.info.gpu_hour_usd) if self.sizing.gpus is not None else None

    def usd_per_million_tokens(self) -> float | None:
        return usd_per_million_tokens(self.usd_per_hour(), self.output_tokens_per_s()) if self.meets_sla else None

    def rank_key(self) -> tuple[float, float, float, int]:
        if not self.meets_sla:
            return (1.0, math.inf, math.inf, self.info.index)
        cost = self.usd_per_hour()
        first = float(cost if cost is not None else self.sizing.gpus or math.inf)
        per_token = self.usd_per_million_tokens()
        return (0.0, first, per_token if per_token is not None else math.inf, self.info.index)


@dataclass
class DeploymentPlan:
    """Every deployment of the search space sized, and what ranks and launches them."""

    target: Target
    deployments: list[DeploymentSizing]
    source: str
    raw: dict[str, Any]
    folder: Path
    options: RunOptions
    plan_options: PlanOptions = PlanOptions()  # the replica cap and the sampling it ran with
    seeds_replay: str = ""  # on a trace, what each seed replays of it (what the interval covers); else ""
    files: dict[str, Path] = field(default_factory=dict)  # what the entry point wrote (options.out_dir)
    notes: tuple[str, ...] = ()  # what the options did not inherit and the points took from their profiles

    def point_scenario(self, p: DeploymentSizing, replicas: int) -> Scenario:
        """A point's scenario at `replicas` decode replicas and the demand (as its probes ran it)."""
        point = searched_points(self.raw, self.folder, self.source)[p.info.index]
        return point_scenario(point, replicas, self.target, self.options, self.folder, self.source)

    def launch(self) -> Deployment | None:
        """The winner's launch configuration (None when no deployment meets the SLA)."""
        winner = self.winner
        if winner is None or winner.sizing.replicas is None:
            return None
        scenario = self.point_scenario(winner, winner.sizing.replicas)
        pool = scenario.cluster.prefill
        prefill = provenance_of(pool.profile) if pool is not None else None
        return launch_config(scenario, provenance_of(scenario.hardware.profile), prefill)

    def ranked(self) -> list[DeploymentSizing]:
        return sorted(self.deployments, key=DeploymentSizing.rank_key)

    @property
    def winner(self) -> DeploymentSizing | None:
        best = self.ranked()[0] if self.deployments else None
        return best if best is not None and best.meets_sla else None


def point_scenario(point: SearchPoint, replicas: int, target: Target, options: RunOptions, folder: Path,
                   name: str) -> Scenario:
    """The point at `replicas` decode replicas, its workload at the target's demand, validated."""
    where = f"search point {point.label!r}"
    raw = point.mapping(replicas)
    own = validated(raw, folder, name, where, point.stated_paths())
    return validated(loaded(raw, own, target.axis, target.value, name, where, options.load_names()),
                     folder, name, where, point.stated_paths())


def size_deployment(raw: dict, folder: Path, name: str, index: int, target: Target, options: RunOptions,
                    plan_options: PlanOptions, probes_dir: Path | None,
                    known: dict[str, dict[str, Any]]) -> tuple[ReplicaSizing, dict[str, Any]]:
    """One point's fewest decode replicas; returns its sizing and the probe records it made (for a driver
    that stores them, when `probes_dir` is None: a Ray task)."""
    point = searched_points(raw, folder, name)[index]
    store = ProbeStore(probes_dir, known)
    sizing = size_replicas(lambda n: point_scenario(point, n, target, options, folder, name), target, plan_options,
                           point.label, store)
    return sizing, store.fresh


def searched_points(raw: dict, folder: Path, name: str) -> list[SearchPoint]:
    """The points of the scenario's search space (one line when it has none)."""
    search = validated(raw, folder, name, "").search
    if search is None:
        raise SpecplanError(f"{name}: a deployment search needs a search: block in the scenario (the space to search)")
    return search_points(raw, search, folder)


def expanded(source: Source, target: Target, options: RunOptions) -> tuple[dict, Path, str, list[SearchPoint]]:
    """The source, its points, each checked at one replica and the demand (one line for a bad one)."""
    raw, folder, name = read_source(source, options.overrides)
    points = searched_points(raw, folder, name)
    base = validated(raw, folder, name, "")
    fits(base, target.axis, name, "", options.load_names())
    check_session_bounds(target.bounds, base.workload.arrivals, name)
    paths = override_paths(options.overrides)
    check_sized(name, paths)
    check_variants(name, paths, strip_study_blocks(raw),
                   [(f"search point {point.label!r}", point.mapping(1)) for point in points])
    for point in points:
        point_scenario(point, 1, target, options, folder, name)
    return raw, folder, name, points


def size_search(source: Source, target: Target, options: RunOptions | None = None,
                plan_options: PlanOptions | None = None) -> DeploymentPlan:
    """Every point of the scenario's search space sized and ranked; see the module docstring (the entry point,
    `plan_search`, also writes the search's files)."""
    options, plan_options = options or RunOptions(), plan_options or PlanOptions()
    target = target.resolved(source, options.overrides)
    target.check(options.names)
    plan_options.check(options.names)
    workers = options.check()
    if target.gpu_hour_usd is not None:
        raise SpecplanError(f"{options.names.get('gpu_hour_usd', 'gpu_hour_usd')}: a search prices each GPU type "
                            "in search.hardware[].gpu_hour_usd")
    raw, folder, name, points = expanded(source, target, options)
    remote = options.backend == "ray"
    probes_dir = options.probes_dir
    known = stored_summaries(probes_dir) if remote else {}
    calls = [(size_deployment, (raw, folder, name, i, target, options, plan_options, None if remote else probes_dir,
                                known))
             for i in range(len(points))]
    found: dict[int, ReplicaSizing] = {}

    def on_result(index: int, value: tuple[ReplicaSizing, dict[str, Any]]) -> None:
        sizing, fresh = value
        write_fresh(probes_dir, fresh)  # a remote point's new probe records are stored here
        found[index] = sizing

    run_sizings(calls, options, workers, "search", "search point", on_result)
    deployments = [DeploymentSizing(PointInfo.of(i, point), found[i]) for i, point in enumerate(points)]
    return DeploymentPlan(target, deployments, name, raw, folder, options, plan_options, seeds_replay_of(source, options),
                          notes=plan_notes(raw, folder, name, points, target, options))


def plan_notes(raw: dict, folder: Path, name: str, points: list[SearchPoint], target: Target,
               options: RunOptions) -> tuple[str, ...]:
    """The search's notes (engine keys an option did not inherit: search_notes), then each point's (what
    loading took from its profile), each once."""
    search = validated(raw, folder, name, "").search
    assert search is not None  # searched_points refused a scenario without one
    scenarios = (point_scenario(point, 1, target, options, folder, name) for point in points)
    return search_notes(raw, search, folder) + distinct_notes(scenarios)


def provenance_of(spec: str | InlineProfile) -> dict[str, str]:
    """The provenance lines of the profile `spec` names (empty for an inline profile without them)."""
    return dict(load_profile(spec).provenance or {})
