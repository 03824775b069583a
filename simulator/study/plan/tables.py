"""The terminal tables of `specplan plan`: a capacity plan per variant, a deployment search ranked.

    plan_table(plan)      replicas, GPUs, the binding bound (the SLA term that sets the answer: the one its
                          one-fewer probe misses furthest, else the one with the least slack) ± its 95%
                          interval at the answer and one fewer, cost, savings
    search_table(plan)    rank, deployment, GPUs per pool, the pool's busy share and prefix-cache hit rate, cost,
                          the SLA statistics (on agent sessions, a session's wall time p90 and output
                          tokens/s too), met or not

On agent sessions a capacity plan adds, per variant, its job-level figures at the answer
(`sessions_text`: lanes, a session's wall time and output tokens/s with their intervals).

plan.md and the search's plan.md embed the same text (specplan.simulator.study.plan.files).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from specplan.simulator.scenario.study import tps_column
from specplan.simulator.study.keepup import FALLS_BEHIND
from specplan.simulator.study.plan.plan_json import deployment_row, probe_pool, variant_row
from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.probe import Probe
from specplan.simulator.study.plan.replica_search import ReplicaSizing
from specplan.simulator.study.plan.search import DeploymentPlan
from specplan.simulator.study.plan.target import Target


def plan_table(plan: CapacityPlan) -> str:
    """The terminal table: replicas, GPUs, the binding bound's statistic (answer, one fewer), cost, savings."""
    t = plan.target
    price = t.gpu_hour_usd
    head = (f"{t.demand_text()}; {t.sla_text()}"
            + (f"; GPU at ${price:g}/hour" if price is not None else "")
            + (f"; {t.seeds} seeds per probe, ± a 95% interval over seeds" if t.seeds > 1
               else "; 1 seed per probe (no interval: give --seeds 2 or more for one)")
            + ("" if price is not None else "; no GPU price given (--gpu-hour-usd): no cost columns"))
    head += f"\n  {plan.seeds_replay}" if plan.seeds_replay else ""
    priced = price is not None
    cols = ("variant", "replicas", "GPUs", "binding bound", "at the answer", "one fewer", "tok/s/GPU",
            *(("$/hour", "savings") if priced else ()))
    rows = [cols]
    first = plan.variants[0] if plan.variants else None
    for v in plan.variants:
        r = variant_row(v, t)
        bound = v.binding(t)
        key = bound.key if bound is not None else tps_column(t.statistic)
        cost = (show(r["cost_per_hour"], "{:,.2f}"), savings(v, first)) if priced else ()
        rows.append((v.label, show(r["replicas"]), show(r["gpus"]), bound.text() if bound is not None else "—",
                     stat_text(v.shown, key), one_fewer_text(v.one_fewer, key), show(r["throughput_per_gpu"], "{:,.0f}"),
                     *cost))
    lines = [head, *aligned(rows, left=(0, 3))]
    sampled = sorted({p.simulated for v in plan.variants for p in v.probes if p.simulated < p.replicas})
    if sampled:
        lines.append(f"  probes above {sampled[0]} replicas simulate {sampled[0]} of them at their share of the "
                     "demand (independent replicas: random routing of Poisson arrivals)"
                     + ("; other routers approximated so (--sample-any-router)" if plan.plan_options.sample_any_router
                        else ""))
    lines += [f"  {v.label}: {gpus_text(probe_pool(v.chosen, v.prefill_pool))}" for v in plan.variants
              if v.chosen is not None and (v.prefill_pool or math.isfinite(v.chosen.mean("prefix_cache_hit_rate")))]
    lines += [f"  {v.label}: {cap_text(record)}" for v in plan.variants
              if (record := variant_row(v, t)["engine_cap"]) is not None]
    lines += [f"  {v.label}: {sessions_text(record, v.shown)}" for v in plan.variants
              if (record := variant_row(v, t)["sessions"]) is not None]
    lines += [f"  {v.label}: not met: {v.unmet}" for v in plan.variants if v.replicas is None and v.probes]
    lines += [f"  {v.label}: {unsure_text(v, t)}" for v in plan.variants if v.replicas is not None and not v.sure(t)]
    return "\n".join(lines)


