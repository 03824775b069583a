"""Workload → request arrivals in a SimPy environment.

`start_workload(env, scenario, submit, stop)` starts the processes that
create requests and hand them to `submit(prompt_tokens, output_tokens,
domain) -> Event`, an event that fires when the request completes or is
rejected (closed-loop users wait on it). Arrivals stop at the horizon's
duration or after its `requests` count; `stop()` says whether the cap is
reached. Each request's lengths and domain come from their own named
streams, so the arrival process and the lengths never share draws.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from simulator.streams import stream
from traces.lengths import LengthSampler
from traces.spec import ClosedLoopArrivals, PoissonArrivals

Submit = Callable[[int, int, int], simpy.Event]


class RequestSource:
    """Draws the per-request attributes (prompt, output, domain) from named streams."""

    def __init__(self, scenario: Any, domains_mix: np.ndarray) -> None:
        seed = scenario.seed
        spec = scenario.workload
        self.prompt = LengthSampler(spec.prompt_tokens, stream(seed, "lengths.prompt"))
        self.output = LengthSampler(spec.output_tokens, stream(seed, "lengths.output"))
        self.domain_rng = stream(seed, "domains")
        self.cum_mix = np.cumsum(domains_mix)

    def next(self) -> tuple[int, int, int]:
        domain = int(np.searchsorted(self.cum_mix, self.domain_rng.random() * self.cum_mix[-1], side="right"))
        return self.prompt.next(), self.output.next(), min(domain, self.cum_mix.size - 1)


class ArrivalBudget:
    """Counts arrivals against the horizon: a time limit and/or a request cap."""

    def __init__(self, duration_s: float | None, requests: int | None) -> None:
        self.duration_s = duration_s
        self.requests = requests
        self.arrived = 0

    def allows(self, now: float) -> bool:
        if self.duration_s is not None and now >= self.duration_s:
            return False
        return self.requests is None or self.arrived < self.requests


def start_workload(
    env: simpy.Environment, scenario: Any, submit: Submit, domains_mix: np.ndarray
) -> ArrivalBudget:
    """Start the arrival processes of `scenario.workload`; returns the arrival counter."""
    arrivals = scenario.workload.arrivals
    budget = ArrivalBudget(scenario.horizon.duration_s, scenario.horizon.requests)
    source = RequestSource(scenario, domains_mix)
    rng = stream(scenario.seed, "arrivals")
    if isinstance(arrivals, PoissonArrivals):
        env.process(open_loop(env, rng, arrivals.rate_per_s, source, submit, budget))
    elif isinstance(arrivals, ClosedLoopArrivals):
        for user in range(arrivals.users):
            think_rng = stream(scenario.seed, "think", user)
            env.process(closed_loop_user(env, think_rng, arrivals.think_s, source, submit, budget))
    else:
        from traces.replay import start_replay

        start_replay(env, scenario, arrivals, submit, budget, source)
    return budget


def open_loop(
    env: simpy.Environment, rng: np.random.Generator, rate_per_s: float,
    source: RequestSource, submit: Submit, budget: ArrivalBudget,
) -> Generator[simpy.Event, Any, None]:
    """Poisson arrivals: exponential gaps with mean 1/rate, no cap on gap length."""
    while True:
        yield env.timeout(rng.exponential(1.0 / rate_per_s))
        if not budget.allows(env.now):
            return
        budget.arrived += 1
        submit(*source.next())


def closed_loop_user(
    env: simpy.Environment, rng: np.random.Generator, think_s: float,
    source: RequestSource, submit: Submit, budget: ArrivalBudget,
) -> Generator[simpy.Event, Any, None]:
    """One user: send, wait for completion, think (exponential, mean think_s), repeat."""
    while budget.allows(env.now):
        budget.arrived += 1
        yield submit(*source.next())
        if think_s > 0:
            yield env.timeout(rng.exponential(think_s))
