"""Workload → request arrivals in a SimPy environment.

`start_workload(env, scenario, submit, domains_mix)` starts the processes
that create requests and hand them to `submit(prompt_tokens, output_tokens,
domain) -> Event`, an event that fires when the request completes or is
rejected (closed-loop users wait on it). Arrivals stop at the horizon's
duration or after its `requests` count (`ArrivalHorizon`).

Open-loop processes (arrivals.py) give arrival times; closed-loop users
think between requests; traces are replayed by replay.py; agent sessions
run on lanes (lanes.py), which end the run themselves. Each request's
domain and lengths come from their own named streams (`RequestSource`), so
the arrival process and the lengths never share draws. `domain` indexes the
acceptance model's domains: the entries of drafter.acceptance.domains with
a positive share, in order.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Generator, Iterator
from typing import Any

import numpy as np
import simpy

from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.streams import stream
from specplan.simulator.scenario import Scenario
from specplan.traces.arrivals import ThinkTime, arrival_process
from specplan.traces.bench_client import BenchRun, start_bench_client
from specplan.traces.draws import ScalarDraws
from specplan.traces.lanes import Lanes, start_lanes
from specplan.traces.lengths import LengthPair
from specplan.traces.replay import start_replay
from specplan.traces.spec import (
    BenchClientArrivals,
    ClosedLoopArrivals,
    MixtureLength,
    SessionArrivals,
    TraceArrivals,
)

Submit = Callable[..., simpy.Event]  # (prompt, output, domain[, prompt block hashes[, conversation key]]) -> done event


def active_domains(scenario: Scenario) -> tuple[str, ...]:
    """The acceptance model's domains: drafter.acceptance.domains with share > 0, in order."""
    return tuple(d for d, share in scenario.drafter.acceptance.domains.items() if share > 0)


class RequestSource:
    """Draws the per-request attributes (prompt, output, domain) from named streams.

    With a mixture, each domain has its own component and streams; without
    one, every domain shares one prompt/output sampler.
    """

    def __init__(self, scenario: Scenario, domains_mix: np.ndarray) -> None:
        seed = scenario.seed
        spec = scenario.workload
        self.domain_names = active_domains(scenario)
        if len(self.domain_names) != len(domains_mix):
            raise ValueError(f"domain mix has {len(domains_mix)} shares for domains {self.domain_names}")
        self.domain_draws = ScalarDraws(stream(seed, "domains").random)
        self.cum_mix = np.cumsum(domains_mix)
        self.cum_mix_list = self.cum_mix.tolist()  # scalar draws: bisect on a list beats numpy per call
        mixture = isinstance(spec.prompt_tokens, MixtureLength) or isinstance(spec.output_tokens, MixtureLength)
        if mixture:
            self.pairs = [self.domain_pair(spec, seed, d) for d in self.domain_names]
        else:
            shared = LengthPair(spec.prompt_tokens, spec.output_tokens,
                                stream(seed, "lengths.prompt"), stream(seed, "lengths.output"))
            self.pairs = [shared] * len(self.domain_names)

    @staticmethod
    def domain_pair(spec: Any, seed: int, domain: str) -> LengthPair:
        key = DOMAINS.index(domain)
        return LengthPair(component(spec.prompt_tokens, domain), component(spec.output_tokens, domain),
                          stream(seed, "lengths.prompt", key), stream(seed, "lengths.output", key))

    def next_domain(self) -> int:
        cum = self.cum_mix_list
        draw = self.domain_draws.next() * cum[-1]
        return min(bisect.bisect_right(cum, draw), len(cum) - 1)

    def lengths(self, domain: int) -> tuple[int, int]:
        return self.pairs[domain].next()

    def next(self) -> tuple[int, int, int]:
        domain = self.next_domain()
        prompt, output = self.lengths(domain)
        return prompt, output, domain


def component(spec: Any, domain: str) -> Any:
    return spec.components[domain] if isinstance(spec, MixtureLength) else spec


