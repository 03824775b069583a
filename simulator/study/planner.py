"""Capacity planning: for each variant, the fewest replicas that serve a demand at an SLA.

    plan = plan_capacity("poisson.yaml", rate_per_s=40, sla_tps=80, statistic="p10", seeds=3)
    plan = plan_capacity("scenarios/default.yaml", None, sla_tps=80, users=64)     # a closed loop
    plan = plan_capacity("mooncake.yaml", None, sla_tps=80, rate_scale=3)          # a trace, 3x its rate
    plan.variants[i].replicas, .gpus, .meets_sla, .cost_per_hour, .chosen, .one_fewer
    plan.to_json()     {"variants": [{"label", "replicas", "gpus", "meets_sla", "tps_user",
                                      "throughput_per_gpu", "cost_per_hour", "seeds",
                                      "tps_user_ci95", "one_fewer", "sure", "sla"}]}

The demand is the scenario's own workload at one load, scaled the way a
sweep's load axis scales it (specplan.simulator.scenario.scaling): a mean
arrival rate `rate_per_s` (poisson, gamma, mmpp, piecewise: the kind, its
burstiness and the lengths kept), a `rate_scale` of the workload's own
rate (also traces), or closed-loop `users`; a load that does not fit the
workload is refused. The variants are the scenario's `sweep.variants` (or
the scenario itself). A cluster of n replicas meets the SLA when, simulated
whole (router included) with `seeds` seeds (the scenario's seed, +1, +2,
...), the mean over seeds of each statistic the SLA bounds meets its bound
(`--sla ttft_p99_s<=2 --sla tps_user_p10>=30 --sla itl_p99_ms<=80`, or the
scenario's `sla.bounds`; `sla_tps` and `ttft_s` are the bounds
tps_user_<statistic> >= sla_tps and ttft_p99_s <= ttft_s), and every seed keeps up
with the demand: its backlog of outstanding requests does not grow over the
second half of the measurement window (`specplan.simulator.study.keepup`).
A run whose horizon is too short to tell a growing backlog from the ramp-up
of an empty cluster, or with too few completed requests, stops the plan
with one line naming the horizon that would settle it (no answer rather
than a wrong one) when it matters: when its SLA statistic passes, or no
request completed at all. A probe whose completed requests already miss the
SLA fails whatever its backlog does. The answer and its one-fewer probe carry a Student-t 95%
interval over seeds on the statistic; `sure` is False when the SLA lies
inside either interval (more seeds or a longer horizon would settle it).

Search: n = 1, 2, 4, ... until the SLA is met, then bisection between the
last failure and the first success; when one replica falls behind serving
a share f < 1/4 of its arrivals, the search jumps from 1 to the largest
power of two at most 1/(2f) (`swamped_growth`). Every probe is a simulation of the
cluster, so the answer n is confirmed by its own run, and n − 1 by a run
that failed (bisection ends with exactly those two neighbours simulated).
A probe of more than `replica_sample` replicas (default 8) whose replicas
are independent (random routing of Poisson arrivals over a duration
horizon, no shared prefill pool) simulates that many of them at λ/n each
and stands them for all n (`specplan.simulator.study.split.simulate_sampled`:
exact in distribution, its cost flat in n; the K run on the cores the
variants leave), so a fleet of hundreds plans in minutes. `sample_any_router`
extends this to the other routers, where a split run stands in for random
routing (what that costs: `benchmarks/replica_split.py`); `replica_sample=0`
simulates every cluster whole. Far below the demand a probe can be so
swamped that no request of its window completes; the keep-up judge still
calls it behind when its engines all queue and emit under half the tokens
asked, or its backlog grows by over half its arrivals
(`specplan.simulator.study.keepup`).
With `out_dir`, every probe's run (summary, keep-up verdict, resolved
scenario) is stored at once under `out_dir/probes/<key>.json`, as sweep
points are, so a re-run reuses them; `specplan.simulator.study.plan_files`
writes the plan's report and CSV beside them.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.progress import Progress
from specplan.simulator.engine.simulation import simulate
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.merge import apply_variant, strip_study_blocks
from specplan.simulator.scenario.study import Bound, tps_column
from specplan.simulator.study.backends import default_workers, map_calls
from specplan.simulator.study.frontier import ci95
from specplan.simulator.study.keepup import FALLS_BEHIND, KEEPS_UP, TOO_SHORT, judge_backlog
from specplan.simulator.study.points import (
    fits,
    loaded,
    normalise,
    point_key,
    read_source,
    remove_partial,
    validated,
)
from specplan.simulator.study.probe_store import ProbeStore
from specplan.simulator.study.split import simulate_sampled

DEFAULT_MAX_REPLICAS = 256
LOAD_FLAGS = {"rate_per_s": "--rate", "rate_scale": "--rate-scale", "users": "--users"}
DEFAULT_SEEDS = 3
DEFAULT_REPLICA_SAMPLE = 8


@dataclass(frozen=True)
class Target:
    """The demand (exactly one of rate_per_s, rate_scale, users) and the SLA a plan must meet.

    The SLA is every bound together: `bounds` (summary keys, `Bound`), plus
    tokens/s/user `statistic` >= `sla_tps` and TTFT p99 <= `ttft_s` when given.
    """

    rate_per_s: float | None
    sla_tps: float | None
    statistic: str = "p10"
    ttft_s: float | None = None
    gpu_hour_usd: float | None = None
    rate_scale: float | None = None
    users: int | None = None
    seeds: int = DEFAULT_SEEDS
    bounds: tuple[Bound, ...] = ()
    replica_sample: int = DEFAULT_REPLICA_SAMPLE  # probes above this many independent replicas sample them
    sample_any_router: bool = False  # sample under every router (an approximation but for random routing)

    def check(self) -> None:
        tps_column(self.statistic)
        given = [flag for name, flag in LOAD_FLAGS.items() if getattr(self, name) is not None]
        if len(given) != 1:
            raise SpecplanError(f"give exactly one demand: {', '.join(LOAD_FLAGS.values())}"
                                + (f" (got {', '.join(given)})" if given else ""))
        if not isinstance(self.seeds, int) or self.seeds < 1:
            raise SpecplanError(f"--seeds must be an integer >= 1, got {self.seeds}")
        if not isinstance(self.replica_sample, int) or self.replica_sample < 0:
            raise SpecplanError(f"--replica-sample must be an integer >= 0, got {self.replica_sample}")
        flags = {**LOAD_FLAGS, "sla_tps": "--sla-tps", "ttft_s": "--ttft-s", "gpu_hour_usd": "--gpu-hour-usd"}
        for name, flag in flags.items():
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise SpecplanError(f"{flag} must be a positive number, got {value:g}")
        if self.users is not None and self.users != int(self.users):
            raise SpecplanError(f"--users must be a whole number, got {self.users:g}")
        if not self.sla_bounds:
            raise SpecplanError("give an SLA: --sla KEY<=VALUE / KEY>=VALUE (or --sla-tps), or a scenario "
                                "sla.bounds list")
        keys = [b.key for b in self.sla_bounds]
        if len(set(keys)) != len(keys):
            twice = next(k for k in keys if keys.count(k) > 1)
            raise SpecplanError(f"the SLA bounds {twice} twice")

    @property
    def sla_bounds(self) -> tuple[Bound, ...]:
        """Every bound of the SLA, the --sla ones first."""
        extra = []
        if self.sla_tps is not None:
            extra.append(Bound(tps_column(self.statistic), ">=", float(self.sla_tps)))
        if self.ttft_s is not None:
            extra.append(Bound("ttft_p99_s", "<=", float(self.ttft_s)))
        return (*self.bounds, *extra)

    @property
    def load(self) -> tuple[str, float]:
        """(load axis, value) of the demand."""
        name = next(name for name in LOAD_FLAGS if getattr(self, name) is not None)
        return name, float(getattr(self, name))

    def demand_text(self) -> str:
        axis, value = self.load
        return {"rate_per_s": f"demand {value:g} req/s", "rate_scale": f"demand the workload's rate x {value:g}",
                "users": f"demand {value:g} closed-loop users"}[axis]

    def sla_text(self) -> str:
        return "SLA " + ", ".join(b.text() for b in self.sla_bounds)


@dataclass(frozen=True)
class Probe:
    """A variant at `replicas`, simulated whole once per seed; figures are means over seeds."""

    replicas: int
    meets_sla: bool
    tps_user: float
    throughput_per_gpu: float
    ttft_p99_s: float
    backlog_growth: float
    gpus: int
    tps_user_ci95: float = math.nan
    keep_up: str = KEEPS_UP
    runs: tuple[dict[str, Any], ...] = ()
    stats: dict[str, tuple[float, float]] = field(default_factory=dict)  # SLA key → (mean, 95% half-width)
    simulated: int = 0  # replicas simulated for all of them (`replicas` when simulated whole)

    @property
    def keeps_up(self) -> bool:
        """Every seed kept up ("too short" counts only where the SLA statistic already failed)."""
        return self.keep_up == KEEPS_UP

    def interval(self) -> tuple[float, float]:
        """The Student-t 95% interval over seeds of the SLA statistic (the mean twice for one seed)."""
        half = self.tps_user_ci95 if math.isfinite(self.tps_user_ci95) else 0.0
        return self.tps_user - half, self.tps_user + half


@dataclass
class VariantPlan:
    """The answer for one variant: fewest replicas meeting the SLA (None if none up to the cap)."""

    label: str
    replicas: int | None
    gpus_per_replica: int
    probes: list[Probe] = field(default_factory=list)

    @property
    def chosen(self) -> Probe | None:
        return next((p for p in self.probes if p.replicas == self.replicas), None)

    @property
    def one_fewer(self) -> Probe | None:
        """The probe at replicas − 1 (simulated and failed), None when the answer is 1 or none."""
        return None if self.replicas is None else next(
            (p for p in self.probes if p.replicas == self.replicas - 1), None)

    def sure(self, target: Target) -> bool:
        """False when a bound of the SLA lies inside the answer's or the one-fewer probe's 95% interval
        of its statistic (a one-fewer probe whose backlog grows fails however fast its requests were)."""
        for probe in (self.chosen, self.one_fewer):
            if probe is None or probe.keep_up == FALLS_BEHIND:
                continue
            for bound in target.sla_bounds:
                mean, half = probe.stats.get(bound.key, (math.nan, math.nan))
                if math.isfinite(half) and mean - half < bound.value < mean + half:
                    return False
        return True

    @property
    def gpus(self) -> int | None:
        """Every GPU of the chosen cluster, a prefill pool's included (the probe's summary counts them)."""
        chosen = self.chosen
        return None if self.replicas is None or chosen is None else chosen.gpus

    def cost_per_hour(self, gpu_hour_usd: float | None) -> float | None:
        return None if gpu_hour_usd is None or self.gpus is None else self.gpus * gpu_hour_usd

    def row(self, target: Target) -> dict[str, Any]:
        """The JSON object of the plan contract (exactly these keys)."""
        probe = self.chosen or (self.probes[-1] if self.probes else None)
        return {
            "label": self.label, "replicas": self.replicas, "gpus": self.gpus,
            "meets_sla": self.replicas is not None,
            "tps_user": None if probe is None else finite(probe.tps_user),
            "throughput_per_gpu": None if probe is None else finite(probe.throughput_per_gpu),
            "cost_per_hour": self.cost_per_hour(target.gpu_hour_usd),
            "seeds": target.seeds,
            "tps_user_ci95": None if probe is None else finite(probe.tps_user_ci95),
            "one_fewer": probe_record(self.one_fewer),
            "sure": self.sure(target),
            "sla": sla_record(probe, target),
        }


def sla_record(probe: Probe | None, target: Target) -> dict[str, Any]:
    """Per bound of the SLA: the bound, the statistic's mean over seeds, its 95% half-width, met."""
    out = {}
    for bound in target.sla_bounds:
        mean, half = (math.nan, math.nan) if probe is None else probe.stats.get(bound.key, (math.nan, math.nan))
        out[bound.key] = {"bound": bound.text(), "value": finite(mean), "ci95": finite(half),
                          "met": bound.holds(mean)}
    return out


