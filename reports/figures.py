"""Sweep result → the report's figures (matplotlib, no pyplot state), saved as PNG and SVG.

    frontier_figure      throughput per GPU vs tokens/s/user: operating points, each label's
                         Pareto frontier, SLA lines
    concurrency_figure   throughput per GPU (top) and mean verification budget 1 + ℓ (bottom)
                         vs concurrency
    acceptance_figure    per-position conditional acceptance p_k as every label's runs drew it, per domain
    calibration_figure   reliability of prefix survival Π c_i: raw head vs what policies saw, as run
    lanes_figure         over agent lanes: tokens/s per GPU, a session's tokens/s and the gain at equal lanes
                         (specplan.reports.lanes; drawn for a lanes sweep only)

The acceptance and calibration figures read what the runs recorded (the
sweep result's `drafts`, specplan.simulator.engine.records.draft_record), never the
scenario's model, so they cannot disagree with what was simulated.
    profile_figure       the step-time curve(s) of the sweep, measured points and cliffs

Each label keeps one colour in every figure; lossy and oracle policies are
drawn dashed and named so in the legend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specplan.hwprofiles.plot import plot_profiles
from specplan.reports.cliffs import profile_curves
from specplan.reports.lanes import lanes_figure
from specplan.reports.reliability_curves import reliability_curves
from specplan.reports.styles import DPI, colours, legend_name, line_style, log_load_axis
from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.drafters.curves import expected_tau
from specplan.simulator.engine.records.draft_record import DraftRecord
from specplan.simulator.scenario import Scenario
from specplan.simulator.study.sweep.run import SweepResult

MIN_BIN_COUNT = 30  # reliability bins with fewer draft blocks are noise, not calibration


@dataclass(frozen=True)
class FigureFile:
    """A saved figure: its name, title and caption, and the PNG and SVG paths."""

    name: str
    title: str
    caption: str
    png: Path
    svg: Path


def frontier_figure(result: SweepResult) -> Figure:
    """Throughput per GPU vs tokens/s/user: points, fitted frontier per label, SLA lines."""
    fig = Figure(figsize=(8.5, 5.5), dpi=DPI)
    ax = fig.add_subplot()
    ops, front = result.operating, result.frontier
    scenarios = result.design.variant_scenarios
    colour = colours(result.design.labels)
    for label in result.design.labels:
        mine = ops[ops["label"] == label]
        ax.scatter(mine["tps_user"], mine["throughput_per_gpu"], s=18, alpha=0.45, color=colour[label])
        curve = front[front["label"] == label]
        ax.plot(curve["tps_user"], curve["throughput_per_gpu"], line_style(scenarios[label]), lw=2,
                color=colour[label], label=legend_name(label, scenarios[label]))
    edge_markers(ax, result, colour)
    frontier_axes(ax, result, "Throughput vs interactivity: Pareto frontier per variant")
    fig.tight_layout()
    return fig


def edge_markers(ax: Axes, result: SweepResult, colour: dict[str, Any]) -> None:
    """An open triangle at each SLA reading taken at the largest simulated load (a lower bound)."""
    comp = result.comparisons
    if comp.empty or "throughput_edge" not in comp:
        return
    edge = comp[comp["throughput_edge"].astype(str).str.startswith("max load")]
    for i, r in enumerate(edge.itertuples()):
        ax.plot([r.sla_tps_user], [r.throughput_per_gpu], "^", ms=9, mfc="none", mew=1.6,
                color=colour.get(r.label, "0.2"),
                label="SLA reading at the largest simulated load (a lower bound)" if i == 0 else None)


def frontier_axes(ax: Axes, result: SweepResult, title: str) -> None:
    """The frontier plot's SLA lines (labelled), axis labels, title, grid and legend."""
    sla = result.design.sla
    for value in sla.tps_user if sla is not None else ():
        ax.axvline(value, color="0.35", ls=":", lw=1.2)
        ax.annotate(f"SLA {value:g}", (value, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -12), textcoords="offset points", fontsize=8, color="0.25")
    ax.set_xlabel(f"tokens/s/user, {result.statistic} of requests (tok/s)")
    ax.set_ylabel("throughput per GPU (tok/s/GPU)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="best")


def concurrency_axis(result: SweepResult) -> tuple[str, str]:
    """(operating-point column, axis label) for the concurrency axis."""
    kinds = {p.load_kind for p in result.design.points}
    if kinds == {"users"}:
        return "load", "concurrent users (closed loop)"
    return "mean_batch_requests", "mean running requests per replica"


def concurrency_figure(result: SweepResult) -> Figure:
    """Two rows sharing x: throughput per GPU, and mean verify tokens per request-step (1 + ℓ)."""
    fig = Figure(figsize=(8.5, 7.0), dpi=DPI)
    top, bottom = fig.subplots(2, 1, sharex=True)
    column, xlabel = concurrency_axis(result)
    ops = result.operating
    scenarios = result.design.variant_scenarios
    colour = colours(result.design.labels)
    for label in result.design.labels:
        mine = ops[ops["label"] == label].sort_values(column)
        style = line_style(scenarios[label])
        top.errorbar(mine[column], mine["throughput_per_gpu"], yerr=mine["throughput_per_gpu_ci95"],
                     fmt="o" + style, ms=4, capsize=2, color=colour[label],
                     label=legend_name(label, scenarios[label]))
        bottom.plot(mine[column], mine["mean_verify_tokens_per_request_step"], "o" + style, ms=4,
                    color=colour[label])
    top.set_ylabel("throughput per GPU (tok/s/GPU)")
    top.set_title("Throughput and verification budget vs concurrency")
    bottom.set_ylabel("mean verify tokens per\nrequest-step, 1 + ℓ (tokens)")
    bottom.set_xlabel(xlabel)
    if column == "load":
        log_load_axis(bottom, ops[column].dropna().unique())
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    top.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def recorded_labels(result: SweepResult) -> list[tuple[str, Scenario, DraftRecord]]:
    """(label, scenario, its runs' draft record) of every label whose runs drew drafts, one per distinct
    drafter and policy reading it (labels that differ in neither drew the same kind of drafts)."""
    out: list[tuple[str, Scenario, DraftRecord]] = []
    scenarios = result.design.variant_scenarios
    for label, record in result.drafts.items():
        scenario = scenarios[label]
        if all((other.drafter, other.policy) != (scenario.drafter, scenario.policy) for _, other, _ in out):
            out.append((label, scenario, record))
    return out


def acceptance_figure(result: SweepResult) -> Figure | None:
    """Per-position conditional acceptance as the runs drew it, per label, one panel per domain of the mix."""
    drafters = recorded_labels(result)
    if not drafters:
        return None
    domains = sorted({d for _, _, record in drafters for d in record.domains}, key=DOMAINS.index)
    fig = Figure(figsize=(4.0 * len(domains) + 1.0, 4.2), dpi=DPI)
    axes = np.atleast_1d(fig.subplots(1, len(domains), sharey=True))
    colour = colours(result.design.labels)
    for ax, domain in zip(axes, domains, strict=True):
        for label, _, record in drafters:
            if domain not in record.domains:
                continue
            p = record.acceptance[record.domains.index(domain)]
            drawn = p[np.isfinite(p)]
            ax.plot(np.arange(1, p.size + 1), p, "o-", ms=4, color=colour[label],
                    label=f"{label} (E[τ] {expected_tau(drawn):.2f}, {drawn.size} positions)")
        ax.set_title(f"{domain} requests")
        ax.set_xlabel("draft position k")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    axes[0].set_ylabel("conditional acceptance p_k")
    fig.suptitle("Per-position acceptance as simulated (E[τ]: every drawn position verified)")
    fig.tight_layout()
    return fig


def calibration_figure(result: SweepResult) -> Figure | None:
    """Reliability of prefix survival a_k = Π_{i≤k} c_i (all positions pooled), per label whose policy read
    confidences, from the confidences and outcomes its runs recorded."""
    drafters = [(label, scenario, record) for label, scenario, record in recorded_labels(result)
                if record.seen is not None]
    if not drafters:
        return None
    fig = Figure(figsize=(4.0 * len(drafters) + 0.5, 4.4), dpi=DPI)
    axes = np.atleast_1d(fig.subplots(1, len(drafters), sharey=True))
    for ax, (label, scenario, record) in zip(axes, drafters, strict=True):
        head = scenario.drafter.confidence
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, label="perfectly calibrated")
        for curve in reliability_curves(record, head.kind):
            keep = curve.counts >= MIN_BIN_COUNT
            ax.plot(curve.mean_pred[keep], curve.observed[keep], curve.style, ms=3,
                    label=f"{curve.name} (ECE {100 * curve.ece:.1f}%)")
        ax.set_title(f"{label}: {head.kind} head" + (f", {head.calibration}" if head.kind == "model" else ""),
                     fontsize=9)
        ax.set_xlabel("predicted prefix survival Π c_i")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("observed prefix survival")
    fig.suptitle("Confidence calibration (reliability, 20 equal-width bins)")
    fig.tight_layout()
    return fig


