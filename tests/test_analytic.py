"""Analytic cases keep the simulator honest: closed loop with a linear profile, and M/D/1."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario
from tests.conftest import SHARED, make_scenario


def ci99(samples: np.ndarray) -> tuple[float, float]:
    half = stats.t.ppf(0.995, samples.size - 1) * samples.std(ddof=1) / np.sqrt(samples.size)
    return samples.mean() - half, samples.mean() + half


@pytest.mark.slow("a statistical check: long or many simulations")
def test_closed_loop_linear_matches_formula():
    """users · E[τ] / T(users · (1 + ℓ)), every parameter read from the contract scenario itself."""
    path = SHARED / "scenarios" / "contract-closed-loop-linear.yaml"
    scenario = load_scenario(path)
    users = scenario.workload.arrivals.users
    curve = np.asarray(scenario.drafter.acceptance.per_position["chat"])
    length = scenario.policy.params["length"]
    profile = scenario.hardware.profile
    tau = 1 + np.cumprod(curve[:length]).sum()
    step_s = (profile.base_ms + profile.per_token_ms * users * (1 + length)) / 1000
    expected = users * tau / step_s
    runs = [simulate(load_scenario(path, seed=seed)).summary for seed in range(5)]
    lo, hi = ci99(np.array([r["throughput_tokens_per_s"] for r in runs]))
    assert 0.99 * expected < lo and hi < 1.01 * expected, (lo, hi, expected)
    lo, hi = ci99(np.array([r["mean_accepted_per_step"] for r in runs]))
    assert 0.99 * tau < lo and hi < 1.01 * tau
    assert all(r["mean_verify_tokens_per_request_step"] == 1 + length for r in runs)


def md1_waits(seed: int, rate: float, service_s: float) -> float:
    """Mean wait in queue of one replica serving one request at a time in a constant time (one decode step
    emits a request's one token)."""
    scenario = make_scenario(
        seed=seed,
        horizon={"duration_s": 1200, "warmup_s": 100},
        hardware={"profile": {"kind": "linear", "base_ms": service_s * 1000, "per_token_ms": 0.0}},
        engine={"max_batch_requests": 1, "prefill": {"mode": "disaggregated", "tokens_per_s": 1e15}},
        drafter={"family": "none", "block_size": 0},
        policy={"name": "none", "params": {}},
        workload={"arrivals": {"kind": "poisson", "rate_per_s": rate},
                  "prompt_tokens": {"kind": "fixed", "value": 1}, "output_tokens": {"kind": "fixed", "value": 1}},
    )
    req = simulate(scenario).requests
    measured = req[(req["arrival_s"] > 100) & req["admitted_s"].notna()]
    return float(measured["ttft_decode_wait_s"].mean())   # prefill takes no time: the wait is the queue's


@pytest.mark.slow("a statistical check: long or many simulations")
def test_open_loop_single_replica_is_md1():
    rate, service_s = 6.0, 0.1
    rho = rate * service_s
    expected = rho * service_s / (2 * (1 - rho))  # Pollaczek–Khinchine, deterministic service
    waits = np.array([md1_waits(seed, rate, service_s) for seed in range(12)])
    half = stats.t.ppf(0.995, waits.size - 1) * waits.std(ddof=1) / np.sqrt(waits.size)
    assert abs(waits.mean() - expected) <= half, (waits.mean(), expected, half)
    assert half < 0.25 * expected  # the interval is tight enough to mean something