def probe_record(probe: Probe | None) -> dict[str, Any] | None:
    """The one-fewer probe as JSON: its size, statistic and interval, its keep-up verdict."""
    if probe is None:
        return None
    return {"replicas": probe.replicas, "gpus": probe.gpus, "tps_user": finite(probe.tps_user),
            "tps_user_ci95": finite(probe.tps_user_ci95), "keep_up": probe.keep_up,
            "backlog_growth": finite(probe.backlog_growth), "replicas_simulated": probe.simulated}


def finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


@dataclass
class CapacityPlan:
    target: Target
    variants: list[VariantPlan]

    def to_json(self) -> dict[str, Any]:
        return {"variants": [v.row(self.target) for v in self.variants]}


def cluster_scenario(raw: dict, replicas: int, folder: Path, source: str, where: str) -> Scenario:
    sized = copy.deepcopy(raw)
    cluster = sized.setdefault("cluster", {})
    if isinstance(cluster, dict):
        cluster["replicas"] = replicas
    return validated(sized, folder, source, where)


def probe(scenario: Scenario, target: Target, label: str = "", probes_dir: Path | None = None,
          store: ProbeStore | None = None, workers: int = 1) -> Probe:
    """Simulate one cluster size once per seed and judge it against the target (a sampled one's
    replicas on `workers` processes)."""
    store = store if store is not None else ProbeStore(probes_dir)
    sample = sampled_replicas(scenario, target)
    runs = tuple(seed_run(dataclasses.replace(scenario, seed=scenario.seed + i), label, store, sample, workers)
                 for i in range(target.seeds))
    stats = {b.key: mean_and_interval(runs, b.key) for b in target.sla_bounds}
    tps, tps_half = mean_and_interval(runs, tps_column(target.statistic))
    ttft = float(pd.Series([r["ttft_p99_s"] for r in runs], dtype=float).mean())
    verdicts = {r["keep_up_verdict"] for r in runs}
    keep_up = next(v for v in (FALLS_BEHIND, TOO_SHORT, KEEPS_UP) if v in verdicts)
    fast_enough = all(b.holds(stats[b.key][0]) for b in target.sla_bounds)
    undecided = [r for r in runs if r["keep_up_verdict"] == TOO_SHORT
                 and (fast_enough or any(r.get(b.key) is None for b in target.sla_bounds))]
    if undecided:
        raise SpecplanError(too_short(scenario, label, undecided[0]))
    meets = fast_enough and keep_up == KEEPS_UP
    growth = max((float(r["keep_up_growth"]) for r in runs if r["keep_up_growth"] is not None), default=math.nan)
    throughput = float(pd.Series([r["throughput_tokens_per_s_per_gpu"] for r in runs], dtype=float).mean())
    return Probe(scenario.cluster.replicas, bool(meets), tps, throughput, ttft, growth, int(runs[0]["gpus"]),
                 tps_half, keep_up, runs, stats, sample or scenario.cluster.replicas)


