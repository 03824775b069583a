"""How every sweep figure draws a variant (one colour per label, lossy and oracle policies dashed and named) and
a load axis (log 2 with the simulated loads as ticks when they span 8× or more).

Shared by the report's figures (specplan.reports.figures), the lanes figure (specplan.reports.lanes) and the
tune report's (specplan.reports.tune).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes

from specplan.policies.registry import policy_class
from specplan.simulator.scenario import Scenario

DPI = 110


def colours(labels: list[str]) -> dict[str, Any]:
    # matplotlib's colormaps load only when a figure is drawn
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


def legend_name(label: str, scenario: Scenario) -> str:
    cls = policy_class(scenario.policy.name)
    if cls.oracle:
        return f"{label} [oracle]"
    if not cls.lossless:
        return f"{label} [lossy]"
    return label


def line_style(scenario: Scenario) -> str:
    cls = policy_class(scenario.policy.name)
    return "--" if cls.oracle or not cls.lossless else "-"


def log_load_axis(ax: Axes, loads: np.ndarray) -> None:
    """A log-2 axis with the simulated loads as plain tick labels, when they span ≥ 8×."""
    loads = np.sort(loads[loads > 0])
    if loads.size < 2 or loads[-1] / loads[0] < 8:
        return
    ax.set_xscale("log", base=2)
    ax.set_xticks(loads, [f"{v:g}" for v in loads])
    ax.minorticks_off()
