"""Policies inside the engine: short scenarios, replicated where the claim is statistical."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specplan.policies.base import OracleView, StepView
from specplan.policies.dspark import DSparkGreedy
from specplan.policies.oracle import Oracle
from specplan.policies.registry import POLICIES
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario, scenario_from_mapping
from tests.conftest import BASE, REPO, SHARED, merged

DSPARK = {"family": "dspark", "block_size": 6,
          "acceptance": {"per_position": {"chat": [0.8] * 6, "math": [0.93, 0.9, 0.88, 0.86, 0.84, 0.82]},
                         "domains": {"chat": 0.5, "math": 0.5}, "request_sigma": 0.5, "token_sigma": 0.5},
          "confidence": {"kind": "perfect"}, "latency": {"kind": "fixed", "ms": 0.5}}
PARAMS = {"length-schedule": {"schedule": {4: 4, 16: 2}}}
SAWTOOTH = SHARED / "scenarios" / "contract-sawtooth.yaml"


def with_policy(policy: str, params: dict, **changes):
    """The shared base scenario with `changes` merged in and the policy section replaced."""
    raw = merged(BASE, changes)
    raw["policy"] = {"name": policy, "params": params}
    return scenario_from_mapping(raw, REPO)


def short_run(policy: str, seed: int = 7, **changes):
    spec = {"drafter": DSPARK, "horizon": {"duration_s": 4, "warmup_s": 0.5}, "seed": seed, **changes}
    return simulate(with_policy(policy, PARAMS.get(policy, {}), **spec))


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_runs_in_the_engine(name):
    result = short_run(name)
    summary, steps = result.summary, result.steps
    assert summary["requests_completed"] > 0
    assert summary["policy_label"] == POLICIES[name].label()
    decode = steps[steps["decode_requests"] > 0]
    per_request = (decode["verify_tokens"] - decode["prefill_tokens"]) / decode["decode_requests"]
    assert per_request.between(1, 1 + DSPARK["block_size"]).all()
    if name == "none":
        assert per_request.eq(1).all()


def test_the_engine_hides_the_scheduling_overhead_only_for_async():
    engine = {"max_batch_requests": 16, "kv_capacity_tokens": 1_000_000,
              "prefill": {"mode": "disaggregated", "tokens_per_s": 20_000}, "scheduling_overhead_ms": 0.3}
    sync = short_run("dspark-greedy", engine=engine).steps
    hidden = short_run("dspark-async", engine=engine).steps
    assert (sync["overhead_ms"] == 0.3).all()
    assert (hidden["overhead_ms"] == 0.0).all()


def test_only_the_oracle_is_handed_the_truth(monkeypatch):
    seen: dict[str, set] = {"greedy": set(), "oracle": set()}

    class SpyGreedy(DSparkGreedy):
        def decide(self, view):
            seen["greedy"].add(type(view))
            return super().decide(view)

    class SpyOracle(Oracle):
        def decide(self, view):
            seen["oracle"].add(type(view))
            return super().decide(view)

    monkeypatch.setitem(POLICIES, "dspark-greedy", SpyGreedy)
    monkeypatch.setitem(POLICIES, "oracle", SpyOracle)
    short_run("dspark-greedy")
    short_run("oracle")
    assert seen == {"greedy": {StepView}, "oracle": {OracleView}}


def mean_verify(policy: str, users: int, seed: int) -> float:
    result = short_run(
        policy, seed=seed,
        hardware={"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.2}},
        engine={"max_batch_requests": 64, "kv_capacity_tokens": 4_000_000,
                "prefill": {"mode": "disaggregated", "tokens_per_s": 1e9}},
        workload={"arrivals": {"kind": "closed_loop", "users": users, "think_s": 0.0},
                  "prompt_tokens": {"kind": "fixed", "value": 100},
                  "output_tokens": {"kind": "fixed", "value": 60}},
        horizon={"duration_s": 2.5, "warmup_s": 0.5},
    )
    return result.summary["mean_verify_tokens_per_request_step"]


@pytest.mark.slow("a statistical check: long or many simulations")
@pytest.mark.parametrize("policy", ["dspark-greedy", "dspark-global", "dspark-async"])
def test_verification_length_falls_as_load_rises(policy):
    """Four replications at 2 and at 48 concurrent users; a one-sided Welch test at 1%."""
    light = [mean_verify(policy, 2, seed) for seed in range(4)]
    heavy = [mean_verify(policy, 48, seed) for seed in range(4)]
    test = stats.ttest_ind(light, heavy, equal_var=False, alternative="greater")
    assert test.pvalue < 0.01, (light, heavy)


def sawtooth(policy: str, seed: int, *overrides: str):
    scenario = load_scenario(SAWTOOTH, [f"policy.name={policy}", "horizon.warmup_s=3", *overrides], seed=seed)
    return simulate(scenario)


@pytest.mark.slow("a statistical check: long or many simulations")
def test_contract_sawtooth_async_beats_greedy():
    """Paired over 5 seeds (the same workload per seed): the 99% CI of async's relative gain is above 0."""
    gains = []
    for seed in range(1, 6):
        greedy = sawtooth("dspark-greedy", seed, "horizon.duration_s=30").summary["throughput_tokens_per_s"]
        asynchronous = sawtooth("dspark-async", seed, "horizon.duration_s=30").summary["throughput_tokens_per_s"]
        gains.append(asynchronous / greedy - 1)
    gains_arr = np.array(gains)
    half = stats.t.ppf(0.995, gains_arr.size - 1) * gains_arr.std(ddof=1) / np.sqrt(gains_arr.size)
    assert gains_arr.mean() - half > 0, gains


