"""Figures of a trace's shape: request rate over time and length distributions.

Drawn from a `TraceStats` (stats.py). `plot_trace(stats, png)` writes the
three-panel figure `specplan trace-stats --plot` produces; the panel
functions take a matplotlib Axes so that reports can reuse them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specplan.traces.stats import MINUTE_S, TraceStats


def rate_panel(ax, stats: TraceStats) -> None:
    """Requests per second in each minute of the trace, with the mean rate."""
    minutes = np.arange(stats.minute_counts.size)
    ax.step(minutes, stats.minute_counts / MINUTE_S, where="post", color="tab:blue", lw=1.2)
    if np.isfinite(stats.rate_per_s):
        ax.axhline(stats.rate_per_s, color="grey", ls="--", lw=1, label=f"mean {stats.rate_per_s:.2f}/s")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xlabel("minute of the trace")
    ax.set_ylabel("requests/s (per minute)")
    ax.set_title(f"rate over time (interarrival CV {stats.interarrival_cv:.2f})", fontsize=10)


def length_panel(ax, lengths: np.ndarray, what: str) -> None:
    """Histogram of token lengths on log-spaced bins, with the median and p99."""
    if lengths.size == 0:
        ax.set_title(f"{what}: no requests", fontsize=10)
        return
    low, high = max(int(lengths.min()), 1), max(int(lengths.max()), 2)
    bins = np.unique(np.geomspace(low, high + 1, 50).astype(int))
    ax.hist(np.maximum(lengths, 1), bins=bins, color="tab:orange", alpha=0.8)
    ax.set_xscale("log")
    for q, ls in ((50, "-"), (99, ":")):
        ax.axvline(np.percentile(lengths, q), color="k", ls=ls, lw=1, label=f"p{q} {np.percentile(lengths, q):.0f}")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_xlabel(f"{what} (tokens)")
    ax.set_ylabel("requests")


def plot_trace(stats: TraceStats, png: str | Path) -> Path:
    """Write the rate-over-time and length-distribution figure of a trace to `png`."""
    # matplotlib loads only when a plot is drawn
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 3.8))
    axes = fig.subplots(1, 3)
    rate_panel(axes[0], stats)
    length_panel(axes[1], stats.prompt_lengths, "prompt")
    length_panel(axes[2], stats.output_lengths, "output")
    fig.suptitle(f"{Path(stats.path).name} ({stats.format}): {stats.requests:,} requests over "
                 f"{stats.span_s / 60:.1f} min", fontsize=11)
    fig.tight_layout()
    out = Path(png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out