def mean_and_interval(runs: tuple[dict[str, Any], ...], key: str) -> tuple[float, float]:
    """The mean over seeds of a summary key and its Student-t 95% half-width (NaN for one seed)."""
    values = pd.Series([r.get(key) for r in runs], dtype=float)
    return float(values.mean()), ci95(values)


def sampled_replicas(scenario: Scenario, target: Target) -> int | None:
    """How many replicas a probe of `scenario` simulates for all of them, None to simulate it whole."""
    sample, n = target.replica_sample, scenario.cluster.replicas
    if not sample or n <= sample or scenario.cluster.prefill is not None:
        return None
    exact = scenario.cluster.router == "random" or target.sample_any_router
    independent = scenario.workload.arrivals.KIND == "poisson" and scenario.horizon.duration_s is not None
    return sample if exact and independent else None


def seed_run(scenario: Scenario, label: str, store: ProbeStore, sample: int | None = None,
             workers: int = 1) -> dict[str, Any]:
    """One seed's summary with its keep-up verdict: reused from the store, or simulated and stored
    (whole, or as `sample` of its replicas, under a key that says so)."""
    key = point_key(scenario) if sample is None else hashlib.sha256(
        f"{point_key(scenario)}:sample={sample}".encode()).hexdigest()
    stored = store.get(key)
    if stored is not None and "keep_up_verdict" in stored:
        return stored
    result = (simulate(scenario, itl=True) if sample is None
              else simulate_sampled(scenario, sample, workers=workers, itl=True))
    backlog = judge_backlog(result.requests, scenario.horizon.warmup_s, float(result.summary["simulated_s"]),
                            result.steps)
    summary = normalise({**result.summary, **backlog.fields(), "key": key, "seed": scenario.seed})
    store.put(key, summary, scenario)
    return summary


