"""Replicas simulated independently: refused where inexact by construction, equal in distribution for random
routing; a fleet sampled by k of its replicas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.study.split import (
    replica_seed,
    simulate_sampled,
    simulate_split,
    split_scenarios,
)
from tests.conftest import make_scenario
from tests.test_prefill_pool import pool_scenario

CLUSTER = {"cluster": {"replicas": 4, "router": "random"}, "horizon": {"duration_s": 12, "warmup_s": 2},
           "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 24},
                        "prompt_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.5, "max": 2000},
                        "output_tokens": {"kind": "lognormal", "median": 50, "sigma": 0.5, "max": 400}}}


def test_each_replica_gets_its_own_seed_and_a_thinned_stream() -> None:
    scenario = make_scenario(seed=3, **CLUSTER)
    parts = split_scenarios(scenario)
    assert [p.seed for p in parts] == [replica_seed(3, i) for i in range(4)]
    assert len({p.seed for p in parts}) == 4 and all(p.cluster.replicas == 1 for p in parts)
    assert all(p.workload.arrivals.rate_per_s == 6 for p in parts)


def test_the_split_run_is_conserved_and_does_not_depend_on_workers() -> None:
    scenario = make_scenario(seed=3, **CLUSTER)
    one, two = simulate_split(scenario, workers=1), simulate_split(scenario, workers=2)
    pd.testing.assert_frame_equal(one.requests, two.requests)
    s = one.summary
    assert s["requests_arrived"] == s["requests_completed"] + s["requests_running"] + s["requests_rejected"]
    assert sorted(one.requests["replica"].unique()) == [0, 1, 2, 3] and s["gpus"] == 4
    assert one.requests["arrival_s"].is_monotonic_increasing


@pytest.mark.slow("a statistical check: long or many simulations")
def test_random_routing_split_or_whole_agrees_within_intervals() -> None:
    figures = ("throughput_tokens_per_s", "tps_user_mean", "ttft_p50_s")
    whole = [simulate(make_scenario(seed=seed, **CLUSTER)).summary for seed in range(6)]
    split = [simulate_split(make_scenario(seed=seed, **CLUSTER)).summary for seed in range(6)]
    for figure in figures:
        a, b = np.array([r[figure] for r in whole]), np.array([r[figure] for r in split])
        assert stats.ttest_ind(a, b, equal_var=False).pvalue > 0.01, (figure, a.mean(), b.mean())


@pytest.mark.parametrize(("changes", "message"), [
    ({"workload": {"arrivals": {"kind": "closed_loop", "users": 8, "think_s": 1.0}}}, "needs Poisson arrivals"),
    ({"horizon": {"requests": 100, "duration_s": None}}, "needs horizon.duration_s"),
])
def test_inexact_splits_are_refused_in_one_line(changes: dict, message: str) -> None:
    with pytest.raises(SpecplanError, match=message) as err:
        split_scenarios(make_scenario(**{**CLUSTER, **changes}))
    assert "\n" not in str(err.value)


def test_a_prefill_pool_is_not_split() -> None:
    with pytest.raises(SpecplanError, match="shared by every decode replica"):
        split_scenarios(pool_scenario({"profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.0}}))


def test_a_sampled_fleet_is_its_sample_with_the_fleets_totals() -> None:
    # 16 replicas at 96 req/s sampled by 4: exactly CLUSTER's 4 replicas at 24 req/s split, as 16
    fleet = make_scenario(seed=3, **{**CLUSTER, "cluster": {"replicas": 16, "router": "random"},
                                     "workload": {**CLUSTER["workload"], "arrivals": {"kind": "poisson",
                                                                                      "rate_per_s": 96}}})
    sampled, part = simulate_sampled(fleet, 4), simulate_split(make_scenario(seed=3, **CLUSTER))
    pd.testing.assert_frame_equal(sampled.requests, part.requests)
    s, p = sampled.summary, part.summary
    assert (s["replicas"], s["gpus"], s["replicas_simulated"]) == (16, 16, 4)
    for key in ("tps_user_p10", "ttft_p99_s", "throughput_tokens_per_s_per_gpu", "mean_step_ms"):
        assert s[key] == p[key]
    assert s["throughput_tokens_per_s"] == pytest.approx(4 * p["throughput_tokens_per_s"])
    assert s["requests_arrived"] == 4 * p["requests_arrived"]
    assert s["throughput_tokens_per_s"] == pytest.approx(16 * s["throughput_tokens_per_s_per_gpu"])


@pytest.mark.slow("a statistical check: long or many simulations")
def test_a_sampled_fleet_agrees_with_the_whole_one_within_intervals() -> None:
    figures = ("throughput_tokens_per_s", "tps_user_mean", "ttft_p50_s")
    whole = [simulate(make_scenario(seed=seed, **CLUSTER)).summary for seed in range(6)]
    sampled = [simulate_sampled(make_scenario(seed=seed, **CLUSTER), 2).summary for seed in range(6)]
    for figure in figures:
        a, b = np.array([r[figure] for r in whole]), np.array([r[figure] for r in sampled])
        assert stats.ttest_ind(a, b, equal_var=False).pvalue > 0.01, (figure, a.mean(), b.mean())
