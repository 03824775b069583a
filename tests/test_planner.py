"""Capacity planner: the replica search, a case with a closed-form answer, the JSON contract."""

from __future__ import annotations

import copy
import json

import pytest

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.study.planner import fewest_replicas, plan_capacity, plan_table
from tests.test_sweep import write_yaml

# No speculation, fixed 100-token answers, instant prefill, a linear step time
# T(B) = a + c·B. Mean field for one replica at arrival rate λ: N requests in
# decode, each at 1/T(N) tokens/s, so N = λ·L·T(N) → N = λLa / (1 − λLc) and
# tokens/s/user = 1 / (a + c·N). Two variants differ only in c.
OUTPUT_TOKENS = 100
BASE_MS = 10.0
RATE = 17.0
SLA = 50.0

KNOWN = {
    "name": "planner-known-answer",
    "seed": 4,
    "horizon": {"duration_s": 45, "warmup_s": 8},
    "hardware": {"profile": {"kind": "linear", "base_ms": BASE_MS, "per_token_ms": 1.0}, "gpus_per_replica": 2},
    "cluster": {"replicas": 1, "router": "round_robin"},
    "engine": {"max_batch_requests": 512, "kv_capacity_tokens": 100_000_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 1.0e12}},
    "policy": {"name": "none"},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 1},
                 "prompt_tokens": {"kind": "fixed", "value": 16},
                 "output_tokens": {"kind": "fixed", "value": OUTPUT_TOKENS}},
    "sweep": {"variants": [
        {"label": "c=1.0ms", "hardware": {"profile": {"per_token_ms": 1.0}}},
        {"label": "c=0.5ms", "hardware": {"profile": {"per_token_ms": 0.5}}},
    ]},
}


def mean_field_tps(rate_per_replica: float, per_token_ms: float) -> float:
    a, c = BASE_MS / 1000.0, per_token_ms / 1000.0
    load = rate_per_replica * OUTPUT_TOKENS
    if load * c >= 1.0:
        return 0.0  # unstable: the backlog grows without bound
    n = load * a / (1.0 - load * c)
    return 1.0 / (a + c * n)


def closed_form_replicas(per_token_ms: float) -> int:
    n = 1
    while mean_field_tps(RATE / n, per_token_ms) < SLA:
        n += 1
    # the case is only a test if the answer is clear of the SLA on both sides
    assert mean_field_tps(RATE / n, per_token_ms) > 1.1 * SLA
    assert n == 1 or mean_field_tps(RATE / (n - 1), per_token_ms) < 0.9 * SLA
    return n


def test_search_finds_the_threshold_with_few_probes():
    for threshold in (1, 2, 3, 5, 17, 64, 100):
        calls: list[int] = []

        def meets(n: int, t: int = threshold, log: list[int] = calls) -> bool:
            log.append(n)
            return n >= t

        assert fewest_replicas(meets, 128) == threshold
        assert len(calls) <= 2 * threshold.bit_length() + 1
        assert threshold == 1 or threshold - 1 in calls  # one fewer was simulated and failed
    assert fewest_replicas(lambda n: False, 20) is None
    assert fewest_replicas(lambda n: n >= 20, 20) == 20


def test_plan_matches_the_closed_form_answer(tmp_path):
    expected = {"c=1.0ms": closed_form_replicas(1.0), "c=0.5ms": closed_form_replicas(0.5)}
    assert expected == {"c=1.0ms": 4, "c=0.5ms": 2}
    plan = plan_capacity(KNOWN, RATE, SLA, statistic="p50", gpu_hour_usd=3.0, workers=1)
    rows = plan.to_json()["variants"]
    assert [r["label"] for r in rows] == ["c=1.0ms", "c=0.5ms"]
    for row in rows:
        n = expected[row["label"]]
        assert (row["replicas"], row["gpus"], row["meets_sla"]) == (n, 2 * n, True)
        assert row["cost_per_hour"] == pytest.approx(6.0 * n)
        assert row["tps_user"] >= SLA
        probes = {p.replicas: p for p in next(v for v in plan.variants if v.label == row["label"]).probes}
        assert probes[n].meets_sla and (n == 1 or not probes[n - 1].meets_sla)
        assert row["throughput_per_gpu"] == pytest.approx(RATE * OUTPUT_TOKENS / (2 * n), rel=0.05)
    table = plan_table(plan)
    assert "savings" in table and "+50%" in table  # 4 GPUs instead of 8


def test_plan_json_contract_on_the_command_line(cli, tmp_path):
    scenario = copy.deepcopy(KNOWN)
    scenario["sweep"]["variants"] = scenario["sweep"]["variants"][1:]
    path = write_yaml(tmp_path / "known.yaml", scenario)
    status, out, err = cli("plan", path, "--rate", RATE, "--sla-tps", SLA, "--statistic", "p50", "--json")
    assert status == 0 and err == ""
    payload = json.loads(out)
    assert list(payload) == ["variants"]
    (row,) = payload["variants"]
    assert list(row) == ["label", "replicas", "gpus", "meets_sla", "tps_user", "throughput_per_gpu",
                         "cost_per_hour"]
    assert (row["label"], row["replicas"], row["gpus"], row["cost_per_hour"]) == ("c=0.5ms", 2, 4, None)


def test_an_unreachable_sla_reports_no_cluster():
    # one request alone runs at 1 / (a + c) ≈ 91 tokens/s: 200 is out of reach at any size
    raw = copy.deepcopy(KNOWN)
    raw["sweep"]["variants"] = raw["sweep"]["variants"][:1]
    raw["horizon"] = {"duration_s": 20, "warmup_s": 2}
    plan = plan_capacity(raw, 2.0, 200.0, statistic="p50", max_replicas=4, workers=1)
    (row,) = plan.to_json()["variants"]
    assert (row["replicas"], row["gpus"], row["meets_sla"], row["cost_per_hour"]) == (None, None, False, None)
    assert "no cluster up to 4 replicas meets the SLA" in plan_table(plan)


def test_bad_plan_inputs_are_one_line_errors(cli, tmp_path):
    path = write_yaml(tmp_path / "known.yaml", KNOWN)
    status, _, err = cli("plan", path, "--rate", "-1", "--sla-tps", "50")
    assert status == 2 and "--rate must be a positive number" in err
    status, _, err = cli("plan", path, "--rate", "1", "--sla-tps", "50", "--statistic", "p99")
    assert status == 2 and "invalid choice" in err
    trace = copy.deepcopy(KNOWN)
    trace["workload"] = {"arrivals": {"kind": "trace", "path": str(tmp_path / "t.csv"), "format": "csv"}}
    (tmp_path / "t.csv").write_text("timestamp_s,prompt_tokens,output_tokens\n0.0,10,10\n")
    with pytest.raises(SpecplanError, match=r"--rate: a 'rate_per_s' load does not fit .*'trace'.*--rate-scale"):
        plan_capacity(trace, 1.0, 50.0)
    status, _, err = cli("plan", path, "--users", "4", "--sla-tps", "50")
    assert status == 2 and err.count("\n") == 1
    assert "--users: a 'users' load does not fit workload.arrivals kind 'poisson'" in err
    status, _, err = cli("plan", path, "--rate", "1", "--users", "4", "--sla-tps", "50")
    assert status == 2 and "not allowed with" in err
    with pytest.raises(SpecplanError, match="give exactly one demand"):
        plan_capacity(path, None, 50.0)
