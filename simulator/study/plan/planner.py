"""Capacity planning: for each variant, the fewest replicas that serve a demand at an SLA.

    target = Target("rate_per_s", 40.0, (Bound("tps_user_p10", ">=", 80.0),), seeds=3)
    plan = plan_capacity("poisson.yaml", target)
    plan = plan_capacity("scenarios/default.yaml", Target("users", 64, bounds), RunOptions(workers=2))
    plan = plan_capacity("mooncake.yaml", Target("rate_scale", 3.0, bounds), RunOptions(out_dir="out/plan"))
    plan.variants[i].replicas, .gpus, .chosen, .one_fewer, .sure(plan.target), .cost_per_hour(price)
    capacity_json(plan)   the JSON contract (specplan.simulator.study.plan.plan_json)

The plan's parts, one module each:

    target.py          what it must meet (demand, SLA bounds, seeds, price)
    probe.py           judging one cluster size against the target (seeds, keep-up, sampled fleets)
    replica_search.py  the fewest replicas: doubling, then bisection, every probe kept
    runs.py            the variants side by side on processes (Ctrl-C, progress)
    plan_json.py       the JSON contract of a capacity plan and of a deployment search
    run.py             the entry points, which write the plan's files (files.py)

The demand is the scenario's own workload at one load, scaled the way a
sweep's load axis scales it (specplan.simulator.scenario.scaling); a load
that does not fit the workload is refused. The variants are the scenario's
`sweep.variants` (or the scenario itself), each planned on its own process
(`options.workers`; the cores the variants leave run a sampled probe's
replicas). With `options.out_dir`, every probe's run (summary, keep-up
verdict, resolved scenario) is stored at once under `out_dir/probes/<key>.json`,
as sweep points are, so a re-run reuses them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.merge import apply_variant, strip_study_blocks
from specplan.simulator.study.launch import Deployment, scenario_launch
from specplan.simulator.study.options import PlanOptions, RunOptions, Source
from specplan.simulator.study.plan.probe_store import ProbeStore
from specplan.simulator.study.plan.replica_search import ReplicaSizing, size_replicas
from specplan.simulator.study.plan.runs import run_sizings
from specplan.simulator.study.plan.target import Target, check_session_bounds
from specplan.simulator.study.points import fits, load_shown, loaded, read_source, validated
from specplan.simulator.study.shadows import check_load, check_sized, check_variants, override_paths
from specplan.traces.lanes import seeds_play
from specplan.traces.resample import seeds_replay
from specplan.traces.spec import SessionArrivals, TraceArrivals


@dataclass
class CapacityPlan:
    """Per variant, the fewest replicas meeting the target (in the scenario's variant order)."""

    target: Target
    variants: list[ReplicaSizing]
    options: RunOptions
    plan_options: PlanOptions = PlanOptions()  # the replica cap and the sampling it ran with
    seeds_replay: str = ""  # on a trace or sessions, what each seed replays of it (what the interval covers)
    files: dict[str, Path] = field(default_factory=dict)  # what the entry point wrote (options.out_dir)
    launch: Deployment | None = None  # the winner's launch facts: the variant meeting the SLA on the fewest GPUs
    launch_label: str = ""            # that variant's label
    notes: tuple[str, ...] = ()  # what loading the variants took from their profiles (Scenario.notes), each once


def size_capacity(source: Source, target: Target, options: RunOptions | None = None,
                  plan_options: PlanOptions | None = None) -> CapacityPlan:
    """Fewest replicas (and GPUs, cost) per variant serving the target's demand at its SLA (the entry point,
    `plan_capacity`, also writes the plan's files).

    The SLA is `target.bounds`, or the scenario's sla.bounds when it gives none.
    """
    options, plan_options = options or RunOptions(), plan_options or PlanOptions()
    target = target.resolved(source, options.overrides)
    target.check(options.names)
    plan_options.check(options.names)
    cores = options.check()
    if options.backend != "local":
        raise SpecplanError(f"{options.names.get('backend', 'backend')} ray runs a deployment search: give the "
                            "scenario a search: block")
    variants, folder, name = variant_mappings(source, target, options)
    replica_workers = max(1, cores // len(variants))  # cores the variants leave run a sampled probe's replicas
    calls = [(size_variant, (raw, label, folder, name, where, target, options, plan_options, replica_workers))
             for label, raw, where in variants]
    found: dict[int, ReplicaSizing] = {}
    run_sizings(calls, options, cores, "plan", "variant plan", found.__setitem__)
    sizings = [found[i] for i in range(len(calls))]
    notes = distinct_notes(validated(raw, folder, name, where) for _label, raw, where in variants)
    plan = CapacityPlan(target, sizings, options, plan_options, seeds_replay_of(source, options), notes=notes)
    winner = fewest_gpus(sizings)
    if winner is not None:
        _, raw, where = variants[winner]
        plan.launch = scenario_launch(cluster_scenario(raw, int(sizings[winner].replicas or 1), folder, name, where))
        plan.launch_label = sizings[winner].label
    return plan


def fewest_gpus(sizings: list[ReplicaSizing]) -> int | None:
    """The index of the variant meeting the SLA on the fewest GPUs (on a tie, the most output tokens/s per GPU,
    then the first); None when none meets it."""
    met = [(sizing.chosen.gpus, -sizing.chosen.throughput_per_gpu, i) for i, sizing in enumerate(sizings)
           if sizing.chosen is not None]
    return min(met)[2] if met else None


def distinct_notes(scenarios: Iterable[Scenario]) -> tuple[str, ...]:
    """Each note of the scenarios once, in order (a plan's variants and probes share their profile's)."""
    return tuple(dict.fromkeys(note for scenario in scenarios for note in scenario.notes))


def seeds_replay_of(source: Source, options: RunOptions) -> str:
    """On a trace, what each seed replays of it (specplan.traces.resample.seeds_replay); on agent sessions, what
    each seed plays (specplan.traces.lanes.seeds_play); "" otherwise, where every seed draws its own arrivals."""
    raw, folder, name = read_source(source, options.overrides)
    arrivals = validated(raw, folder, name, "").workload.arrivals
    if isinstance(arrivals, SessionArrivals):
        return seeds_play(arrivals)
    return seeds_replay(arrivals) if isinstance(arrivals, TraceArrivals) else ""


def size_variant(raw: dict, label: str, folder: Path, source: str, where: str, target: Target,
                 options: RunOptions, plan_options: PlanOptions, replica_workers: int) -> ReplicaSizing:
    """One variant's replica search (runs on a worker process: everything it needs is an argument)."""
    return size_replicas(lambda n: cluster_scenario(raw, n, folder, source, where), target, plan_options, label,
                         ProbeStore(options.probes_dir), replica_workers)


def cluster_scenario(raw: dict, replicas: int, folder: Path, source: str, where: str) -> Scenario:
    """The variant's mapping at `replicas` replicas, validated."""
    sized = copy.deepcopy(raw)
    cluster = sized.setdefault("cluster", {})
    if isinstance(cluster, dict):
        cluster["replicas"] = replicas
    return validated(sized, folder, source, where)


def variant_mappings(source: Source, target: Target,
                     options: RunOptions) -> tuple[list[tuple[str, dict, str]], Path, str]:
    """(label, raw mapping at the demand, where) per variant, the folder and the source name.

    The demand scales each variant's own workload as a sweep's load axis does
    (specplan.simulator.study.points.loaded).
    """
    raw, folder, name = read_source(source, options.overrides)
    base = validated(raw, folder, name, "")
    body = strip_study_blocks(raw)
    variants = list(base.sweep.variants) if base.sweep and base.sweep.variants else [{"label": base.policy.name}]
    names = options.load_names()
    fits(base, target.axis, name, "", names)
    check_session_bounds(target.bounds, base.workload.arrivals, name)
    paths = override_paths(options.overrides)
    check_sized(name, paths)
    studied = bool(base.sweep and base.sweep.variants)
    wheres = [f"sweep.variants[{i}] ({variant['label']})" if studied else "" for i, variant in enumerate(variants)]
    merges = [apply_variant(body, variant) for variant in variants]
    check_variants(name, paths, body, list(zip(wheres, merges, strict=True)) if studied else [])
    out = []
    for variant, merged, where in zip(variants, merges, wheres, strict=True):
        own = validated(merged, folder, name, where)
        demand = loaded(merged, own, target.axis, target.value, name, where, names)
        check_load(name, paths, merged, demand, target.axis, f"{names[target.axis]} {target.value:g}",
                   own.workload.arrivals)
        validated(demand, folder, name, where, load_shown(own, target.axis, names))  # fail fast on a bad variant
        out.append((variant["label"], demand, where))
    return out, folder, name