def unsure_text(sizing: ReplicaSizing, target: Target, unit: str = "replica") -> str:
    """'not sure: ttft_p99_s 4.14 ± 1.2 at 1 replica lies across its bound (<= 5); ...': which statistic, at
    which size, holds a bound inside its 95% interval, and what would settle it."""
    cases = [f"{bound.key} {stat_text(probe, bound.key)} at {probe.replicas} {unit}{'s' if probe.replicas != 1 else ''}"
             f" holds its bound ({bound.op} {bound.value:g}) inside its 95% interval"
             for probe, bound in sizing.unsure(target)]
    return ("not sure: " + "; ".join(cases) + "; more seeds (--seeds) or a longer horizon would settle it")


def search_table(plan: DeploymentPlan) -> str:
    """The ranked terminal table: deployment, GPUs per pool, cost, the SLA statistics, met or not."""
    t = plan.target
    keys = [b.key for b in t.bounds]
    priced = any(p.info.gpu_hour_usd is not None for p in plan.deployments)
    head = f"{t.demand_text()}; {t.sla_text()}; {t.seeds} seed(s) per probe; {len(plan.deployments)} deployment(s)"
    head += "" if priced else "; no GPU prices given (search.hardware[].gpu_hour_usd): ranked by GPUs"
    head += f"\n  {plan.seeds_replay}" if plan.seeds_replay else ""
    sessions = [k for k in ("session_wall_p90_s", "session_output_tokens_per_s_mean") if k not in keys
                and any(k in deployment_row(p, 0, t) for p in plan.deployments)]
    cols = ("#", "deployment", "GPUs", "prefill+decode", "prefill busy", "hit rate",
            *(("$/hour", "$/M tok") if priced else ()), *keys, *sessions, "SLA")
    rows = [cols]
    for rank, p in enumerate(plan.ranked(), start=1):
        r = deployment_row(p, rank, t)
        pools = f"{r['gpus_prefill']}+{r['gpus_decode']}" if p.meets_sla else "—"
        stats = [show(r.get(k), "{:.3g}") for k in (*keys, *sessions)]
        verdict = "met" if p.meets_sla else f"not met (probed up to {r['largest_probed_replicas']} replicas)"
        cost = (show(r["usd_per_hour"], "{:,.2f}"), show(r["usd_per_million_tokens"], "{:,.3f}")) if priced else ()
        rows.append((str(rank), p.info.label, show(r["gpus"]), pools, show(r["prefill_busy_share"], "{:.0%}"),
                     show(r["prefix_cache_hit_rate"], "{:.1%}"), *cost, *stats, verdict))
    lines = [head, *aligned(rows, left=(1, len(cols) - 1))]
    lines += [f"  {p.info.label}: {unsure_text(p.sizing, t, 'decode replica')}"
              for p in plan.ranked() if p.sizing.replicas is not None and not p.sizing.sure(t)]
    lines += [f"  {p.info.label}: not met: {p.sizing.unmet}" for p in plan.ranked() if p.sizing.unmet]
    winner = plan.winner
    lines.append(f"winner: {winner.info.label}" if winner else "winner: none (no deployment meets the SLA)")
    return "\n".join(lines)


def gpus_text(pools: dict[str, Any]) -> str:
    """'5 GPUs: 1 decode + 4 prefill (the prefill pool held fixed, busy 35%); prefix-cache hit rate 7.9%'."""
    decode, prefill = pools["gpus_decode"], pools["gpus_prefill"]
    text = f"{decode + prefill} GPU(s)" + (f": {decode} decode + {prefill} prefill" if prefill else "")
    if pools["prefill_pool"]:
        busy = pools["prefill_busy_share"]
        text += f" (the prefill pool {pools['prefill_pool']}" + (f", busy {busy:.0%})" if busy is not None else ")")
    hit = pools["prefix_cache_hit_rate"]
    return text + (f"; prefix-cache hit rate {hit:.1%}" if hit is not None else "")