class ArrivalHorizon:
    """Counts arrivals against the horizon: a time limit or a request cap.

    A trace replay attaches itself as `replay`; `summary_counts()` then
    reports what its reader skipped and when the trace ran out before the
    horizon (`ran_out_s`, where the measurement window ends; None when it
    did not). A benchmark client attaches its `BenchRun` as `bench`
    and sets the cap to all its requests, with no time limit: the run ends
    when the last prompt completes.
    """

    def __init__(self, duration_s: float | None, requests: int | None) -> None:
        self.duration_s = duration_s
        self.requests = requests
        self.arrived = 0
        self.replay: Any = None
        self.ran_out_s: float | None = None
        self.bench: BenchRun | None = None
        self.lanes: Lanes | None = None   # session lanes: their end event closes the run

    def allows(self, now: float) -> bool:
        if self.duration_s is not None and now >= self.duration_s:
            return False
        return self.requests is None or self.arrived < self.requests

    def summary_counts(self) -> dict[str, Any]:
        if self.replay is None:
            return {}
        return {**self.replay.counts(), "trace_ran_out_s": self.ran_out_s}


def start_workload(
    env: simpy.Environment, scenario: Scenario, submit: Submit, domains_mix: np.ndarray
) -> ArrivalHorizon:
    """Start the arrival processes of `scenario.workload`; returns the arrival counter."""
    arrivals = scenario.workload.arrivals
    budget = ArrivalHorizon(scenario.horizon.duration_s, scenario.horizon.requests)
    source = RequestSource(scenario, domains_mix)
    if isinstance(arrivals, ClosedLoopArrivals):
        think = ThinkTime(arrivals.think_s, arrivals.think_cv)
        for user in range(arrivals.users):
            think_rng = stream(scenario.seed, "think", user)
            env.process(closed_loop_user(env, think_rng, think, source, submit, budget))
    elif isinstance(arrivals, TraceArrivals):
        start_replay(env, functools.partial(stream, scenario.seed), arrivals, submit, budget, source)
    elif isinstance(arrivals, SessionArrivals):
        assert scenario.horizon.duration_s is not None  # Scenario.validate: lanes run for a duration
        budget.duration_s = None
        budget.lanes = start_lanes(env, arrivals, functools.partial(stream, scenario.seed), submit,
                                   session_domain(arrivals, source), scenario.horizon.duration_s)
    elif isinstance(arrivals, BenchClientArrivals):
        budget.duration_s, budget.requests = None, arrivals.num_prompts + arrivals.warmup_requests
        budget.bench = start_bench_client(env, arrivals, source.next, counted(submit, budget))
    else:
        times = arrival_process(arrivals).times(stream(scenario.seed, "arrivals"))
        env.process(open_loop(env, times, source, submit, budget))
    return budget


def session_domain(spec: SessionArrivals, source: RequestSource) -> Callable[[], int]:
    """Each session play's domain: the spec's, or one draw from the mix."""
    if spec.domain is None:
        return source.next_domain
    index = source.domain_names.index(spec.domain)
    return lambda: index


def counted(submit: Submit, budget: ArrivalHorizon) -> Submit:
    """`submit` that counts each request as an arrival."""
    def send(prompt: int, output: int, domain: int) -> simpy.Event:
        budget.arrived += 1
        return submit(prompt, output, domain)
    return send


def open_loop(
    env: simpy.Environment, times: Iterator[float], source: RequestSource, submit: Submit,
    budget: ArrivalHorizon,
) -> Generator[simpy.Event, Any, None]:
    """Submit one request at each arrival time (absolute seconds, non-decreasing)."""
    for t in times:
        delay = t - env.now
        if delay > 0:
            yield env.timeout(delay)
        if not budget.allows(env.now):
            return
        budget.arrived += 1
        submit(*source.next())


def closed_loop_user(
    env: simpy.Environment, rng: np.random.Generator, think: ThinkTime,
    source: RequestSource, submit: Submit, budget: ArrivalHorizon,
) -> Generator[simpy.Event, Any, None]:
    """One user: send, wait for completion, think, repeat."""
    pauses = think.pauses(rng)
    while budget.allows(env.now):
        budget.arrived += 1
        yield submit(*source.next())
        pause = pauses()
        if pause > 0:
            yield env.timeout(pause)