def profile_figure(result: SweepResult) -> Figure:
    """Step time and steps/s vs tokens in the verify batch (specplan.hwprofiles.plot), cliffs marked."""
    curves = profile_curves(result.design)
    fig = Figure(figsize=(11.0, 4.6), dpi=DPI)
    step_ax, sps_ax = fig.subplots(1, 2)
    plot_profiles([c.profile for c in curves], (step_ax, sps_ax), max_tokens=max(c.tokens.size for c in curves),
                  labels=[f"{c.name} ({c.labels})" for c in curves])
    for curve in curves:
        if curve.cliffs.size:
            step_ax.plot(curve.cliffs, curve.cliff_ms, "v", ms=6, color="crimson",
                         label=f"cliffs of {curve.name} ({curve.cliffs.size})")
            sps_ax.plot(curve.cliffs, 1000.0 / curve.cliff_ms, "^", ms=6, color="crimson")
    step_ax.set_xlabel("tokens in the verify batch, B (tokens)")
    step_ax.set_ylabel("step time (ms)")
    sps_ax.set_xlabel("tokens in the verify batch, B (tokens)")
    sps_ax.set_ylabel("steps per second (1/s)")
    for ax in (step_ax, sps_ax):
        ax.set_ylim(bottom=0)
    step_ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Step-time profile: linear between measured points, cliffs marked")
    fig.tight_layout()
    return fig


