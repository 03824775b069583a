"""Capacity planning: for each variant, the fewest replicas that serve a demand at an SLA.

    plan = plan_capacity("poisson.yaml", rate_per_s=40, sla_tps=80, statistic="p10")
    plan = plan_capacity("scenarios/default.yaml", None, sla_tps=80, users=64)     # a closed loop
    plan = plan_capacity("mooncake.yaml", None, sla_tps=80, rate_scale=3)          # a trace, 3x its rate
    plan.variants[i].replicas, .gpus, .meets_sla, .cost_per_hour
    plan.to_json()     {"variants": [{"label", "replicas", "gpus", "meets_sla", "tps_user",
                                      "throughput_per_gpu", "cost_per_hour"}]}

The demand is the scenario's own workload at one load, scaled the way a
sweep's load axis scales it (specplan.simulator.scenario.scaling): a mean
arrival rate `rate_per_s` (poisson, gamma, mmpp, piecewise: the kind, its
burstiness and the lengths kept), a `rate_scale` of the workload's own
rate (also traces), or closed-loop `users`; a load that does not fit the
workload is refused. The variants are the scenario's `sweep.variants` (or
the scenario itself). A cluster of n replicas meets the SLA when, simulated
whole (router included), the tokens/s/user statistic reaches `sla_tps`, the
p99 TTFT stays under `ttft_s` when given, and it keeps up with the demand:
tokens emitted in the measurement window are at least `KEEP_UP` of the
output tokens requested by the arrivals in that window (an overloaded
cluster's backlog grows and the ratio falls to capacity / demand).

Search: n = 1, 2, 4, ... until the SLA is met, then bisection between the
last failure and the first success. Every probe is a full-cluster
simulation, so the answer n is confirmed by its own run, and n − 1 by a run
that failed (bisection ends with exactly those two neighbours simulated).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.progress import Progress
from specplan.simulator.engine.simulation import simulate
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.merge import apply_variant, strip_study_blocks
from specplan.simulator.scenario.study import tps_column
from specplan.simulator.study.backends import default_workers
from specplan.simulator.study.points import fits, loaded, read_source, validated

KEEP_UP = 0.95
DEFAULT_MAX_REPLICAS = 256
LOAD_FLAGS = {"rate_per_s": "--rate", "rate_scale": "--rate-scale", "users": "--users"}


@dataclass(frozen=True)
class Target:
    """The demand (exactly one of rate_per_s, rate_scale, users) and the SLA a plan must meet."""

    rate_per_s: float | None
    sla_tps: float
    statistic: str = "p10"
    ttft_s: float | None = None
    gpu_hour_usd: float | None = None
    rate_scale: float | None = None
    users: int | None = None

    def check(self) -> None:
        tps_column(self.statistic)
        given = [flag for name, flag in LOAD_FLAGS.items() if getattr(self, name) is not None]
        if len(given) != 1:
            raise SpecplanError(f"give exactly one demand: {', '.join(LOAD_FLAGS.values())}"
                                + (f" (got {', '.join(given)})" if given else ""))
        flags = {**LOAD_FLAGS, "sla_tps": "--sla-tps", "ttft_s": "--ttft-s", "gpu_hour_usd": "--gpu-hour-usd"}
        for name, flag in flags.items():
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise SpecplanError(f"{flag} must be a positive number, got {value:g}")
        if self.users is not None and self.users != int(self.users):
            raise SpecplanError(f"--users must be a whole number, got {self.users:g}")

    @property
    def load(self) -> tuple[str, float]:
        """(load axis, value) of the demand."""
        name = next(name for name in LOAD_FLAGS if getattr(self, name) is not None)
        return name, float(getattr(self, name))

    def demand_text(self) -> str:
        axis, value = self.load
        return {"rate_per_s": f"demand {value:g} req/s", "rate_scale": f"demand the workload's rate x {value:g}",
                "users": f"demand {value:g} closed-loop users"}[axis]


@dataclass(frozen=True)
class Probe:
    """One full-cluster simulation of a variant at `replicas`."""

    replicas: int
    meets_sla: bool
    tps_user: float
    throughput_per_gpu: float
    ttft_p99_s: float
    served_fraction: float
    gpus: int


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
    def gpus(self) -> int | None:
        """Every GPU of the chosen cluster, a prefill pool's included (the probe's summary counts them)."""
        chosen = self.chosen
        return None if self.replicas is None or chosen is None else chosen.gpus

    def cost_per_hour(self, gpu_hour_usd: float | None) -> float | None:
        return None if gpu_hour_usd is None or self.gpus is None else self.gpus * gpu_hour_usd

    def row(self, gpu_hour_usd: float | None) -> dict[str, Any]:
        """The JSON object of the plan contract (exactly these keys)."""
        probe = self.chosen or (self.probes[-1] if self.probes else None)
        return {
            "label": self.label, "replicas": self.replicas, "gpus": self.gpus,
            "meets_sla": self.replicas is not None,
            "tps_user": None if probe is None else finite(probe.tps_user),
            "throughput_per_gpu": None if probe is None else finite(probe.throughput_per_gpu),
            "cost_per_hour": self.cost_per_hour(gpu_hour_usd),
        }


def finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


@dataclass
class CapacityPlan:
    target: Target
    variants: list[VariantPlan]

    def to_json(self) -> dict[str, Any]:
        return {"variants": [v.row(self.target.gpu_hour_usd) for v in self.variants]}


def cluster_scenario(raw: dict, replicas: int, folder: Path, source: str, where: str) -> Scenario:
    sized = copy.deepcopy(raw)
    cluster = sized.setdefault("cluster", {})
    if isinstance(cluster, dict):
        cluster["replicas"] = replicas
    return validated(sized, folder, source, where)


def probe(scenario: Scenario, target: Target) -> Probe:
    """Simulate one cluster size and judge it against the target."""
    result = simulate(scenario)
    s = result.summary
    tps = s[tps_column(target.statistic)]
    served = served_fraction(result.requests, s["tokens_generated"], scenario.horizon.warmup_s)
    ttft = s["ttft_p99_s"]
    meets = (math.isfinite(tps) and tps >= target.sla_tps and served >= KEEP_UP
             and (target.ttft_s is None or (math.isfinite(ttft) and ttft <= target.ttft_s)))
    return Probe(scenario.cluster.replicas, bool(meets), float(tps), float(s["throughput_tokens_per_s_per_gpu"]),
                 float(ttft), served, int(s["gpus"]))


def served_fraction(requests: Any, tokens_generated: int, warmup_s: float) -> float:
    """Tokens emitted in the window ÷ output tokens requested by the window's arrivals."""
    demand = float(requests.loc[requests["arrival_s"] >= warmup_s, "output_tokens"].sum())
    return tokens_generated / demand if demand > 0 else 1.0


