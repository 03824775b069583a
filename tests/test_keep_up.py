"""The keep-up judge on clusters that hold hundreds of requests at once (issue 39, item 1).

A DeepSeek-V4-Flash replica of 256 slots under Poisson 20 req/s serves about
93% of the output tokens/s it is offered (its backlog grows 200 → 744 over
300 s), yet its growth over a minute sits inside the count's noise. The
served share (its tokens/s while requests wait for it, against arrival rate ×
mean output) must keep it from being called "keeps up"; a replica at 12 req/s
must still keep up. Intervals over seeds, never one seed's figure.
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.merge import deep_merge
from specplan.simulator.study.frontier import ci95
from specplan.simulator.study.keepup import (
    FALLS_BEHIND,
    GROWTH_LIMIT,
    KEEPS_UP,
    Backlog,
    judge_backlog,
    seeds_verdict,
)
from tests.conftest import REPO
from tests.test_sweep import write_yaml

KEEPUP = {  # the issue's keepup.yaml
    "name": "v4flash-b200-sglang-chat", "seed": 5,
    "horizon": {"duration_s": 60, "warmup_s": 10},
    "hardware": {"profile": "builtin:b200-deepseek-v4-flash-tp8ep8-sglang", "gpus_per_replica": 8},
    "cluster": {"replicas": 1, "router": "least_loaded"},
    "engine": {"max_batch_requests": 256, "cuda_graph": {"engine": "sglang"},
               "prefill": {"mode": "chunked", "chunk_tokens": 8192, "schedule": "separate",
                           "profile": "builtin:b200-deepseek-v4-flash-tp8ep8-sglang-prefill"}},
    "drafter": {"family": "dspark", "block_size": 5,
                "acceptance": {"preset": "deepseek-v4.1-flash", "domains": {"chat": 1.0}},
                "confidence": {"kind": "model", "overconfidence": 1.5, "noise": 0.4, "calibration": "sts",
                               "calibration_samples": 8000},
                "latency": {"kind": "profile", "path": "builtin:b200-deepseek-v4-flash-tp8ep8-sglang-dspark"}},
    "policy": {"name": "dspark-async"},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 20},
                 "prompt_tokens": {"kind": "lognormal", "median": 2000, "sigma": 0.5, "max": 16000},
                 "output_tokens": {"kind": "lognormal", "median": 500, "sigma": 0.5, "max": 4000}},
    "sla": {"bounds": ["tps_user_p10>=40"]},
    "sweep": {"load": {"rate_per_s": [20]}, "seeds": [5]},
}


def judged(seed: int, duration_s: float, rate_per_s: float = 20.0) -> Backlog:
    raw = deep_merge(KEEPUP, {"seed": seed, "horizon": {"duration_s": duration_s},
                              "workload": {"arrivals": {"rate_per_s": rate_per_s}}})
    result = simulate(scenario_from_mapping(raw, REPO))
    warmup = raw["horizon"]["warmup_s"]
    return judge_backlog(result.requests, warmup, warmup + float(result.summary["window_s"]), result.steps,
                         rate_per_s)


def interval(values: list[float]) -> tuple[float, float]:
    series = pd.Series(values, dtype=float)
    return float(series.mean() - ci95(series)), float(series.mean() + ci95(series))


@pytest.mark.slow("simulates a 256-slot DeepSeek-V4-Flash replica under eight seeds (about 10 s)")
def test_a_replica_serving_93_percent_of_its_offer_is_never_said_to_keep_up_in_a_minute():
    runs = [judged(seed, 60) for seed in range(5, 13)]
    # every seed held requests waiting most of the minute: its engine ran at capacity, and read so
    assert all(b.served is not None and b.served.at_capacity for b in runs)
    _, high = interval([b.served.share for b in runs])
    assert high < 1.0  # over seeds, it serves less than it is offered
    # the count's growth is small (the issue saw 2.7-9.7% of arrivals): alone it could not tell, and the old
    # judge, whose noise term grows with the backlog, called every seed "keeps up"
    assert min(b.growth for b in runs) < 2 * GROWTH_LIMIT
    # a plan probes three seeds and reads them together: no three of these eight call it keeping up
    records = [{**b.fields(), "seed": seed} for seed, b in zip(range(5, 13), runs, strict=True)]
    assert all(seeds_verdict(trio)[0] != KEEPS_UP for trio in itertools.combinations(records, 3))


@pytest.mark.slow("simulates a 256-slot DeepSeek-V4-Flash replica for 150 s under four seeds (about 10 s)")
def test_given_two_and_a_half_minutes_every_seed_finds_it_behind():
    runs = [judged(seed, 150) for seed in range(5, 9)]
    assert all(b.verdict == FALLS_BEHIND for b in runs)
    low, high = interval([b.served.share for b in runs])
    assert high < 1.0 - GROWTH_LIMIT / 2 and low > 0.85  # about 93%: its capacity, not noise


@pytest.mark.slow("simulates a DeepSeek-V4-Flash replica under six seeds (about 6 s)")
def test_a_stable_replica_still_keeps_up():
    runs = [judged(seed, 60, rate_per_s=12.0) for seed in range(5, 11)]
    assert all(b.verdict == KEEPS_UP for b in runs)
    low, high = interval([b.growth for b in runs])
    assert low < 0.0 < high  # over seeds, its backlog does not drift


@pytest.mark.slow("a capacity plan of the DeepSeek-V4-Flash replica at two sizes, three seeds each (about 20 s)")
def test_the_issues_plan_sizes_past_the_replica_that_falls_behind(cli, tmp_path):
    path = write_yaml(tmp_path / "keepup.yaml", KEEPUP)
    for sla in (["--sla", "tps_user_p10>=30"], ["--sla", "tps_user_p10>=30", "--sla", "ttft_p99_s<=5"]):
        # the physics alone: the keep-up verdicts are checked here, not the shipped calibration table's row
        status, out, err = cli("plan", path, "--rate", 20, *sla, "--set", "sweep.variants=[{label: DSpark-5 async}]",
                               "--out", tmp_path / "plan", "--quiet", "--workers", 1, "--uncalibrated")
        assert status == 0, err
        row = next(line for line in out.splitlines() if line.startswith("DSpark-5 async"))
        assert row.split()[2] == "2" and "1: falls behind" in row
        assert "not sure" not in out
    plan_md = (tmp_path / "plan" / "plan.md").read_text()
    assert "its capacity is below its demand" in plan_md  # the one-fewer probe says why it failed
