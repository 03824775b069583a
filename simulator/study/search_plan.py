"""A deployment search: for every point of the scenario's `search:` space, the fewest GPUs meeting the SLA.

    plan = plan_search("azure-search.yaml", target, backend="local", out_dir="out/search")
    plan.points[i].plan.replicas / .gpus, plan.ranked(), plan.rows()    (plan.csv: every point, met or not)

The space (`specplan.simulator.scenario.search`) expands into points: a
hardware option (GPU type at a parallelism, a per-GPU price) × a serving
mode (aggregated, or disaggregated at a prefill:decode ratio) × a drafter /
policy variant (× block size). Each point is planned exactly as `specplan
plan` plans a variant (`specplan.simulator.study.planner`): the demand is
the scenario's own workload at the target's load (a trace's rate scaled by
`rate_scale`, its burstiness kept), n decode replicas (and, disaggregated,
ceil(ratio · n) prefill replicas) are simulated whole with every seed, n is
found by doubling then bisection, the answer confirmed by its own run and
n − 1 by a run that failed. Every GPU of both pools counts.

Ranking: points that meet the SLA first, cheapest first ($/hour from the
hardware option's `gpu_hour_usd`, or GPUs without prices), ties by $ per
million output tokens ($/hour ÷ the simulated output tokens/s at the
answer); then the points that meet it nowhere up to the cap.

Where probes run: in this process, on a local process pool (one point per
worker), or as Ray tasks (`backend="ray"`, one point per task, `address`
for an existing cluster). Every probe run is stored by its point key
under out_dir/probes/ (`specplan.simulator.study.probe_store`), so a
re-run on either backend reuses what any finished, and the answer does not
depend on where it ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.inline import InlineProfile
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.progress import Progress
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.search import (
    SearchPoint,
    search_points,
    usd_per_hour,
    usd_per_million_tokens,
)
from specplan.simulator.study.backends import BACKENDS, default_workers, map_calls, ray_map
from specplan.simulator.study.launch import LaunchConfig, launch_config
from specplan.simulator.study.planner import (
    LOAD_FLAGS,
    Probe,
    Target,
    VariantPlan,
    fewest_replicas,
    finite,
    probe,
    swamped_growth,
)
from specplan.simulator.study.points import fits, loaded, read_source, remove_partial, validated
from specplan.simulator.study.probe_store import ProbeStore, stored_summaries, write_fresh


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
        return PointInfo(index, point.label, point.hardware.label, profile, point.serving.KIND,
                         point.prefill_per_decode, point.variant, point.block_size, point.hardware.gpu_hour_usd)


@dataclass
class PointPlan:
    """One point's answer: its plan (decode replicas, probes) and the figures the ranking reads."""

    info: PointInfo
    plan: VariantPlan

    @property
    def meets_sla(self) -> bool:
        return self.plan.replicas is not None

    @property
    def shown(self) -> Probe | None:
        """The answer's probe, or (met nowhere) the largest cluster simulated."""
        return self.plan.chosen or (self.plan.probes[-1] if self.plan.probes else None)

    def output_tokens_per_s(self) -> float:
        shown = self.shown
        if shown is None:
            return math.nan
        return float(pd.Series([r.get("throughput_tokens_per_s") for r in shown.runs], dtype=float).mean())

    def usd_per_hour(self) -> float | None:
        return usd_per_hour(self.plan.gpus, self.info.gpu_hour_usd) if self.plan.gpus is not None else None

    def usd_per_million_tokens(self) -> float | None:
        return usd_per_million_tokens(self.usd_per_hour(), self.output_tokens_per_s()) if self.meets_sla else None

    def rank_key(self) -> tuple[float, float, float, int]:
        if not self.meets_sla:
            return (1.0, math.inf, math.inf, self.info.index)
        cost = self.usd_per_hour()
        first = float(cost if cost is not None else self.plan.gpus or math.inf)
        per_token = self.usd_per_million_tokens()
        return (0.0, first, per_token if per_token is not None else math.inf, self.info.index)


