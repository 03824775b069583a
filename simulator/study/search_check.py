"""A search: block's points validated as `specplan plan` expands them, without running one (`specplan check`).

    points = checked_points("search.yaml", overrides)    every point's scenario at one decode replica, validated

Place in the data flow: the scenario layer expands the space
(specplan.simulator.scenario.search.search_points); this module loads each
point's scenario at one replica, as the planner does before it sizes any
(specplan.simulator.study.plan.search.expanded, which also scales each to
the demand), so `check` refuses a bad point in one line naming it. It
imports no simulation (pandas-free, as `check` is).
"""

from __future__ import annotations

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario.search import SearchPoint, search_points
from specplan.simulator.study.points import read_source, validated


def checked_points(source: str, overrides: list[str] | tuple[str, ...] = ()) -> list[SearchPoint]:
    """The scenario's search points, each validated at one decode replica (one line naming a bad one)."""
    raw, folder, name = read_source(source, overrides)
    search = validated(raw, folder, name, "").search
    if search is None:
        raise SpecplanError(f"{name}: no search: block to check")
    points = search_points(raw, search, folder)
    for point in points:
        validated(point.mapping(1), folder, name, f"search point {point.label!r}", point.stated_paths())
    return points
