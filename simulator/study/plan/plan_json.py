"""The JSON contract of a plan: exactly these keys, in this order, for a capacity plan and a search.

    capacity_json(plan)    {"seeds_replay", "variants": [{"label", "replicas", "gpus", "meets_sla", "unmet", "tps_user",
                                          "throughput_per_gpu", "cost_per_hour", "seeds",
                                          "tps_user_ci95", "one_fewer", "sure", "sla", ..., "engine_cap",
                                          "sessions"}]}

`sessions` (`session_record`): on agent sessions, the job-level figures at the
answer (or the largest probe): the lanes, the sessions played whole inside
each seed's window (mean), and the mean over seeds and 95% half-width of a
session's wall time (mean, p50, p90) and of its output tokens per second of
wall time (mean, p50), with the mean turns per session; null for other
workloads. A search's rows (plan.csv) carry the same figures as columns
(`SESSION_COLUMNS`), on sessions only.

`engine_cap` (`cap_record`): the serving engine's own cap at the answer (or the
largest probe): the one that binds its demand (`binding`, "none" when every cap
admits it), the tightest (`tightest`, its `requests_per_rank`) and the demand
per rank (specplan.engines.caps, the runs' engine_cap_* keys); null where the
engine's row has no caps. plan.csv's `engine_cap_binding` is its `binding`.

A plan that is not met carries `unmet` (why: the replica cap, a saturated
pool held fixed, statistics that stopped moving) and no per-GPU figure
(`throughput_per_gpu` null): the largest cluster probed is no answer.

Every variant, its one-fewer probe, every deployment row and every probe
row of probes.csv say what the GPUs are (`pool_fields`): `gpus_decode`,
`gpus_prefill`, `prefill_pool` (held fixed, grows with the decode replicas,
or null without a pool), the pool's `prefill_busy_share` and the
`prefix_cache_hit_rate` (null where there is none), means over seeds.
    deployment_rows(plan)  plan.csv: one row per deployment in rank order, met or not
    search_json(plan)      {"target": {"demand", "sla", "seeds", "seeds_replay"}, "points": [those rows], "winner"}

`seeds_replay` says, on a trace, what each seed replays of it (as recorded,
or resampled: specplan.traces.resample), and on agent sessions what each
seed plays (its own generated corpus, or the same corpus read from a path:
specplan.traces.lanes.seeds_play), i.e. what the intervals over seeds
cover; null for other workloads, whose seeds draw their own arrivals.

`specplan plan --json` prints the first or the last; plan.json holds the
same (specplan.simulator.study.plan.files). NaN figures are null.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.probe import Probe, mean_and_interval
from specplan.simulator.study.plan.replica_search import ReplicaSizing
from specplan.simulator.study.plan.search import DeploymentPlan, DeploymentSizing
from specplan.simulator.study.plan.target import Target


def pool_fields(read: Callable[[str], Any], gpus: int | None, pool: str | None) -> dict[str, Any]:
    """What a cluster's GPUs are: decode and prefill GPUs, how the plan treated its prefill pool, the pool's
    busy share and the prefix cache's hit rate; `read(key)` is a summary figure (a run's, or a probe's mean)."""
    prefill = read("gpus_prefill")
    prefill = 0 if prefill is None or not math.isfinite(prefill) else int(prefill)
    return {"gpus_decode": None if gpus is None else gpus - prefill, "gpus_prefill": prefill, "prefill_pool": pool,
            "prefill_busy_share": finite(read("prefill_busy_share")),
            "prefix_cache_hit_rate": finite(read("prefix_cache_hit_rate"))}


def probe_pool(probe: Probe | None, pool: str | None) -> dict[str, Any]:
    """`pool_fields` of a probe (means over its seeds); nulls without one."""
    if probe is None:
        return pool_fields(lambda key: None, None, pool)
    return pool_fields(probe.mean, probe.gpus, pool)


def capacity_json(plan: CapacityPlan) -> dict[str, Any]:
    return {"seeds_replay": plan.seeds_replay or None, "variants": [variant_row(v, plan.target) for v in plan.variants]}


def variant_row(variant: ReplicaSizing, target: Target) -> dict[str, Any]:
    """One variant's object of the capacity plan's contract."""
    probe = variant.shown
    return {
        "label": variant.label, "replicas": variant.replicas, "gpus": variant.gpus,
        "meets_sla": variant.replicas is not None, "unmet": variant.unmet,
        "tps_user": None if probe is None else finite(probe.tps_user),
        "throughput_per_gpu": None if variant.chosen is None else finite(variant.chosen.throughput_per_gpu),
        "cost_per_hour": variant.cost_per_hour(target.gpu_hour_usd),
        "seeds": target.seeds,
        "tps_user_ci95": None if probe is None else finite(probe.tps_user_ci95),
        "one_fewer": probe_record(variant.one_fewer, variant.prefill_pool),
        "sure": variant.sure(target),
        "sla": sla_record(probe, target),
        **probe_pool(probe, variant.prefill_pool),
        "engine_cap": cap_record(probe),
        "sessions": session_record(probe),
    }


SESSION_FIGURES = ("session_wall_mean_s", "session_wall_p50_s", "session_wall_p90_s",
                   "session_output_tokens_per_s_mean", "session_output_tokens_per_s_p50")
SESSION_COLUMNS = ("session_lanes", "sessions_completed", "session_wall_p50_s", "session_wall_p90_s",
                   "session_output_tokens_per_s_mean")


