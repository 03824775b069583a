"""The fidelity scatter: predicted vs measured, one marker per point and metric, with y = x.

Two panels (throughput, p50 tokens/s/user); each policy has its own colour,
each load level its own marker size; a shaded band shows ±10% around y = x,
the issue's bound on the largest error. Written as PNG (and SVG beside it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

PANELS = (("throughput", "throughput (tokens/s)"), ("tps_p50", "p50 tokens/s/user"))


def save_fidelity_plot(points: list[dict[str, Any]], path: Path, summary: dict[str, Any]) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    policies = list(dict.fromkeys(p["policy"] for p in points))
    loads = sorted({p["load"] for p in points if p["load"] is not None})
    colours = plt.get_cmap("tab10")(np.arange(len(policies)) % 10)
    for ax, (metric, title) in zip(axes, PANELS, strict=True):
        draw_panel(ax, points, metric, title, dict(zip(policies, colours, strict=True)), loads)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"specplan vs reference engine: median |error| {summary['median_abs_error']:.1%}, "
                 f"max {summary['max_abs_error']:.1%}", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    fig.savefig(path.with_suffix(".svg"))
    plt.close(fig)
    return path


def draw_panel(ax: Any, points: list[dict[str, Any]], metric: str, title: str,
               colours: dict[str, Any], loads: list[float]) -> None:
    measured = np.array([p[f"measured_{metric}"] for p in points], dtype=float)
    predicted = np.array([p[f"predicted_{metric}"] for p in points], dtype=float)
    finite = np.isfinite(measured) & np.isfinite(predicted)
    top = 1.08 * float(np.max(np.concatenate([measured[finite], predicted[finite]]), initial=1.0))
    line = np.array([0.0, top])
    ax.fill_between(line, 0.9 * line, 1.1 * line, color="0.9", label="±10%")
    ax.plot(line, line, color="0.3", lw=1, label="y = x")
    for policy, colour in colours.items():
        mine = [i for i, p in enumerate(points) if p["policy"] == policy and finite[i]]
        sizes = [30 + 60 * loads.index(points[i]["load"]) if points[i]["load"] in loads else 40 for i in mine]
        ax.scatter(measured[mine], predicted[mine], s=sizes, color=colour, edgecolor="black",
                   linewidth=0.5, label=policy, zorder=3)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_aspect("equal")
    ax.set_xlabel(f"measured {title}")
    ax.set_ylabel(f"predicted {title}")
    ax.set_title(f"{title} (marker size: load)", fontsize=10)
    ax.grid(alpha=0.3)
