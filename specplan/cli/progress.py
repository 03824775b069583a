"""`simulate_with_progress(scenario)`: one simulation with a progress bar over its horizon.

The bar counts simulated seconds (or completed requests for a request-count
horizon) and is drawn by a SimPy process that only reads the clock: the
model's events and draws are untouched, so results equal `simulate(scenario)`'s.
"""

from __future__ import annotations

from typing import Any

from specplan.simulator.core.progress import Progress
from specplan.simulator.engine.cluster.simulation import Simulation

TICKS = 200


def simulate_with_progress(scenario: Any, enabled: bool | None = None, itl: bool = True) -> Any:
    """`simulate(scenario, itl)` with a progress bar (per mille of the horizon) on a terminal, plain lines every
    ten seconds elsewhere (specplan.simulator.core.progress)."""
    sim = Simulation(scenario, itl)
    with Progress(1000, scenario.name, enabled=enabled) as bar:
        if bar.counting:
            sim.env.process(horizon_ticker(sim, bar))
        result = sim.run()
        bar.update(bar.total)
        return result


def horizon_ticker(sim: Any, bar: Progress) -> Any:
    """A SimPy process: every 1/TICKS of the horizon, report how much of it has passed.

    It stops as soon as nothing else is scheduled, so a model that runs out
    of events ends exactly as it would without the bar.
    """
    horizon = sim.scenario.horizon
    period_s = horizon.duration_s / TICKS if horizon.duration_s is not None else 0.5
    while sim.env.peek() != float("inf"):
        yield sim.env.timeout(period_s)
        if horizon.duration_s is not None:
            bar.update(int(1000 * sim.env.now / horizon.duration_s))
        else:
            bar.update(int(1000 * sim.finished / max(horizon.requests, 1)))