def too_short(scenario: Scenario, label: str, run: dict[str, Any]) -> str:
    """The one line a plan stops with when a run cannot say whether its cluster keeps up."""
    h = scenario.horizon
    span = f"horizon.duration_s {h.duration_s:g}" if h.duration_s is not None else f"horizon.requests {h.requests}"
    who = f"{label}: " if label else ""
    return (f"{who}{scenario.cluster.replicas} replica(s), seed {run['seed']}: {span} is too short to judge "
            f"whether the cluster keeps up ({run['keep_up_reason']}); raise horizon.duration_s to at least "
            f"{run['keep_up_needed_duration_s']:g} (warm-up {h.warmup_s:g} s)")


def fewest_replicas(meets: Callable[[int], bool], max_replicas: int,
                    grow: Callable[[int], int] = lambda n: 2 * n) -> int | None:
    """Smallest n in 1..max_replicas with meets(n) and not meets(n − 1), by growing (doubling, or
    `grow(n)` > n after a failed n) then bisection."""
    n, last_fail = 1, 0
    while not meets(n):
        if n >= max_replicas:
            return None
        last_fail, n = n, min(max(grow(n), n + 1), max_replicas)
    lo, hi = last_fail, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi  # meets(hi) held, and hi − 1 == lo was simulated and failed (or hi is 1)


