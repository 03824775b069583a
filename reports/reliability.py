"""Reliability diagrams of confidence heads (matplotlib, no pyplot state).

`plot_reliability(panels, path, title)` draws one panel per draft position:
observed prefix survival against mean predicted survival per bin (20
equal-width bins), the diagonal of perfect calibration, and the bin counts
as a histogram behind (right axis), each panel titled with its ECE. Used by
`specplan calibrate`; reusable by reports.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specplan.simulator.drafters.head_calibration import Reliability

if TYPE_CHECKING:
    # matplotlib: for type checking only
    from matplotlib.axes import Axes

MAX_COLUMNS = 4


def plot_reliability(panels: list[Reliability], path: Path, title: str, ece: list[float] | None = None) -> Path:
    """Write a grid of reliability diagrams (one per position) to `path` (PNG)."""
    # matplotlib loads only when a plot is drawn
    from matplotlib.figure import Figure

    cols = min(len(panels), MAX_COLUMNS)
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(3.2 * cols, 3.1 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, ax in enumerate(axes.ravel()):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        draw_panel(ax, panels[k], f"position {k + 1}" + ("" if ece is None else f"  ECE {100 * ece[k]:.1f}%"))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def draw_panel(ax: Axes, rel: Reliability, label: str) -> None:
    """One reliability diagram with its bin-count histogram on a twin axis."""
    edges = rel.edges
    width = np.diff(edges)
    counts_ax = ax.twinx()
    counts_ax.bar(edges[:-1], rel.counts, width=width, align="edge", color="0.85", zorder=0)
    counts_ax.set_yticks([])
    ax.set_zorder(counts_ax.get_zorder() + 1)
    ax.patch.set_visible(False)
    filled = rel.counts > 0
    ax.plot([0, 1], [0, 1], ls="--", color="0.4", lw=1)
    ax.plot(rel.mean_pred[filled], rel.observed[filled], "o-", color="C0", ms=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted survival")
    ax.set_ylabel("observed survival")
    ax.set_title(label, fontsize=9)