FIGURES = (
    ("frontier", "Pareto frontiers", frontier_figure,
     "Throughput per GPU against tokens/s/user (SLA statistic); dots are operating points (seed means), "
     "lines each label's non-dominated frontier; dotted verticals are the SLA thresholds; an open triangle "
     "marks an SLA reading taken at the label's largest simulated load (more load was not simulated, so "
     "it is a lower bound)."),
    ("concurrency", "Throughput and verification budget vs concurrency", concurrency_figure,
     "Top: throughput per GPU with 95% confidence intervals over seeds. Bottom: mean tokens verified "
     "per request per step (1 + ℓ): how much each policy spends on verification as load grows."),
    ("acceptance", "Per-position acceptance", acceptance_figure,
     "Conditional acceptance p_k at draft position k as the label's runs drew it: accepted ÷ reached "
     "(drafts 1..k−1 accepted and k drawn), pooled over proposals, request and token spread included, "
     "from a sample of every run's steps (every 8th step)."),
    ("calibration", "Confidence calibration", calibration_figure,
     "Reliability of predicted prefix survival for the confidences each label's policy saw in its runs, "
     "against those drafts' outcomes (a sample of every run's steps): the raw head and the confidences "
     "policies see (bins with fewer than 30 blocks not drawn)."),
    ("lanes", "Lanes against tokens/s per GPU", lanes_figure,
     "Over agent session lanes (a lanes sweep): top, throughput per GPU; middle, a session's output tokens per "
     "second of its wall time (the mean over sessions played whole in the window); bottom, each variant's gain "
     "in throughput per GPU over the first at equal lanes, paired by seed (every variant plays the same "
     "sessions at a seed). Bars: 95% intervals over seeds."),
    ("profile", "Step-time profile", profile_figure,
     "Engine step time against tokens verified in one forward (at zero KV context where the profile "
     "has a context axis); dots are measured points, triangles the cliffs (a jump of more than 2% "
     "of the step time from one token count to the next)."),
)


LANES_ONLY = ("lanes",)  # drawn for a sweep over agent lanes only


def write_figures(result: SweepResult, figures_dir: Path) -> list[FigureFile]:
    """Render every applicable figure to figures_dir/<name>.png and .svg."""
    figures_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, title, make, caption in FIGURES:
        fig = make(result)
        if fig is None:
            continue
        png, svg = figures_dir / f"{name}.png", figures_dir / f"{name}.svg"
        fig.savefig(png, dpi=DPI)
        fig.savefig(svg, metadata={"Date": None})
        saved.append(FigureFile(name, title, caption, png, svg))
    return saved
