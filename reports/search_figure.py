"""A deployment search → its figure: cost against the SLA statistic, one marker per searched deployment.

x: the SLA's tokens/s/user statistic (its first bound when it has none) at the deployment's answer (or, met
nowhere, at the largest cluster simulated), its bound drawn as a dashed
line; y: $/hour (GPUs when the space has no prices). Filled markers meet the
SLA, hollow ones do not; the winner is ringed and named. Colour is the
hardware option, marker shape the serving mode.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from specplan.simulator.study.plan.plan_json import deployment_row, deployment_rows
from specplan.simulator.study.plan.search import DeploymentPlan

MARKERS = {"aggregated": "o", "disaggregated": "s"}


def search_figure(plan: DeploymentPlan) -> Figure:
    bounds = plan.target.bounds
    bound = next((b for b in bounds if b.key.startswith("tps_user")), bounds[0])
    rows = deployment_rows(plan)
    priced = rows["usd_per_hour"].notna().any()
    fig = Figure(figsize=(7.0, 4.4), dpi=110)
    ax = fig.add_subplot()
    hardware = list(dict.fromkeys(rows["hardware"]))
    # matplotlib's colormaps load only when a figure is drawn
    from matplotlib import colormaps
    cmap = colormaps["tab10"]
    for p in plan.deployments:
        row = deployment_row(p, 0, plan.target)
        x = row[bound.key]
        y = row["usd_per_hour"] if priced else row["gpus"]
        if y is None and p.shown is not None:
            y = (p.shown.gpus * (p.info.gpu_hour_usd or 1.0)) if priced else p.shown.gpus
        if x is None or y is None:
            continue
        colour = cmap(hardware.index(p.info.hardware) % 10)
        ax.plot([x], [y], MARKERS.get(p.info.mode, "o"), ms=8, color=colour,
                mfc=colour if p.meets_sla else "none", mew=1.5)
    winner = plan.winner
    if winner is not None:
        row = deployment_row(winner, 1, plan.target)
        wy = row["usd_per_hour"] if priced else row["gpus"]
        ax.plot([row[bound.key]], [wy], "o", ms=16, mfc="none", mec="black", mew=1.2)
        ax.annotate(f"winner: {winner.info.label}", (row[bound.key], wy), xytext=(8, 10),
                    textcoords="offset points", fontsize=8)
    ax.axvline(bound.value, ls="--", color="grey", lw=1)
    ax.set_xlabel(f"{bound.key} at the answer (SLA {bound.text()}, dashed)")
    ax.set_ylabel("$ per hour (every GPU of both pools)" if priced else "GPUs (both pools)")
    ax.set_title(f"{plan.target.demand_text()}: {len(plan.deployments)} deployments", fontsize=10)
    for h in hardware:
        ax.plot([], [], "o", color=cmap(hardware.index(h) % 10), label=h)
    for mode, marker in MARKERS.items():
        ax.plot([], [], marker, color="black", mfc="none", label=mode)
    ax.plot([], [], "o", color="black", label="filled: meets the SLA")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def write_search_figure(plan: DeploymentPlan, path: Path) -> Path:
    search_figure(plan).savefig(path)
    return path
