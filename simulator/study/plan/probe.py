"""Judging a probe: one cluster size of a plan, simulated once per seed, against the target.

    result = probe(scenario, target, plan_options, label, store)     a Probe: meets the SLA or not, and why

A cluster of n replicas meets the SLA when, simulated whole (router
included) with `target.seeds` seeds (the scenario's seed, +1, +2, ...), the
mean over seeds of each statistic the SLA bounds meets its bound, and every
seed keeps up with the demand: its backlog of outstanding requests does not
grow over the second half of the measurement window
(specplan.simulator.study.keepup). A run whose horizon is too short to tell
a growing backlog from the ramp-up of an empty cluster, or with too few
completed requests, stops the plan with one line naming the horizon that
would settle it (no answer rather than a wrong one) when it matters: when
its SLA statistics pass, or no request completed at all. A probe whose
completed requests already miss the SLA fails whatever its backlog does.

On agent sessions (`workload.arrivals.kind: sessions`) the measurement
window opens at the lanes' warm-up barrier (`window_start_s`: the summary's
session_window_start_s plus horizon.warmup_s), and the lanes, which wait for
their answers, are judged as a closed loop is: by their backlog alone. A
bound on the sessions' job-level figures (session_wall_*, session_output_
tokens_per_s_*) needs `MIN_SESSIONS` sessions played whole inside each
seed's window; with fewer, when that bound decides the probe, the plan
stops with one line asking for a longer horizon.

A probe of more than `plan_options.replica_sample` replicas (default 8) whose
replicas are independent (random routing of Poisson arrivals over a
duration horizon, no shared prefill pool) simulates that many of them at
λ/n each and stands them for all n
(specplan.simulator.study.split.simulate_sampled: exact in distribution,
its cost flat in n); `plan_options.sample_any_router` extends this to the other
routers, where a split run stands in for random routing. Each seed's run
(its summary and keep-up verdict) is kept in a ProbeStore under its point
key, so a re-run reuses it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.scaling import OPEN_LOOP, mean_rate_per_s
from specplan.simulator.scenario.study import SESSION_KEYS, tps_column
from specplan.simulator.study.frontier import ci95
from specplan.simulator.study.keepup import (
    FALLS_BEHIND,
    KEEPS_UP,
    TOO_SHORT,
    judge_backlog,
    seeds_verdict,
)
from specplan.simulator.study.options import PlanOptions
from specplan.simulator.study.plan.probe_store import ProbeStore
from specplan.simulator.study.plan.target import Target
from specplan.simulator.study.points import normalise, point_key
from specplan.simulator.study.split import simulate_sampled


@dataclass(frozen=True, kw_only=True)
class Probe:
    """A variant at `replicas`, simulated once per seed; figures are means over seeds."""

    replicas: int
    meets_sla: bool
    tps_user: float                  # the target's statistic of tokens/s/user
    tps_user_ci95: float             # its Student-t 95% half-width over seeds (NaN for one seed)
    throughput_per_gpu: float
    ttft_p99_s: float
    backlog_growth: float            # the worst seed's
    gpus: int                        # every GPU of the cluster, a prefill pool's included
    keep_up: str = KEEPS_UP          # the verdict over seeds (specplan.simulator.study.keepup.seeds_verdict)
    keep_up_reason: str = ""         # why, when it is not "keeps up"
    runs: tuple[dict[str, Any], ...] = ()
    stats: dict[str, tuple[float, float]] = field(default_factory=dict)  # SLA key → (mean, 95% half-width)
    simulated: int = 0               # replicas simulated for all of them (`replicas` when simulated whole)

    @property
    def keeps_up(self) -> bool:
        """Every seed kept up ("too short" counts only where the SLA statistic already failed)."""
        return self.keep_up == KEEPS_UP

    def mean(self, key: str) -> float:
        """The mean over seeds of a summary key (NaN where no run has it)."""
        values = [float(r[key]) for r in self.runs if r.get(key) is not None]
        return sum(values) / len(values) if values else math.nan

    def interval(self) -> tuple[float, float]:
        """The Student-t 95% interval over seeds of the SLA statistic (the mean twice for one seed)."""
        half = self.tps_user_ci95 if math.isfinite(self.tps_user_ci95) else 0.0
        return self.tps_user - half, self.tps_user + half


def probe(scenario: Scenario, target: Target, plan_options: PlanOptions, label: str = "",
          store: ProbeStore | None = None, workers: int = 1) -> Probe:
    """Simulate one cluster size once per seed and judge it against the target (a sampled one's
    replicas on `workers` processes)."""
    store = store if store is not None else ProbeStore(None)
    sample = sampled_replicas(scenario, plan_options)
    runs = tuple(seed_run(dataclasses.replace(scenario, seed=scenario.seed + i), store, sample, workers)
                 for i in range(target.seeds))
    stats = {b.key: mean_and_interval(runs, b.key) for b in target.bounds}
    fast_enough = all(b.holds(stats[b.key][0]) for b in target.bounds)
    keep_up, why = seeds_verdict(runs)
    undecided = [r for r in runs if r["keep_up_verdict"] == TOO_SHORT
                 and (fast_enough or any(r.get(b.key) is None for b in target.bounds))]
    if undecided and keep_up != FALLS_BEHIND:
        raise SpecplanError(too_short(scenario, label, undecided[0]))
    few = few_sessions(runs, target)
    if few is not None and keep_up != FALLS_BEHIND:
        raise SpecplanError(too_few_sessions(scenario, label, few))
    tps, tps_half = mean_and_interval(runs, tps_column(target.statistic))
    return Probe(replicas=scenario.cluster.replicas, meets_sla=bool(fast_enough and keep_up == KEEPS_UP),
                 tps_user=tps, tps_user_ci95=tps_half,
                 throughput_per_gpu=mean_and_interval(runs, "throughput_tokens_per_s_per_gpu")[0],
                 ttft_p99_s=mean_and_interval(runs, "ttft_p99_s")[0],
                 backlog_growth=max((float(r["keep_up_growth"]) for r in runs if r["keep_up_growth"] is not None),
                                    default=math.nan),
                 gpus=int(runs[0]["gpus"]), keep_up=keep_up, keep_up_reason=why, runs=runs, stats=stats,
                 simulated=sample or scenario.cluster.replicas)


def mean_and_interval(runs: tuple[dict[str, Any], ...], key: str) -> tuple[float, float]:
    """The mean over seeds of a summary key and its Student-t 95% half-width (NaN for one seed)."""
    values = pd.Series([r.get(key) for r in runs], dtype=float)
    return float(values.mean()), ci95(values)


def sampled_replicas(scenario: Scenario, plan_options: PlanOptions) -> int | None:
    """How many replicas a probe of `scenario` simulates for all of them, None to simulate it whole."""
    sample, n = plan_options.replica_sample, scenario.cluster.replicas
    if not sample or n <= sample or scenario.cluster.prefill is not None:
        return None
    exact = scenario.cluster.router == "random" or plan_options.sample_any_router
    independent = scenario.workload.arrivals.KIND == "poisson" and scenario.horizon.duration_s is not None
    return sample if exact and independent else None


def seed_run(scenario: Scenario, store: ProbeStore, sample: int | None = None, workers: int = 1) -> dict[str, Any]:
    """One seed's summary with its keep-up verdict: reused from the store, or simulated and stored
    (whole, or as `sample` of its replicas, under a key that says so)."""
    key = point_key(scenario) if sample is None else hashlib.sha256(
        f"{point_key(scenario)}:sample={sample}".encode()).hexdigest()
    stored = store.get(key)
    if stored is not None and "ttft_unqueued_p99_s" in stored:  # a record of this probe (older ones re-run)
        return stored
    result = (simulate(scenario, itl=True) if sample is None
              else simulate_sampled(scenario, sample, workers=workers, itl=True))
    start = window_start_s(scenario, result.summary)
    backlog = judge_backlog(result.requests, start, start + float(result.summary["window_s"]), result.steps,
                            offered_rate_per_s(scenario, sample), scenario.workload.arrivals.KIND in OPEN_DEMAND)
    if start != scenario.horizon.warmup_s:  # the horizon counts from the lanes' barrier: so does what settles it
        backlog = dataclasses.replace(backlog, needed_duration_s=float(
            math.ceil(backlog.needed_duration_s - start + scenario.horizon.warmup_s)))
    summary = normalise({**result.summary, **backlog.fields(), **unqueued_ttft(result.requests, start),
                         "key": key, "seed": scenario.seed})
    store.put(key, summary, scenario)
    return summary


def window_start_s(scenario: Scenario, summary: dict[str, Any]) -> float:
    """Where a run's measurement window opens: after horizon.warmup_s, counted from the lanes' warm-up barrier
    on agent sessions (session_window_start_s; specplan.traces.lanes), from t = 0 otherwise."""
    barrier = summary.get("session_window_start_s")
    return scenario.horizon.warmup_s + (float(barrier) if barrier is not None else 0.0)


def unqueued_ttft(requests: pd.DataFrame, warmup_s: float) -> dict[str, float]:
    """TTFT p50 / p90 / p99 of the measured requests without their first part, the wait before prefill starts
    (a prefill pool's queue): what the TTFT bounds would read if that queue were empty."""
    measured = requests[requests["arrival_s"] >= warmup_s]
    if "ttft_queue_s" not in measured:
        return {}
    rest = (measured["ttft_s"] - measured["ttft_queue_s"].fillna(0.0)).to_numpy(dtype=float)
    rest = rest[np.isfinite(rest)]
    return {f"ttft_unqueued_p{q}_s": float(np.percentile(rest, q)) if rest.size else math.nan for q in (50, 90, 99)}


MIN_SESSIONS = 10  # sessions played whole in a window, at least, to judge a bound on their wall time or rate
OPEN_DEMAND = (*OPEN_LOOP, "trace")  # arrivals that do not wait for answers (not closed loops, not session
                                    # lanes): they offer a demand of their own
STATIONARY = ("poisson", "gamma")   # renewal arrivals, whose mean rate any stretch of the run offers


def offered_rate_per_s(scenario: Scenario, sample: int | None) -> float | None:
    """The mean arrival rate the simulated replicas were offered (a sample's share of it), for stationary
    arrivals; None for the others (the keep-up judge reads their offer off the run's own arrivals)."""
    arrivals = scenario.workload.arrivals
    if arrivals.KIND not in STATIONARY:
        return None
    share = 1.0 if sample is None else sample / scenario.cluster.replicas
    return mean_rate_per_s(arrivals) * share


def few_sessions(runs: tuple[dict[str, Any], ...], target: Target) -> dict[str, Any] | None:
    """The first run whose session bounds rest on fewer than `MIN_SESSIONS` sessions played whole in its
    window, when that decides the probe: every other bound holds (else the probe fails on those anyway), and
    no wall-time bound already fails (the sessions a window holds whole are its shorter ones, so one that
    fails on them fails on all)."""
    sessions = [b for b in target.bounds if b.key in SESSION_KEYS]
    others = [b for b in target.bounds if b.key not in SESSION_KEYS]
    means = {b.key: mean_and_interval(runs, b.key)[0] for b in target.bounds}
    failed = [b for b in target.bounds if math.isfinite(means[b.key]) and not b.holds(means[b.key])]
    if not sessions or any(not b.holds(means[b.key]) for b in others) or \
            any(b.op == "<=" and b.key in SESSION_KEYS for b in failed):
        return None
    return next((r for r in runs if (r.get("sessions_completed") or 0) < MIN_SESSIONS), None)


def too_few_sessions(scenario: Scenario, label: str, run: dict[str, Any]) -> str:
    """The one line a plan stops with when too few sessions ran whole inside a run's window to judge a session
    bound (a session's wall time is read only over sessions that started after the barrier and ended by the end)."""
    wall = run.get("session_wall_p50_s")
    seen = f" (their median wall time {wall:.0f} s)" if wall is not None else ""
    return (f"{label}: {scenario.cluster.replicas} replica(s), seed {run['seed']}: only "
            f"{run.get('sessions_completed') or 0} sessions ran whole inside the measurement window{seen}, at "
            f"least {MIN_SESSIONS} are needed to judge a bound on their job-level figures; raise horizon.duration_s "
            f"(now {scenario.horizon.duration_s:g} s) to several session lengths")


def too_short(scenario: Scenario, label: str, run: dict[str, Any]) -> str:
    """The one line a plan stops with when a run cannot say whether its cluster keeps up: the horizon that
    would settle it, or, when the trace ran out before the horizon, that no horizon will."""
    h = scenario.horizon
    who = f"{label}: {scenario.cluster.replicas} replica(s), seed {run['seed']}: "
    ran_out = run.get("trace_ran_out_s")
    if ran_out is not None:
        return (f"{who}the trace ran out at {ran_out:g} s ({run['requests_arrived']} requests), too soon to judge "
                f"whether the cluster keeps up ({run['keep_up_reason']}); a longer horizon adds no request: give "
                "the trace a longer window (workload.arrivals.start_s, duration_s) or a longer trace")
    span = f"horizon.duration_s {h.duration_s:g}" if h.duration_s is not None else f"horizon.requests {h.requests}"
    return (f"{who}{span} is too short to judge whether the cluster keeps up ({run['keep_up_reason']}); raise "
            f"horizon.duration_s to at least {run['keep_up_needed_duration_s']:g} (warm-up {h.warmup_s:g} s)")