@dataclass
class SearchPlan:
    target: Target
    points: list[PointPlan]
    source: str
    raw: dict[str, Any]
    folder: Path
    backend: str = "local"

    def point_scenario(self, p: PointPlan, replicas: int) -> Scenario:
        """A point's scenario at `replicas` decode replicas and the demand (as its probes ran it)."""
        point = searched_points(self.raw, self.folder, self.source)[p.info.index]
        return point_scenario(point, replicas, self.target, self.folder, self.source)

    def launch(self) -> LaunchConfig | None:
        """The winner's launch configuration (None when no deployment meets the SLA)."""
        winner = self.winner
        if winner is None or winner.plan.replicas is None:
            return None
        scenario = self.point_scenario(winner, winner.plan.replicas)
        pool = scenario.cluster.prefill
        prefill = provenance_of(pool.profile) if pool is not None else None
        return launch_config(scenario, provenance_of(scenario.hardware.profile), prefill)

    def ranked(self) -> list[PointPlan]:
        return sorted(self.points, key=PointPlan.rank_key)

    @property
    def winner(self) -> PointPlan | None:
        best = self.ranked()[0] if self.points else None
        return best if best is not None and best.meets_sla else None

    def rows(self) -> pd.DataFrame:
        """plan.csv: one row per point in rank order, met or not."""
        return pd.DataFrame([point_row(p, rank, self.target) for rank, p in enumerate(self.ranked(), start=1)])

    def to_json(self) -> dict[str, Any]:
        return {"target": {"demand": self.target.demand_text(), "sla": [b.text() for b in self.target.sla_bounds],
                           "seeds": self.target.seeds},
                "points": self.rows().astype(object).where(self.rows().notna(), None).to_dict(orient="records"),
                "winner": self.winner.info.label if self.winner else None}


def point_row(p: PointPlan, rank: int, target: Target) -> dict[str, Any]:
    """One row of plan.csv: the point, its answer, every GPU of both pools, cost, SLA statistics."""
    shown, info = p.shown, p.info
    run = shown.runs[0] if shown is not None and shown.runs else {}
    row: dict[str, Any] = {
        "rank": rank, "label": info.label, "hardware": info.hardware, "profile": info.profile, "mode": info.mode,
        "prefill_per_decode": info.prefill_per_decode, "variant": info.variant, "block_size": info.block_size,
        "meets_sla": p.meets_sla, "decode_replicas": p.plan.replicas,
        "prefill_replicas": run.get("prefill_replicas", 0) if p.meets_sla else None,
        "gpus": p.plan.gpus, "gpus_decode": run.get("gpus_decode", run.get("gpus")) if p.meets_sla else None,
        "gpus_prefill": run.get("gpus_prefill", 0) if p.meets_sla else None,
        "gpu_hour_usd": info.gpu_hour_usd, "usd_per_hour": p.usd_per_hour(),
        "output_tokens_per_s": finite(p.output_tokens_per_s()), "usd_per_million_tokens": p.usd_per_million_tokens(),
        "largest_probed_replicas": max((q.replicas for q in p.plan.probes), default=None),
        "one_fewer_replicas": p.plan.one_fewer.replicas if p.plan.one_fewer else None,
        "one_fewer_keep_up": p.plan.one_fewer.keep_up if p.plan.one_fewer else None,
        "sure": p.plan.sure(target) if p.meets_sla else None, "probes": len(p.plan.probes),
    }
    for bound in target.sla_bounds:
        mean, half = shown.stats.get(bound.key, (math.nan, math.nan)) if shown is not None else (math.nan, math.nan)
        row[bound.key] = finite(mean)
        row[f"{bound.key}_ci95"] = finite(half)
    return row


def point_scenario(point: SearchPoint, replicas: int, target: Target, folder: Path, name: str) -> Scenario:
    """The point at `replicas` decode replicas, its workload at the target's demand, validated."""
    where = f"search point {point.label!r}"
    raw = point.mapping(replicas)
    axis, value = target.load
    return validated(loaded(raw, validated(raw, folder, name, where), axis, value, name, where, LOAD_FLAGS),
                     folder, name, where)


def plan_point(raw: dict, folder: Path, name: str, index: int, target: Target, max_replicas: int,
               probes_dir: Path | None, known: dict[str, dict[str, Any]]) -> tuple[VariantPlan, dict[str, Any]]:
    """One point's fewest decode replicas; returns its plan and the probe records it made (for a driver
    that stores them, when `probes_dir` is None)."""
    point = searched_points(raw, folder, name)[index]
    store = ProbeStore(probes_dir, known)
    probes: dict[int, Probe] = {}

    def meets(n: int) -> bool:
        if n not in probes:
            probes[n] = probe(point_scenario(point, n, target, folder, name), target, point.label, store=store)
        return probes[n].meets_sla

    replicas = fewest_replicas(meets, max_replicas, swamped_growth(probes))
    plan = VariantPlan(point.label, replicas, point.hardware.gpus_per_replica, [probes[n] for n in sorted(probes)])
    return plan, store.fresh


def searched_points(raw: dict, folder: Path, name: str) -> list[SearchPoint]:
    """The points of the scenario's search space (one line when it has none)."""
    search = validated(raw, folder, name, "").search
    if search is None:
        raise SpecplanError(f"{name}: a deployment search needs a search: block in the scenario (the space to search)")
    return search_points(raw, search)