def sessions_text(record: dict[str, Any], probe: Probe | None) -> str:
    """'16 lanes on 2 replica(s): a session's wall time p50 330 ± 21 s, p90 415 ± 40 s; its output 47.8 ± 3.1
    tokens/s (mean); 12 sessions whole in the window (mean over seeds)'."""
    size = f" on {probe.replicas} replica(s)" if probe is not None else ""
    if not record["sessions_completed"]:
        return (f"{record['lanes']} lanes{size}: no session ran whole inside the window (a session's wall time "
                "needs a window of several session lengths: raise horizon.duration_s)")
    return (f"{record['lanes']} lanes{size}: a session's wall time p50 {session_figure(record, 'session_wall_p50_s')}"
            f" s, p90 {session_figure(record, 'session_wall_p90_s')} s; its output "
            f"{session_figure(record, 'session_output_tokens_per_s_mean')} tokens/s (mean); "
            f"{show(record['sessions_completed'], '{:.0f}')} sessions whole in the window (mean over seeds)")


def session_figure(record: dict[str, Any], key: str) -> str:
    """'330 ± 21': a session figure's mean over seeds and its 95% half-width (the mean alone for one seed)."""
    value, half = record[key], record[f"{key}_ci95"]
    if value is None:
        return "—"
    return mean_pm(value, half, digits=0 if value >= 100 else 1)


def cap_text(record: dict[str, Any]) -> str:
    """"the engine's cap that binds: swa_pool (30 requests per rank; 41.5 outstanding per rank)", or the tightest."""
    demand = record["demand_per_rank"]
    state = f"; {demand:.1f} outstanding per rank" if demand is not None else ""
    if record["binding"] != "none":
        return f"the engine's cap that binds: {record['binding']} ({record['requests_per_rank']} requests per rank{state})"
    return (f"no engine cap binds (tightest: {record['tightest']}, {record['requests_per_rank']} requests per "
            f"rank{state})")


def aligned(rows: Sequence[tuple[str, ...]], left: tuple[int, ...]) -> list[str]:
    """Rows as lines of columns padded to their widest cell, the `left` columns left-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
            for row in rows]


def stat_text(probe: Probe | None, key: str) -> str:
    """'63.1 ± 2.0' / '4.14 ± 0.61': a probe's mean over seeds of an SLA key and its 95% half-width (the mean
    alone for one seed)."""
    if probe is None:
        return "—"
    mean, half = probe.stats.get(key) or (probe.mean(key), math.nan)
    if not math.isfinite(mean):
        return "—"
    return mean_pm(mean, half)


def mean_pm(mean: float, half: float | None, digits: int | None = None) -> str:
    """'272 ± 360', '4.14 ± 0.61', '63.1 ± 2.0': a mean and its 95% half-width at one precision, the half-width's
    two significant digits (the mean alone, at `digits` decimals or three significant digits, without one)."""
    if half is None or not math.isfinite(half) or half <= 0:
        if digits is not None:
            return f"{mean:,.{digits}f}"
        return f"{mean:.1f}" if abs(mean) >= 10 else f"{mean:.3g}"
    decimals = min(MAX_DECIMALS, max(0, 1 - math.floor(math.log10(half))))
    return f"{mean:,.{decimals}f} ± {half:,.{decimals}f}"


MAX_DECIMALS = 6


def one_fewer_text(probe: Probe | None, key: str) -> str:
    """The failed neighbour: '1: 41.2 ± 3.1' (the binding key) or '1: falls behind' (its backlog grows)."""
    if probe is None:
        return "—"
    if probe.keep_up == FALLS_BEHIND:
        return f"{probe.replicas}: falls behind"
    return f"{probe.replicas}: {stat_text(probe, key)}"


def show(value: Any, template: str = "{}") -> str:
    """A table cell: '—' for a missing or NaN figure."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return template.format(value)


def savings(variant: ReplicaSizing, first: ReplicaSizing | None) -> str:
    """Cost saved against the first variant, as a percentage of its cost (one GPU price: of its GPUs)."""
    if first is None or variant is first or variant.gpus is None or not first.gpus:
        return "—"
    return f"{100 * (first.gpus - variant.gpus) / first.gpus:+.0f}%"