def session_record(probe: Probe | None) -> dict[str, Any] | None:
    """A probe's job-level figures on agent sessions (means over seeds, 95% half-widths); None elsewhere."""
    if probe is None or not any(r.get("session_lanes") is not None for r in probe.runs):
        return None
    out: dict[str, Any] = {"lanes": int(probe.mean("session_lanes")),
                           "sessions_completed": finite(probe.mean("sessions_completed"))}
    for key in SESSION_FIGURES:
        mean, half = probe.stats.get(key) or mean_and_interval(probe.runs, key)
        out[key], out[f"{key}_ci95"] = finite(mean), finite(half)
    out["session_turns_mean"] = finite(probe.mean("session_turns_mean"))
    return out


def session_columns(probe: Probe | None) -> dict[str, Any]:
    """plan.csv's session columns (`SESSION_COLUMNS`, means over seeds) on agent sessions; none elsewhere."""
    if probe is None or not any(r.get("session_lanes") is not None for r in probe.runs):
        return {}
    return {key: finite(probe.mean(key)) for key in SESSION_COLUMNS}


def cap_record(probe: Probe | None) -> dict[str, Any] | None:
    """The engine's own cap at a probe: the one that binds (most seeds' answer), the tightest, the demand."""
    runs = () if probe is None else tuple(r for r in probe.runs if r.get("engine_cap_tightest") is not None)
    if probe is None or not runs:
        return None
    named = [str(r.get("engine_cap_binding")) for r in runs]
    return {"binding": max(dict.fromkeys(named), key=named.count), "tightest": runs[0]["engine_cap_tightest"],
            "requests_per_rank": runs[0].get("engine_cap_tightest_requests_per_rank"),
            "demand_per_rank": finite(probe.mean("engine_cap_demand_per_rank"))}


def sla_record(probe: Probe | None, target: Target) -> dict[str, Any]:
    """Per bound of the SLA: the bound, the statistic's mean over seeds, its 95% half-width, met."""
    out = {}
    for bound in target.bounds:
        mean, half = (math.nan, math.nan) if probe is None else probe.stats.get(bound.key, (math.nan, math.nan))
        out[bound.key] = {"bound": bound.text(), "value": finite(mean), "ci95": finite(half),
                          "met": bound.holds(mean)}
    return out


def probe_record(probe: Probe | None, pool: str | None) -> dict[str, Any] | None:
    """The one-fewer probe as JSON: its size, statistic and interval, its keep-up verdict, its pools."""
    if probe is None:
        return None
    return {"replicas": probe.replicas, "gpus": probe.gpus, "tps_user": finite(probe.tps_user),
            "tps_user_ci95": finite(probe.tps_user_ci95), "keep_up": probe.keep_up,
            "backlog_growth": finite(probe.backlog_growth), "replicas_simulated": probe.simulated,
            **probe_pool(probe, pool)}


def deployment_rows(plan: DeploymentPlan) -> pd.DataFrame:
    """plan.csv: one row per deployment in rank order, met or not."""
    return pd.DataFrame([deployment_row(p, rank, plan.target) for rank, p in enumerate(plan.ranked(), start=1)])


def search_json(plan: DeploymentPlan) -> dict[str, Any]:
    rows = deployment_rows(plan)
    return {"target": {"demand": plan.target.demand_text(), "sla": [b.text() for b in plan.target.bounds],
                       "seeds": plan.target.seeds, "seeds_replay": plan.seeds_replay or None},
            "points": rows.astype(object).where(rows.notna(), None).to_dict(orient="records"),
            "winner": plan.winner.info.label if plan.winner else None}


def deployment_row(p: DeploymentSizing, rank: int, target: Target) -> dict[str, Any]:
    """One row of plan.csv: the point, its answer, every GPU of both pools, cost, SLA statistics."""
    shown, info, sizing = p.shown, p.info, p.sizing
    run = shown.runs[0] if shown is not None and shown.runs else {}
    row: dict[str, Any] = {
        "rank": rank, "label": info.label, "hardware": info.hardware, "profile": info.profile, "mode": info.mode,
        "prefill_per_decode": info.prefill_per_decode, "variant": info.variant, "block_size": info.block_size,
        "meets_sla": p.meets_sla, "unmet": sizing.unmet, "decode_replicas": sizing.replicas,
        "prefill_replicas": run.get("prefill_replicas", 0) if p.meets_sla else None,
        "gpus": sizing.gpus, **{k: v if p.meets_sla else None for k, v in pool_fields(
            shown.mean if shown is not None else lambda key: None, sizing.gpus, sizing.prefill_pool).items()},
        "gpu_hour_usd": info.gpu_hour_usd, "usd_per_hour": p.usd_per_hour(),
        "output_tokens_per_s": finite(p.output_tokens_per_s()), "usd_per_million_tokens": p.usd_per_million_tokens(),
        "largest_probed_replicas": max((q.replicas for q in sizing.probes), default=None),
        "one_fewer_replicas": sizing.one_fewer.replicas if sizing.one_fewer else None,
        "one_fewer_keep_up": sizing.one_fewer.keep_up if sizing.one_fewer else None,
        "sure": sizing.sure(target) if p.meets_sla else None, "probes": len(sizing.probes),
        "engine_cap_binding": (cap_record(shown) or {}).get("binding"),
        **(session_columns(shown) if p.meets_sla else {}),
    }
    for bound in target.bounds:
        mean, half = shown.stats.get(bound.key, (math.nan, math.nan)) if shown is not None else (math.nan, math.nan)
        row[bound.key] = finite(mean)
        row[f"{bound.key}_ci95"] = finite(half)
    return row


def finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