def expanded(source: str | Path | Scenario | dict, overrides: tuple[str, ...] | list[str],
             target: Target) -> tuple[dict, Path, str, list[SearchPoint]]:
    """The source, its points, each checked at one replica and the demand (one line for a bad one)."""
    raw, folder, name = read_source(source, overrides)
    points = searched_points(raw, folder, name)
    fits(validated(raw, folder, name, ""), target.load[0], name, "", LOAD_FLAGS)
    for point in points:
        point_scenario(point, 1, target, folder, name)
    return raw, folder, name, points


def plan_search(source: str | Path | Scenario | dict, target: Target, max_replicas: int = 256,
                workers: int | None = None, backend: str = "local", address: str | None = None,
                out_dir: str | Path | None = None, progress: bool | None = None,
                overrides: tuple[str, ...] | list[str] = ()) -> SearchPlan:
    """Every point of the scenario's search space planned; see the module docstring."""
    target.check()
    if backend not in BACKENDS:
        raise SpecplanError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if max_replicas < 1:
        raise SpecplanError(f"max-replicas must be >= 1, got {max_replicas}")
    if workers is not None and workers < 1:
        raise SpecplanError(f"--workers must be >= 1, got {workers}")
    raw, folder, name, points = expanded(source, overrides, target)
    probes_dir = Path(out_dir) / "probes" if out_dir is not None else None
    found = run_points(raw, folder, name, len(points), target, max_replicas, workers or default_workers(),
                       backend, address, probes_dir, progress)
    plans = [PointPlan(PointInfo.of(i, point), found[i]) for i, point in enumerate(points)]
    return SearchPlan(target, plans, name, raw, folder, backend)


def provenance_of(spec: str | InlineProfile) -> dict[str, str]:
    """The provenance lines of the profile `spec` names (empty for an inline profile without them)."""
    return dict(load_profile(spec).provenance or {})


def run_points(raw: dict, folder: Path, name: str, count: int, target: Target, max_replicas: int, workers: int,
               backend: str, address: str | None, probes_dir: Path | None,
               progress: bool | None) -> dict[int, VariantPlan]:
    """Each point's plan, on the chosen backend; a remote point's new probe records are stored here."""
    remote = backend == "ray"
    known = stored_summaries(probes_dir) if remote else {}
    jobs = [(raw, folder, name, i, target, max_replicas, None if remote else probes_dir, known)
            for i in range(count)]
    found: dict[int, VariantPlan] = {}
    kept = (f"every finished probe is stored under {probes_dir}: run the same command again to resume"
            if probes_dir is not None else "nothing is kept (give --out DIR to store probes and resume)")
    with Progress(count, "search", enabled=progress) as bar:

        def on_result(index: int, get: Callable[[], tuple[VariantPlan, dict[str, Any]]]) -> None:
            plan, fresh = get()
            write_fresh(probes_dir, fresh)
            found[index] = plan
            bar.advance()

        if remote:
            ray_map([(plan_point, job) for job in jobs], on_result, workers, address, what="search point")
        else:
            map_calls([(plan_point, job) for job in jobs], on_result, min(workers, count), "search point", kept,
                      on_killed=lambda running: remove_partial(probes_dir, [""]))
    return found


def search_table(plan: SearchPlan) -> str:
    """The ranked terminal table: deployment, GPUs per pool, cost, the SLA statistics, met or not."""
    t = plan.target
    keys = [b.key for b in t.sla_bounds]
    head = f"{t.demand_text()}; {t.sla_text()}; {t.seeds} seed(s) per probe; {len(plan.points)} deployment(s)"
    cols = ("#", "deployment", "GPUs", "prefill+decode", "$/hour", "$/M tok", *keys, "SLA")
    rows = [cols]
    for rank, p in enumerate(plan.ranked(), start=1):
        r = point_row(p, rank, t)
        pools = f"{r['gpus_prefill']}+{r['gpus_decode']}" if p.meets_sla else "—"
        stats = [fmt(r[k], "{:.3g}") for k in keys]
        verdict = "met" if p.meets_sla else f"not met up to {r['largest_probed_replicas']} replicas"
        rows.append((str(rank), p.info.label, fmt(r["gpus"]), pools, fmt(r["usd_per_hour"], "{:,.2f}"),
                     fmt(r["usd_per_million_tokens"], "{:,.3f}"), *stats, verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = [head] + ["  ".join(c.ljust(w) if i in (1, len(cols) - 1) else c.rjust(w)
                                for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines += [f"  {p.info.label}: not sure: a bound of the SLA lies inside the 95% interval at {p.plan.replicas} "
              f"or {p.plan.replicas - 1} decode replica(s); more seeds (--seeds) or a longer horizon would settle it"
              for p in plan.ranked() if p.plan.replicas is not None and not p.plan.sure(t)]
    winner = plan.winner
    lines.append(f"winner: {winner.info.label}" if winner else "winner: none (no deployment meets the SLA)")
    return "\n".join(lines)


def fmt(value: Any, template: str = "{}") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return template.format(value)
