"""A sweep over agent lanes → the report's lanes figure and its table of gains at equal lanes.

    lanes_figure(result)   three panels sharing the lanes axis: throughput per GPU, a session's output
                           tokens/s, and each variant's gain in throughput per GPU over the first at
                           equal lanes (paired by seed), each with its 95% interval over seeds
    lanes_blocks(result)   the table the report shows under "Gains at equal lanes" (lanes.csv, read by
                           specplan.simulator.study.lane_gains)

Both are empty (None, []) unless the sweep's load axis is `lanes`: agent
sessions are a closed system, so variants are compared at equal lanes.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from specplan.reports.document import Block, Paragraph, Table
from specplan.reports.styles import DPI, colours, legend_name, line_style, log_load_axis
from specplan.simulator.study.sweep.run import SweepResult

PANELS = (("throughput_per_gpu", "throughput per GPU\n(tok/s/GPU)"),
          ("session_output_tokens_per_s", "a session's output\n(tokens/s of wall time)"),
          ("throughput_gain", "gain in tok/s/GPU over\nthe first variant"))


def lanes_figure(result: SweepResult) -> Figure | None:
    """Throughput per GPU, a session's tokens/s and the paired gain against lanes, one line per label."""
    gains = result.lanes
    if gains is None or gains.empty:
        return None
    fig = Figure(figsize=(8.5, 8.5), dpi=DPI)
    axes = fig.subplots(len(PANELS), 1, sharex=True)
    scenarios = result.design.variant_scenarios
    colour = colours(result.design.labels)
    for label in result.design.labels:
        mine = gains[gains["label"] == label].sort_values("lanes")
        for ax, (column, _) in zip(axes, PANELS, strict=True):
            ax.errorbar(mine["lanes"], mine[column], yerr=mine[f"{column}_ci95"], fmt="o" + line_style(scenarios[label]),
                        ms=4, capsize=2, color=colour[label], label=legend_name(label, scenarios[label]))
    for ax, (_, ylabel) in zip(axes, PANELS, strict=True):
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylim(bottom=0)
    axes[2].axhline(0.0, color="0.5", lw=1)
    axes[2].yaxis.set_major_formatter(lambda value, _: f"{100 * value:+.0f}%")
    axes[-1].set_xlabel("agent session lanes")
    log_load_axis(axes[-1], gains["lanes"].dropna().unique())
    axes[0].set_title("Lanes against tokens/s per GPU, and the gain at equal lanes")
    axes[0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def lanes_blocks(result: SweepResult) -> list[Block]:
    """The gains-at-equal-lanes table and what it reads; [] unless the sweep is over lanes."""
    gains = result.lanes
    if gains is None or gains.empty:
        return []
    baseline = str(gains["baseline"].iloc[0])
    header = ("lanes", "label", "tok/s/GPU", f"gain vs {baseline}", "a session's tok/s", "gain",
              "session wall p50 (s)", "TTFT p99 (s)", "τ", "sessions whole")
    rows = tuple((f"{r.lanes:g}", str(r.label), with_interval(r.throughput_per_gpu, r.throughput_per_gpu_ci95, "{:,.0f}"),
                  gain_text(r.throughput_gain, r.throughput_gain_ci95, r.label == baseline),
                  with_interval(r.session_output_tokens_per_s, r.session_output_tokens_per_s_ci95, "{:.1f}"),
                  gain_text(r.session_rate_gain, r.session_rate_gain_ci95, r.label == baseline),
                  number(r.session_wall_p50_s, "{:.1f}"), number(r.ttft_p99_s, "{:.3g}"),
                  number(r.mean_accepted_per_step, "{:.2f}"), number(r.sessions_completed, "{:.0f}"))
                 for r in gains.itertuples())
    note = Paragraph("Agent lanes are a closed system: every variant is offered the same sessions at a lanes value, "
                     "so variants are compared there rather than along a frontier. A gain is the variant's figure ÷ "
                     f"{baseline}'s − 1 at the same lanes and seed (a seed gives every variant the same corpus, drawn in "
                     "the same order from the same start turns), averaged over seeds with its Student-t 95% "
                     "interval. A session's "
                     "tok/s is its output tokens over its wall time (first send to its whole tree done), over the "
                     "sessions played whole inside the window ('sessions whole': the fewest of any seed); τ is "
                     "tokens per request-step, the bonus token included.")
    return [Table(header, rows), note]


def with_interval(value: float, half: float, template: str) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    shown = template.format(value)
    return shown + (f" ± {template.format(half)}" if half is not None and math.isfinite(half) else "")


def gain_text(value: float, half: float, baseline: bool) -> str:
    if baseline:
        return "—"
    if value is None or not math.isfinite(value):
        return "—"
    return f"{100 * value:+.1f}%" + (f" ± {100 * half:.1f}" if half is not None and math.isfinite(half) else "")


def number(value: float, template: str) -> str:
    return template.format(value) if value is not None and math.isfinite(value) else "—"