def swamped_growth(probes: dict[int, Probe]) -> Callable[[int], int]:
    """The search's next size after a failed n: 2n, or, after one replica fell behind serving a share
    f of its arrivals, the largest power of two at most 1 / (2f) (its saturated throughput, which no
    SLA raises, needs 1/f replicas): the swamped probes between are skipped, the bisection still
    brackets the answer by simulated neighbours."""

    def grow(n: int) -> int:
        first = probes.get(n)
        if n != 1 or first is None or first.keep_up != FALLS_BEHIND:
            return 2 * n
        growths = [r.get("keep_up_growth") for r in first.runs]
        served = 1.0 - min((float(g) for g in growths if g is not None), default=math.nan)  # the best seed
        if not 0.0 < served < 0.25:
            return 2 * n
        return 2 ** math.floor(math.log2(0.5 / served))

    return grow


def plan_variant(raw: dict, label: str, folder: Path, source: str, where: str,
                 target: Target, max_replicas: int, probes_dir: Path | None = None,
                 replica_workers: int = 1) -> VariantPlan:
    """Search one variant's replica count; every probe is kept for the record (a sampled probe's
    replicas on `replica_workers` processes)."""
    probes: dict[int, Probe] = {}
    store = ProbeStore(probes_dir)

    def meets(n: int) -> bool:
        if n not in probes:
            probes[n] = probe(cluster_scenario(raw, n, folder, source, where), target, label, store=store,
                              workers=replica_workers)
        return probes[n].meets_sla

    base = cluster_scenario(raw, 1, folder, source, where)
    replicas = fewest_replicas(meets, max_replicas, swamped_growth(probes))
    return VariantPlan(label, replicas, base.hardware.gpus_per_replica, [probes[n] for n in sorted(probes)])


