"""A load value → the user's own workload at that load (what sweeps, `plan` and `tune` run).

A load axis scales the arrivals the scenario wrote; it never replaces them.
Lengths, domains and every other workload key are untouched. Four axes,
each fitting some arrival kinds:

    users        closed_loop                      the number of users; think_s and think_cv kept
    rate_per_s   poisson, gamma, mmpp, piecewise  the mean arrival rate (requests/s)
    rate_scale   poisson, gamma, mmpp, piecewise, the workload's own rate multiplied by the value
                 trace
    lanes        sessions                         the agent lanes played at once; the corpus, its
                                                  gaps and the lanes protocol kept

`rate_per_s` sets poisson's and gamma's rate (gamma keeps its cv); mmpp and
piecewise have every rate multiplied by value / their mean rate, so the
sojourns, segment times and period, and with them the burst ratio and the
daily profile, are kept. `rate_scale` multiplies every rate of an arrival
process; on a trace it multiplies the trace's own `rate_scale`
(specplan.traces.replay: thinning below 1, superposed rotated copies of the
same window above 1), so the trace's burst profile, its window and its
lengths are kept. `time_scale`, which stretches trace time, is not a load
axis: it would replay a different stretch of the trace at each load.

Lanes, like users, are a closed system: each lane sends its next turn only
after the last answer and its tool gap, so the load is a concurrency, not a
rate. An axis that does not fit the arrival kind is a ScenarioError naming
both, e.g. `users` on a trace or `rate_per_s` on a closed loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.scenario.study import LOAD_AXES
from specplan.traces.spec import (
    GammaArrivals,
    MmppArrivals,
    PiecewiseArrivals,
    PoissonArrivals,
    SessionArrivals,
    TraceArrivals,
)

OPEN_LOOP = ("poisson", "gamma", "mmpp", "piecewise")
FITS: dict[str, tuple[str, ...]] = {
    "users": ("closed_loop",),
    "rate_per_s": OPEN_LOOP,
    "rate_scale": (*OPEN_LOOP, "trace"),
    "lanes": ("sessions",),
}
INSTEAD = {"closed_loop": "users", "trace": "rate_scale", "sessions": "lanes"}
SWEEP_NAMES = {axis: f"sweep.load.{axis}" for axis in LOAD_AXES}


LOAD_KEYS = {"closed_loop": "users", "poisson": "rate_per_s", "gamma": "rate_per_s", "mmpp": "rate_on_per_s",
             "piecewise": "rates_per_s", "trace": "rate_scale", "bench_client": "num_prompts", "sessions": "lanes"}


def load_key(arrivals: Any) -> str:
    """The key path of the value that sets an arrival process's load (`workload.arrivals.users`, ...)."""
    return f"workload.arrivals.{LOAD_KEYS[arrivals.KIND]}"


def natural_axis(arrivals: Any) -> str:
    """The load axis that fits an arrival kind best: users, rate_scale (traces), lanes (sessions) or rate_per_s."""
    return INSTEAD.get(arrivals.KIND, "rate_per_s")


def check_fits(arrivals: Any, axis: str, names: Mapping[str, str] = SWEEP_NAMES) -> None:
    """Raise ScenarioError unless load axis `axis` fits `arrivals`' kind; `names` shows each axis (key path or flag)."""
    if axis not in FITS:
        raise ScenarioError("sweep.load", f"unknown load axis '{axis}' (valid: {', '.join(LOAD_AXES)})")
    if arrivals.KIND not in FITS[axis]:
        hint = names[natural_axis(arrivals)]
        raise ScenarioError(names[axis], f"a '{axis}' load does not fit workload.arrivals kind '{arrivals.KIND}' "
                                         f"(it fits {', '.join(FITS[axis])}); scale this workload with {hint}")


def scaled_arrivals(arrivals: Any, axis: str, value: float, names: Mapping[str, str] = SWEEP_NAMES) -> Any:
    """`arrivals` at load `value` on `axis` (same kind, every other parameter kept)."""
    check_fits(arrivals, axis, names)
    if axis == "users":
        return dataclasses.replace(arrivals, users=int(value))
    if axis == "lanes":
        assert isinstance(arrivals, SessionArrivals)
        return dataclasses.replace(arrivals, lanes=int(value))
    if axis == "rate_per_s" and isinstance(arrivals, (PoissonArrivals, GammaArrivals)):
        return dataclasses.replace(arrivals, rate_per_s=float(value))
    factor = float(value) if axis == "rate_scale" else float(value) / mean_rate_per_s(arrivals)
    return rate_times(arrivals, factor)


def rate_times(arrivals: Any, factor: float) -> Any:
    """Every rate of an open-loop process (or a trace's rate_scale) multiplied by `factor`."""
    if isinstance(arrivals, (PoissonArrivals, GammaArrivals)):
        return dataclasses.replace(arrivals, rate_per_s=arrivals.rate_per_s * factor)
    if isinstance(arrivals, MmppArrivals):
        return dataclasses.replace(arrivals, rate_on_per_s=arrivals.rate_on_per_s * factor,
                                   rate_off_per_s=arrivals.rate_off_per_s * factor)
    if isinstance(arrivals, PiecewiseArrivals):
        return dataclasses.replace(arrivals, rates_per_s=tuple(r * factor for r in arrivals.rates_per_s))
    assert isinstance(arrivals, TraceArrivals)
    return dataclasses.replace(arrivals, rate_scale=arrivals.rate_scale * factor)


def mean_rate_per_s(arrivals: Any) -> float:
    """The long-run mean arrival rate of an open-loop process (requests/s)."""
    if isinstance(arrivals, (PoissonArrivals, GammaArrivals)):
        return float(arrivals.rate_per_s)
    if isinstance(arrivals, MmppArrivals):
        on, off = arrivals.mean_on_s, arrivals.mean_off_s
        return (arrivals.rate_on_per_s * on + arrivals.rate_off_per_s * off) / (on + off)
    if isinstance(arrivals, PiecewiseArrivals):
        ends = (*arrivals.times_s[1:], arrivals.period_s)
        spans = [end - start for start, end in zip(arrivals.times_s, ends, strict=True)]
        return sum(r * s for r, s in zip(arrivals.rates_per_s, spans, strict=True)) / arrivals.period_s
    raise TypeError(f"{type(arrivals).__name__} has no arrival rate of its own")