def fewest_replicas(meets: Callable[[int], bool], max_replicas: int) -> int | None:
    """Smallest n in 1..max_replicas with meets(n) and not meets(n − 1), by doubling then bisection."""
    n, last_fail = 1, 0
    while not meets(n):
        if n >= max_replicas:
            return None
        last_fail, n = n, min(2 * n, max_replicas)
    lo, hi = last_fail, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi  # meets(hi) held, and hi − 1 == lo was simulated and failed (or hi is 1)


def plan_variant(raw: dict, label: str, folder: Path, source: str, where: str,
                 target: Target, max_replicas: int) -> VariantPlan:
    """Search one variant's replica count; every probe is kept for the record."""
    probes: dict[int, Probe] = {}

    def meets(n: int) -> bool:
        if n not in probes:
            probes[n] = probe(cluster_scenario(raw, n, folder, source, where), target)
        return probes[n].meets_sla

    base = cluster_scenario(raw, 1, folder, source, where)
    replicas = fewest_replicas(meets, max_replicas)
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


def plan_capacity(scenario_or_path: str | Path | Scenario | dict, rate_per_s: float | None, sla_tps: float,
                  statistic: str = "p10", ttft_s: float | None = None, gpu_hour_usd: float | None = None,
                  max_replicas: int = DEFAULT_MAX_REPLICAS, workers: int | None = None,
                  progress: bool | None = None, overrides: tuple[str, ...] | list[str] = (),
                  rate_scale: float | None = None, users: int | None = None) -> CapacityPlan:
    """Fewest replicas (and GPUs, cost) per variant serving the demand at the SLA.

    The demand is exactly one of `rate_per_s`, `rate_scale`, `users` (see the module docstring).
    """
    target = Target(rate_per_s, sla_tps, statistic, ttft_s, gpu_hour_usd, rate_scale, users)
    target.check()
    if max_replicas < 1:
        raise SpecplanError(f"max-replicas must be >= 1, got {max_replicas}")
    variants, folder, name = variant_mappings(scenario_or_path, target.load, overrides)
    for _label, raw, where in variants:
        cluster_scenario(raw, 1, folder, name, where)  # fail fast on a bad variant
    jobs = [(raw, label, folder, name, where, target, max_replicas) for label, raw, where in variants]
    if workers is not None and workers < 1:
        raise SpecplanError(f"--workers must be >= 1, got {workers}")
    workers = min(workers or default_workers(), len(jobs))
    with Progress(len(jobs), "plan", enabled=progress) as bar:
        if workers <= 1:
            plans = []
            for job in jobs:
                plans.append(plan_variant(*job))
                bar.advance()
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(plan_variant, *job) for job in jobs]
                plans = []
                for future in futures:
                    plans.append(future.result())
                    bar.advance()
    return CapacityPlan(target, plans)


def plan_table(plan: CapacityPlan) -> str:
    """The terminal table: replicas, GPUs, SLA, cost per hour, savings against the first variant."""
    t = plan.target
    price = t.gpu_hour_usd
    head = (f"{t.demand_text()}; SLA tokens/s/user {t.statistic} >= {t.sla_tps:g}"
            + (f", TTFT p99 <= {t.ttft_s:g} s" if t.ttft_s is not None else "")
            + (f"; GPU at ${price:g}/hour" if price is not None else ""))
    cols = ("variant", "replicas", "GPUs", f"tok/s/user {t.statistic}", "tok/s/GPU", "$/hour", "savings")
    rows = [cols]
    first = plan.variants[0] if plan.variants else None
    for v in plan.variants:
        r = v.row(price)
        rows.append((v.label, show(r["replicas"]), show(r["gpus"]), show(r["tps_user"], "{:.1f}"),
                     show(r["throughput_per_gpu"], "{:,.0f}"), show(r["cost_per_hour"], "{:,.2f}"),
                     savings(v, first)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = [head] + ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                                enumerate(zip(row, widths, strict=True))) for row in rows]
    lines += [f"  {v.label}: no cluster up to {max(p.replicas for p in v.probes)} replicas meets the SLA"
              for v in plan.variants if v.replicas is None and v.probes]
    return "\n".join(lines)


def show(value: Any, template: str = "{}") -> str:
    return "—" if value is None else template.format(value)


def savings(variant: VariantPlan, first: VariantPlan | None) -> str:
    """GPUs saved against the first variant, as a percentage of its GPUs."""
    if first is None or variant is first or variant.gpus is None or not first.gpus:
        return "—"
    return f"{100 * (first.gpus - variant.gpus) / first.gpus:+.0f}%"