def variant_mappings(source: str | Path | Scenario | dict, load: tuple[str, float],
                     overrides: tuple[str, ...] | list[str] = ()) -> tuple[list[tuple[str, dict, str]], Path, str]:
    """(label, raw mapping at the demand, where) per variant, the folder and the source name.

    The demand scales each variant's own workload as a sweep's load axis does
    (specplan.simulator.study.points.loaded).
    """
    raw, folder, name = read_source(source, overrides)
    base = validated(raw, folder, name, "")
    body = strip_study_blocks(raw)
    variants = list(base.sweep.variants) if base.sweep and base.sweep.variants else [{"label": base.policy.name}]
    axis, value = load
    fits(base, axis, name, "", LOAD_FLAGS)
    out = []
    for i, variant in enumerate(variants):
        where = f"sweep.variants[{i}] ({variant['label']})" if base.sweep and base.sweep.variants else ""
        merged = apply_variant(body, variant)
        own = validated(merged, folder, name, where)
        out.append((variant["label"], loaded(merged, own, axis, value, name, where, LOAD_FLAGS), where))
    return out, folder, name


def plan_capacity(scenario_or_path: str | Path | Scenario | dict, rate_per_s: float | None,
                  sla_tps: float | None, statistic: str = "p10", ttft_s: float | None = None,
                  gpu_hour_usd: float | None = None, max_replicas: int = DEFAULT_MAX_REPLICAS,
                  workers: int | None = None, progress: bool | None = None,
                  overrides: tuple[str, ...] | list[str] = (), rate_scale: float | None = None,
                  users: int | None = None, seeds: int = DEFAULT_SEEDS, out_dir: str | Path | None = None,
                  bounds: tuple[Bound, ...] = (), replica_sample: int = DEFAULT_REPLICA_SAMPLE,
                  sample_any_router: bool = False) -> CapacityPlan:
    """Fewest replicas (and GPUs, cost) per variant serving the demand at the SLA.

    The demand is exactly one of `rate_per_s`, `rate_scale`, `users` (see the module docstring);
    the SLA is `bounds` with `sla_tps` / `ttft_s` (or, with none given, the scenario's sla.bounds).
    With `out_dir`, every probe run is stored under out_dir/probes/ (and reused by a re-run).
    `replica_sample` / `sample_any_router`: how probes of many replicas are simulated (module docstring).
    """
    if not bounds and sla_tps is None and ttft_s is None:
        bounds = scenario_bounds(scenario_or_path, overrides)
    target = Target(rate_per_s, sla_tps, statistic, ttft_s, gpu_hour_usd, rate_scale, users, seeds, tuple(bounds),
                    replica_sample, sample_any_router)
    target.check()
    if max_replicas < 1:
        raise SpecplanError(f"max-replicas must be >= 1, got {max_replicas}")
    variants, folder, name = variant_mappings(scenario_or_path, target.load, overrides)
    for _label, raw, where in variants:
        cluster_scenario(raw, 1, folder, name, where)  # fail fast on a bad variant
    probes_dir = Path(out_dir) / "probes" if out_dir is not None else None
    if workers is not None and workers < 1:
        raise SpecplanError(f"--workers must be >= 1, got {workers}")
    cores = workers or default_workers()
    replica_workers = max(1, cores // len(variants))  # cores the variants leave run a sampled probe's replicas
    jobs = [(raw, label, folder, name, where, target, max_replicas, probes_dir, replica_workers)
            for label, raw, where in variants]
    workers = min(cores, len(jobs))
    found: dict[int, VariantPlan] = {}
    with Progress(len(jobs), "plan", enabled=progress) as bar:

        def on_result(index: int, get: Callable[[], VariantPlan]) -> None:
            found[index] = get()
            bar.advance()

        kept = (f"every finished probe is stored under {probes_dir}: run the same command again to resume"
                if probes_dir is not None else "nothing is kept (give --out DIR to store probes and resume)")
        map_calls([(plan_variant, job) for job in jobs], on_result, workers, "variant plan", kept,
                  on_killed=lambda running: remove_partial(probes_dir, [""]))
    return CapacityPlan(target, [found[i] for i in range(len(jobs))])


def scenario_bounds(source: str | Path | Scenario | dict, overrides: tuple[str, ...] | list[str]) -> tuple[Bound, ...]:
    """The scenario's own sla.bounds (empty when it has none)."""
    raw, folder, name = read_source(source, overrides)
    sla = validated(raw, folder, name, "").sla
    return sla.parsed_bounds if sla is not None else ()


def plan_table(plan: CapacityPlan) -> str:
    """The terminal table: replicas, GPUs, SLA, cost per hour, savings against the first variant."""
    t = plan.target
    price = t.gpu_hour_usd
    head = (f"{t.demand_text()}; {t.sla_text()}"
            + (f"; GPU at ${price:g}/hour" if price is not None else "")
            + f"; {t.seeds} seed(s) per probe, ± a 95% interval over seeds")
    cols = ("variant", "replicas", "GPUs", f"tok/s/user {t.statistic}", "one fewer", "tok/s/GPU", "$/hour",
            "savings")
    rows = [cols]
    first = plan.variants[0] if plan.variants else None
    for v in plan.variants:
        r = v.row(t)
        shown = v.chosen or (v.probes[-1] if v.probes else None)
        rows.append((v.label, show(r["replicas"]), show(r["gpus"]), with_interval(shown),
                     one_fewer_text(v.one_fewer), show(r["throughput_per_gpu"], "{:,.0f}"),
                     show(r["cost_per_hour"], "{:,.2f}"), savings(v, first)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = [head] + ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                                enumerate(zip(row, widths, strict=True))) for row in rows]
    sampled = sorted({p.simulated for v in plan.variants for p in v.probes if p.simulated < p.replicas})
    if sampled:
        lines.append(f"  probes above {sampled[0]} replicas simulate {sampled[0]} of them at their share of the "
                     "demand (independent replicas: random routing of Poisson arrivals)"
                     + ("; other routers approximated so (--sample-any-router)" if t.sample_any_router else ""))
    lines += [f"  {v.label}: no cluster up to {max(p.replicas for p in v.probes)} replicas meets the SLA"
              for v in plan.variants if v.replicas is None and v.probes]
    lines += [f"  {v.label}: not sure: a bound of the SLA lies inside the 95% interval of {v.replicas} or "
              f"{v.replicas - 1} replica(s); more seeds (--seeds) or a longer horizon would settle it"
              for v in plan.variants if v.replicas is not None and not v.sure(t)]
    return "\n".join(lines)


def with_interval(probe: Probe | None) -> str:
    """'63.1 ± 2.0' (the mean over seeds and its 95% half-width), '63.1' for one seed."""
    if probe is None or not math.isfinite(probe.tps_user):
        return "—"
    half = f" ± {probe.tps_user_ci95:.1f}" if math.isfinite(probe.tps_user_ci95) else ""
    return f"{probe.tps_user:.1f}{half}"


def one_fewer_text(probe: Probe | None) -> str:
    """The failed neighbour: '1: 41.2 ± 3.1' or '1: falls behind' (its backlog grows)."""
    if probe is None:
        return "—"
    if probe.keep_up == FALLS_BEHIND:
        return f"{probe.replicas}: falls behind"
    return f"{probe.replicas}: {with_interval(probe)}"


def show(value: Any, template: str = "{}") -> str:
    return "—" if value is None else template.format(value)


def savings(variant: VariantPlan, first: VariantPlan | None) -> str:
    """GPUs saved against the first variant, as a percentage of its GPUs."""
    if first is None or variant is first or variant.gpus is None or not first.gpus:
        return "—"
    return f"{100 * (first.gpus - variant.gpus) / first.gpus:+.0f}%"
