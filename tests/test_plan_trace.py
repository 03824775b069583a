"""Plans on a user's own traffic: a trace grown by rate_scale (its burstiness and lengths kept) is planned
like any demand, and at k times the trace's rate the answer is the closed form's at k times the rate."""

from __future__ import annotations

import copy

import numpy as np

from specplan.simulator.scenario.study import parse_bound
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.target import Target
from tests.test_planner import KNOWN, OUTPUT_TOKENS, RATE, SLA, closed_form_replicas


def poisson_trace(path, rate_per_s: float, seconds: float, seed: int = 11):
    """A csv trace of Poisson arrivals (what a user's log of a steady service looks like), fixed lengths."""
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / rate_per_s, int(rate_per_s * seconds * 1.2)))
    times = times[times < seconds]
    rows = [f"{t:.6f},16,{OUTPUT_TOKENS}" for t in times]
    path.write_text("timestamp,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return path


def test_a_trace_grown_k_times_plans_as_k_times_its_rate(tmp_path):
    raw = copy.deepcopy(KNOWN)
    raw["sweep"]["variants"] = raw["sweep"]["variants"][1:]  # c = 0.5 ms: 2 replicas at RATE
    trace = poisson_trace(tmp_path / "ours.csv", RATE / 4, 60.0)
    raw["workload"] = {"arrivals": {"kind": "trace", "path": str(trace), "format": "csv"}}
    bounds = (parse_bound(f"tps_user_p50>={SLA:g}"),)
    plan = plan_capacity(raw, Target("rate_scale", 4.0, bounds, seeds=2), RunOptions(workers=1))
    (variant,) = plan.variants
    assert variant.replicas == closed_form_replicas(0.5) == 2
    run = variant.chosen.runs[0]
    arrived_per_s = run["requests_arrived"] / run["simulated_s"]
    assert abs(arrived_per_s - RATE) < 0.15 * RATE  # four superposed copies of the trace
    today = plan_capacity(raw, Target("rate_scale", 1.0, bounds, seeds=1), RunOptions(workers=1))
    assert today.variants[0].replicas == 1
