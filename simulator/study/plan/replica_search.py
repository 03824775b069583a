"""The search: the fewest replicas of one variant (or one deployment) that meet the target.

    sizing = size_replicas(scenario_at, target, plan_options, label, store)     a ReplicaSizing

n = 1, 2, 4, ... until a probe meets the SLA (specplan.simulator.study.plan.probe),
then bisection between the last failure and the first success; when one
replica falls behind serving a share f < 1/4 of its arrivals, the search
jumps from 1 to the largest power of two at most 1/(2f) (`swamped_growth`).
It stops before the replica cap when more replicas cannot help
(specplan.simulator.study.plan.reach: a pool held fixed is saturated, or the SLA
statistics stopped moving), and the sizing says why (`unmet`).
Every probe is a simulation of the cluster, so the answer n is confirmed by
its own run, and n − 1 by a run that failed (bisection ends with exactly
those two neighbours simulated). Every probe is kept for the record.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.study import Bound
from specplan.simulator.study.keepup import FALLS_BEHIND
from specplan.simulator.study.options import PlanOptions
from specplan.simulator.study.plan.probe import Probe, probe
from specplan.simulator.study.plan.probe_store import ProbeStore
from specplan.simulator.study.plan.reach import out_of_reach
from specplan.simulator.study.plan.target import Target


@dataclass
class ReplicaSizing:
    """One variant's answer: the fewest replicas meeting the SLA (None if none up to the cap), every probe."""

    label: str
    replicas: int | None
    gpus_per_replica: int
    probes: list[Probe] = field(default_factory=list)
    unmet: str | None = None   # why no size meets the SLA (None when one does)
    prefill_pool: str | None = None  # POOL_FIXED or POOL_GROWS with a prefill pool, else None

    @property
    def chosen(self) -> Probe | None:
        return next((p for p in self.probes if p.replicas == self.replicas), None)

    @property
    def shown(self) -> Probe | None:
        """The answer's probe, or (met nowhere) the largest cluster simulated."""
        return self.chosen or (self.probes[-1] if self.probes else None)

    @property
    def one_fewer(self) -> Probe | None:
        """The probe at replicas − 1 (simulated and failed), None when the answer is 1 or none."""
        return None if self.replicas is None else next(
            (p for p in self.probes if p.replicas == self.replicas - 1), None)

    def sure(self, target: Target) -> bool:
        """False when a bound of the SLA lies inside the answer's or the one-fewer probe's 95% interval
        of its statistic (a one-fewer probe whose backlog grows fails however fast its requests were)."""
        return not self.unsure(target)

    def unsure(self, target: Target) -> list[tuple[Probe, Bound]]:
        """Each (probe, bound) of the answer and its one-fewer probe whose 95% interval holds the bound."""
        out = []
        for candidate in (self.chosen, self.one_fewer):
            if candidate is None or candidate.keep_up == FALLS_BEHIND:
                continue
            for bound in target.bounds:
                mean, half = candidate.stats.get(bound.key, (math.nan, math.nan))
                if math.isfinite(half) and mean - half < bound.value < mean + half:
                    out.append((candidate, bound))
        return out

    def binding(self, target: Target) -> Bound | None:
        """The SLA bound that sets the answer: the one the one-fewer probe misses furthest (when it kept up),
        else the one with the least slack at the probe shown (relative to the bound)."""
        fewer = self.one_fewer
        if fewer is not None and fewer.keep_up != FALLS_BEHIND:
            missed = [b for b in target.bounds if not b.holds(fewer.stats.get(b.key, (math.nan, math.nan))[0])]
            if missed:
                return min(missed, key=lambda b: slack(b, fewer))
        shown = self.shown
        if shown is None or not target.bounds:
            return target.bounds[0] if target.bounds else None
        return min(target.bounds, key=lambda b: slack(b, shown))

    @property
    def gpus(self) -> int | None:
        """Every GPU of the chosen cluster, a prefill pool's included (the probe's summary counts them)."""
        chosen = self.chosen
        return None if self.replicas is None or chosen is None else chosen.gpus

    def cost_per_hour(self, gpu_hour_usd: float | None) -> float | None:
        return None if gpu_hour_usd is None or self.gpus is None else self.gpus * gpu_hour_usd


def size_replicas(scenario_at: Callable[[int], Scenario], target: Target, plan_options: PlanOptions, label: str,
                  store: ProbeStore, workers: int = 1) -> ReplicaSizing:
    """The fewest replicas n for which `scenario_at(n)` meets the target (a sampled probe's replicas on
    `workers` processes)."""
    probes: dict[int, Probe] = {}
    why: list[str] = []
    pool = prefill_pool(scenario_at(1), scenario_at(plan_options.max_replicas))
    fixed_pool = pool == POOL_FIXED

    def meets(n: int) -> bool:
        if n not in probes:
            probes[n] = probe(scenario_at(n), target, plan_options, label, store, workers)
        return probes[n].meets_sla

    def hopeless(n: int) -> bool:
        reason = out_of_reach(probes, n, target, fixed_pool, plan_options.max_replicas)
        why.extend([reason] if reason else [])
        return reason is not None

    replicas = fewest_replicas(meets, plan_options.max_replicas, swamped_growth(probes), hopeless)
    gpus_per_replica = scenario_at(1).hardware.gpus_per_replica
    unmet = None if replicas is not None else (
        why[0] if why else f"no cluster up to {plan_options.max_replicas} replicas meets the SLA")
    return ReplicaSizing(label, replicas, gpus_per_replica, [probes[n] for n in sorted(probes)], unmet, pool)


def slack(bound: Bound, probe: Probe) -> float:
    """How far a probe's mean statistic lies inside its bound, relative to the bound (negative outside; −inf
    when the probe has no figure)."""
    mean = probe.stats.get(bound.key, (math.nan, math.nan))[0]
    if not math.isfinite(mean):
        return -math.inf
    gap = mean - bound.value if bound.op == ">=" else bound.value - mean
    return gap / abs(bound.value) if bound.value else gap


POOL_FIXED, POOL_GROWS = "held fixed", "grows with the decode replicas"


def prefill_pool(smallest: Scenario, largest: Scenario) -> str | None:
    """How the search treats the cluster's prefill pool: held fixed (a capacity plan's cluster.prefill)
    or grown with the decode replicas (a search's prefill_per_decode); None without one."""
    pool, grown = smallest.cluster.prefill, largest.cluster.prefill
    if pool is None or grown is None:
        return None
    return POOL_FIXED if pool.replicas == grown.replicas else POOL_GROWS


def fewest_replicas(meets: Callable[[int], bool], max_replicas: int,
                    grow: Callable[[int], int] = lambda n: 2 * n,
                    hopeless: Callable[[int], bool] = lambda n: False) -> int | None:
    """Smallest n in 1..max_replicas with meets(n) and not meets(n − 1), by growing (doubling, or
    `grow(n)` > n after a failed n) then bisection; None when n reaches the cap, or a failed n is
    `hopeless` (no larger cluster can meet it), without meeting."""
    n, last_fail = 1, 0
    while not meets(n):
        if n >= max_replicas or hopeless(n):
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
