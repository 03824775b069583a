"""Analytic cases keep the simulator honest: closed loop with a linear profile, and M/D/1."""

from __future__ import annotations

import numpy as np
from scipy import stats

from simulator.engine.simulation import simulate
from simulator.scenario import load_scenario
from tests.conftest import SHARED, make_scenario


def test_closed_loop_linear_matches_formula():
    scenario = load_scenario(SHARED / "scenarios" / "contract-closed-loop-linear.yaml")
    summary = simulate(scenario).summary
    users, p = 32, 0.8
    tau = 1 + p + p**2 + p**3
    expected = users * tau / (0.010 + users * 4 * 0.00005)
    assert abs(summary["throughput_tokens_per_s"] / expected - 1) < 0.01
    assert abs(summary["mean_accepted_per_step"] / tau - 1) < 0.01
    assert summary["mean_verify_tokens_per_request_step"] == 4.0


def md1_waits(seed: int, rate: float, service_s: float) -> float:
    """Mean wait in queue of one replica serving one request at a time in a constant time."""
    scenario = make_scenario(
        seed=seed,
        horizon={"duration_s": 1200, "warmup_s": 100},
        hardware={"profile": {"kind": "linear", "base_ms": service_s * 1000, "per_token_ms": 0.0}},
        engine={"max_batch_requests": 1, "prefill": {"mode": "disaggregated", "tokens_per_s": 1e15}},
        drafter={"family": "none", "block_size": 0},
        policy={"name": "none", "params": {}},
        workload={"arrivals": {"kind": "poisson", "rate_per_s": rate},
                  "prompt_tokens": {"kind": "fixed", "value": 1}, "output_tokens": {"kind": "fixed", "value": 2}},
    )
    req = simulate(scenario).requests
    measured = req[(req["arrival_s"] > 100) & req["admitted_s"].notna()]
    return float((measured["admitted_s"] - measured["first_token_s"]).mean())


def test_open_loop_single_replica_is_md1():
    rate, service_s = 6.0, 0.1
    rho = rate * service_s
    expected = rho * service_s / (2 * (1 - rho))  # Pollaczek–Khinchine, deterministic service
    waits = np.array([md1_waits(seed, rate, service_s) for seed in range(12)])
    half = stats.t.ppf(0.995, waits.size - 1) * waits.std(ddof=1) / np.sqrt(waits.size)
    assert abs(waits.mean() - expected) <= half, (waits.mean(), expected, half)
    assert half < 0.25 * expected  # the interval is tight enough to mean something
