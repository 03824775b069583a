"""The JSON contract of a plan: exactly these keys, in this order, for a capacity plan and a search.

    capacity_json(plan)    {"variants": [{"label", "replicas", "gpus", "meets_sla", "tps_user",
                                          "throughput_per_gpu", "cost_per_hour", "seeds",
                                          "tps_user_ci95", "one_fewer", "sure", "sla"}]}
    deployment_rows(plan)  plan.csv: one row per deployment in rank order, met or not
    search_json(plan)      {"target": {"demand", "sla", "seeds"}, "points": [those rows], "winner"}

`specplan plan --json` prints the first or the last; plan.json holds the
same (specplan.cli.plan_files). NaN figures are null.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from specplan.simulator.study.planner import CapacityPlan
from specplan.simulator.study.probe import Probe
from specplan.simulator.study.replica_search import ReplicaSizing
from specplan.simulator.study.search_plan import DeploymentPlan, DeploymentSizing
from specplan.simulator.study.target import Target


def capacity_json(plan: CapacityPlan) -> dict[str, Any]:
    return {"variants": [variant_row(v, plan.target) for v in plan.variants]}


def variant_row(variant: ReplicaSizing, target: Target) -> dict[str, Any]:
    """One variant's object of the capacity plan's contract."""
    probe = variant.shown
    return {
        "label": variant.label, "replicas": variant.replicas, "gpus": variant.gpus,
        "meets_sla": variant.replicas is not None,
        "tps_user": None if probe is None else finite(probe.tps_user),
        "throughput_per_gpu": None if probe is None else finite(probe.throughput_per_gpu),
        "cost_per_hour": variant.cost_per_hour(target.gpu_hour_usd),
        "seeds": target.seeds,
        "tps_user_ci95": None if probe is None else finite(probe.tps_user_ci95),
        "one_fewer": probe_record(variant.one_fewer),
        "sure": variant.sure(target),
        "sla": sla_record(probe, target),
    }


def sla_record(probe: Probe | None, target: Target) -> dict[str, Any]:
    """Per bound of the SLA: the bound, the statistic's mean over seeds, its 95% half-width, met."""
    out = {}
    for bound in target.bounds:
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


def deployment_rows(plan: DeploymentPlan) -> pd.DataFrame:
    """plan.csv: one row per deployment in rank order, met or not."""
    return pd.DataFrame([deployment_row(p, rank, plan.target) for rank, p in enumerate(plan.ranked(), start=1)])


def search_json(plan: DeploymentPlan) -> dict[str, Any]:
    rows = deployment_rows(plan)
    return {"target": {"demand": plan.target.demand_text(), "sla": [b.text() for b in plan.target.bounds],
                       "seeds": plan.target.seeds},
            "points": rows.astype(object).where(rows.notna(), None).to_dict(orient="records"),
            "winner": plan.winner.info.label if plan.winner else None}


def deployment_row(p: DeploymentSizing, rank: int, target: Target) -> dict[str, Any]:
    """One row of plan.csv: the point, its answer, every GPU of both pools, cost, SLA statistics."""
    shown, info, sizing = p.shown, p.info, p.sizing
    run = shown.runs[0] if shown is not None and shown.runs else {}
    row: dict[str, Any] = {
        "rank": rank, "label": info.label, "hardware": info.hardware, "profile": info.profile, "mode": info.mode,
        "prefill_per_decode": info.prefill_per_decode, "variant": info.variant, "block_size": info.block_size,
        "meets_sla": p.meets_sla, "decode_replicas": sizing.replicas,
        "prefill_replicas": run.get("prefill_replicas", 0) if p.meets_sla else None,
        "gpus": sizing.gpus, "gpus_decode": run.get("gpus_decode", run.get("gpus")) if p.meets_sla else None,
        "gpus_prefill": run.get("gpus_prefill", 0) if p.meets_sla else None,
        "gpu_hour_usd": info.gpu_hour_usd, "usd_per_hour": p.usd_per_hour(),
        "output_tokens_per_s": finite(p.output_tokens_per_s()), "usd_per_million_tokens": p.usd_per_million_tokens(),
        "largest_probed_replicas": max((q.replicas for q in sizing.probes), default=None),
        "one_fewer_replicas": sizing.one_fewer.replicas if sizing.one_fewer else None,
        "one_fewer_keep_up": sizing.one_fewer.keep_up if sizing.one_fewer else None,
        "sure": sizing.sure(target) if p.meets_sla else None, "probes": len(sizing.probes),
    }
    for bound in target.bounds:
        mean, half = shown.stats.get(bound.key, (math.nan, math.nan)) if shown is not None else (math.nan, math.nan)
        row[bound.key] = finite(mean)
        row[f"{bound.key}_ci95"] = finite(half)
    return row


def finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