def test_saturated_sawtooth_greedy_is_trapped_async_and_global_cross_single_seed_smoke():
    """16 users without think time: B could reach 128, the first cliff is at 64 → 65 tokens.

    One seed, with margins wide enough (5% throughput, half the steps) to hold for any seed.
    """
    busy = ("horizon.duration_s=12", "workload.arrivals.think_s=0")
    runs = {p: sawtooth(p, 1, *busy) for p in ("dspark-greedy", "dspark-global", "dspark-async")}
    crossed = {p: float((r.steps["verify_tokens"] > 64).mean()) for p, r in runs.items()}
    assert crossed["dspark-greedy"] == 0.0
    assert crossed["dspark-global"] > 0.5 and crossed["dspark-async"] > 0.5
    tput = {p: r.summary["throughput_tokens_per_s"] for p, r in runs.items()}
    assert tput["dspark-async"] > 1.05 * tput["dspark-greedy"]
    assert np.isclose(tput["dspark-async"], tput["dspark-global"], rtol=0.05)


def mean_tps(bypass: bool, seed: int) -> tuple[float, float]:
    """One user at a time, hard requests (acceptance 0.1): drafting costs 4 ms on a 10 ms step.

    Drafting then returns about 0.11 tokens per step for 40% more step time: skipping it pays.
    """
    hard = {**DSPARK, "acceptance": {"per_position": {"chat": [0.1] * 6}, "domains": {"chat": 1.0},
                                     "request_sigma": 0.3, "token_sigma": 0.3},
            "latency": {"kind": "fixed", "ms": 4.0}}
    params = {"bypass": {"acceptance_below": 0.35}} if bypass else {}
    result = simulate(with_policy(
        "dspark-async", params, drafter=hard, seed=seed,
        horizon={"duration_s": 3, "warmup_s": 0.5},
        workload={"arrivals": {"kind": "closed_loop", "users": 1, "think_s": 0.0},
                  "prompt_tokens": {"kind": "fixed", "value": 100},
                  "output_tokens": {"kind": "fixed", "value": 100}}))
    steps = result.steps
    return result.summary["throughput_tokens_per_s"], float((steps["drafting_requests"] == 0).mean())


def test_bypass_pays_for_hard_requests_at_low_concurrency():
    plain = [mean_tps(False, seed) for seed in range(3)]
    bypass = [mean_tps(True, seed) for seed in range(3)]
    assert all(skipped == 0.0 for _, skipped in plain)
    assert all(skipped > 0.5 for _, skipped in bypass)
    assert np.mean([t for t, _ in bypass]) > 1.05 * np.mean([t for t, _ in plain])
