"""Capacity planner: the replica search, a case with a closed-form answer, the JSON contract, the
keep-up test a short horizon cannot fool, seeds and intervals, plan files, the KV-capacity check."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.outputs import describe
from specplan.simulator.scenario.study import Bound, tps_column
from specplan.simulator.study.keepup import FALLS_BEHIND, KEEPS_UP, TOO_SHORT, judge_backlog
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan.files import write_plan_files
from specplan.simulator.study.plan.plan_json import capacity_json
from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.probe import Probe
from specplan.simulator.study.plan.replica_search import fewest_replicas, swamped_growth
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.tables import plan_table
from specplan.simulator.study.plan.target import DEFAULT_SEEDS, Target
from tests.conftest import REPO
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


PLAN_FIELDS = tuple(f.name for f in dataclasses.fields(PlanOptions))


def rate_plan(source: object, rate: float, sla: float, statistic: str = "p10", seeds: int = DEFAULT_SEEDS,
              gpu_hour_usd: float | None = None, **options: object) -> CapacityPlan:
    """A plan for `rate` req/s at tokens/s/user `statistic` >= `sla` (what --rate and --sla-tps spell)."""
    target = Target("rate_per_s", rate, (Bound(tps_column(statistic), ">=", sla),), statistic, seeds, gpu_hour_usd)
    plan = {key: options.pop(key) for key in PLAN_FIELDS if key in options}
    return plan_capacity(source, target, RunOptions(**options), PlanOptions(**plan))


def swamped(growth: float, runs: tuple[dict, ...]) -> Probe:
    """A one-replica probe that fell behind with this backlog growth."""
    return Probe(replicas=1, meets_sla=False, tps_user=math.nan, tps_user_ci95=math.nan, throughput_per_gpu=0.0,
                 ttft_p99_s=math.nan, backlog_growth=growth, gpus=1, keep_up=FALLS_BEHIND, runs=runs)


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


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_plan_matches_the_closed_form_answer(tmp_path):
    expected = {"c=1.0ms": closed_form_replicas(1.0), "c=0.5ms": closed_form_replicas(0.5)}
    assert expected == {"c=1.0ms": 4, "c=0.5ms": 2}
    plan = rate_plan(KNOWN, RATE, SLA, statistic="p50", gpu_hour_usd=3.0, workers=1, seeds=2)
    rows = capacity_json(plan)["variants"]
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


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_plan_json_contract_on_the_command_line(cli, tmp_path):
    scenario = copy.deepcopy(KNOWN)
    scenario["sweep"]["variants"] = scenario["sweep"]["variants"][1:]
    path = write_yaml(tmp_path / "known.yaml", scenario)
    status, out, err = cli("plan", path, "--rate", RATE, "--sla-tps", SLA, "--statistic", "p50", "--json")
    assert status == 0 and err == ""
    payload = json.loads(out)
    assert list(payload) == ["seeds_replay", "variants"] and payload["seeds_replay"] is None
    (row,) = payload["variants"]
    assert list(row) == ["label", "replicas", "gpus", "meets_sla", "unmet", "tps_user", "throughput_per_gpu",
                         "cost_per_hour", "seeds", "tps_user_ci95", "one_fewer", "sure", "sla", "gpus_decode",
                         "gpus_prefill", "prefill_pool", "prefill_busy_share", "prefix_cache_hit_rate", "engine_cap",
                         "sessions"]
    assert (row["gpus_decode"], row["gpus_prefill"], row["prefill_pool"], row["unmet"]) == (4, 0, None, None)
    assert (row["label"], row["replicas"], row["gpus"], row["cost_per_hour"]) == ("c=0.5ms", 2, 4, None)
    assert row["seeds"] == 3 and row["tps_user_ci95"] > 0 and row["sure"] is True
    assert row["one_fewer"]["replicas"] == 1 and row["one_fewer"]["tps_user"] < SLA


def test_an_unreachable_sla_reports_no_cluster():
    # one request alone runs at 1 / (a + c) ≈ 91 tokens/s: 200 is out of reach at any size
    raw = copy.deepcopy(KNOWN)
    raw["sweep"]["variants"] = raw["sweep"]["variants"][:1]
    raw["horizon"] = {"duration_s": 20, "warmup_s": 2}
    plan = rate_plan(raw, 4.0, 200.0, statistic="p50", max_replicas=4, workers=1, seeds=1)
    (row,) = capacity_json(plan)["variants"]
    assert (row["replicas"], row["gpus"], row["meets_sla"], row["cost_per_hour"]) == (None, None, False, None)
    assert "not met: " in plan_table(plan) and row["unmet"] in plan_table(plan)


def test_bad_plan_inputs_are_one_line_errors(cli, tmp_path):
    path = write_yaml(tmp_path / "known.yaml", KNOWN)
    status, _, err = cli("plan", path, "--rate", "-1", "--sla-tps", "50")
    assert status == 2 and "--rate must be a positive number" in err
    status, _, err = cli("plan", path, "--rate", "1", "--sla-tps", "50", "--statistic", "p99")
    assert status == 2 and "invalid choice" in err
    trace = copy.deepcopy(KNOWN)
    trace["workload"] = {"arrivals": {"kind": "trace", "path": str(tmp_path / "t.csv"), "format": "csv"}}
    (tmp_path / "t.csv").write_text("timestamp_s,prompt_tokens,output_tokens\n0.0,10,10\n")
    with pytest.raises(SpecplanError, match=r"rate_per_s: a 'rate_per_s' load does not fit .*'trace'.*rate_scale"):
        rate_plan(trace, 1.0, 50.0)
    status, _, err = cli("plan", path, "--users", "4", "--sla-tps", "50")
    assert status == 2 and err.count("\n") == 1
    assert "--users: a 'users' load does not fit workload.arrivals kind 'poisson'" in err
    status, _, err = cli("plan", path, "--rate", "1", "--users", "4", "--sla-tps", "50")
    assert status == 2 and "not allowed with" in err
    with pytest.raises(SpecplanError, match="rate_per_s must be a positive number, got -1"):
        rate_plan(path, -1.0, 50.0)


# ---- how sure a plan is: the keep-up test, seeds, files, KV capacity ----------------------------


def requests_frame(arrivals: np.ndarray, service_s: float, capacity_per_s: float | None,
                   end_s: float) -> pd.DataFrame:
    """Requests arriving at `arrivals`, each in the engine `service_s`; with `capacity_per_s`, finishes
    are spaced at least 1/capacity apart (a server that cannot keep up); unfinished at end_s: NaN."""
    admitted = arrivals.copy()
    finish = admitted + service_s
    if capacity_per_s is not None:
        for i in range(1, finish.size):
            finish[i] = max(finish[i], finish[i - 1] + 1.0 / capacity_per_s)
    finish[finish > end_s] = np.nan
    return pd.DataFrame({"arrival_s": arrivals, "admitted_s": admitted, "finish_s": finish})


def test_the_backlog_test_tells_overload_from_a_short_horizon():
    arrivals = np.arange(0.0, 60.0, 0.05)  # 20 requests/s
    assert judge_backlog(requests_frame(arrivals, 2.0, None, 60.0), 4.0, 60.0).verdict == KEEPS_UP
    verdict = judge_backlog(requests_frame(arrivals, 2.0, 15.0, 60.0), 4.0, 60.0)  # serves 75% of demand
    assert verdict.verdict == FALLS_BEHIND and verdict.growth == pytest.approx(0.25, abs=0.05)
    # a 6-s horizon where half the requests spend 8 s in the engine: the backlog still ramps up
    # from an empty cluster, which no 6-s window can tell from overload
    mixed = pd.concat([requests_frame(np.arange(0.0, 6.0, 0.02), 0.5, None, 6.0),
                       requests_frame(np.arange(0.01, 6.0, 0.02), 8.0, None, 6.0)])
    short = judge_backlog(mixed, 1.0, 6.0)
    assert short.verdict == TOO_SHORT and short.completed >= 30 and "the p90 time a request spends" in short.reason
    assert short.needed_duration_s >= 19
    # too few completions and a backlog that does not plainly outrun them: too short
    few = judge_backlog(requests_frame(np.arange(0.0, 6.0, 0.5), 1.0, None, 6.0), 1.0, 6.0)
    assert few.verdict == TOO_SHORT and "requests completed" in few.reason
    # one server taking a request every 2 s from 20 arriving each second, FIFO: no request of the window
    # (from 4 s) is even admitted, yet it plainly falls behind
    arrivals = np.arange(0.0, 60.0, 0.05)
    admitted = np.where(np.arange(arrivals.size) < 30, 2.0 * np.arange(arrivals.size), np.nan)
    frame = pd.DataFrame({"arrival_s": arrivals, "admitted_s": admitted, "finish_s": admitted + 2.0})
    swamped = judge_backlog(frame, 4.0, 60.0)
    assert swamped.completed == 0 and swamped.verdict == FALLS_BEHIND and swamped.growth > 0.9
    assert "only 0 requests completed" in swamped.reason
    # two engines of 8 slots whose requests take 40 s (longer than the run): nothing finishes, the backlog
    # test cannot settle, but both queues never empty and they emit 16 of the 800 tokens/s asked: behind
    n = arrivals.size
    replica = np.arange(n) % 2
    slot = np.arange(n) < 16
    long = pd.DataFrame({"arrival_s": arrivals, "admitted_s": np.where(slot, arrivals, np.nan),
                         "finish_s": np.nan, "replica": replica, "output_tokens": 41,
                         "status": np.where(slot, "running", "queued")})
    steps = pd.DataFrame({"end_s": np.arange(0.1, 60.0, 0.1), "emitted_tokens": 16 * 0.1 * np.ones(599)})
    assert judge_backlog(long, 4.0, 60.0).verdict == TOO_SHORT
    behind = judge_backlog(long, 4.0, 60.0, steps)
    assert behind.verdict == FALLS_BEHIND and "every engine had a waiting queue" in behind.reason
    # the same engines ramping up with no queue (every request admitted on arrival): still too short
    ramp = long.assign(admitted_s=arrivals, status="running")
    assert judge_backlog(ramp, 4.0, 60.0, steps).verdict == TOO_SHORT
    # a queue at one engine only: the other has room, so nothing is proven
    one = long.assign(admitted_s=np.where(slot | (replica == 1), arrivals, np.nan))
    assert judge_backlog(one, 4.0, 60.0, steps).verdict == TOO_SHORT


def h100_mtp1(duration_s: float, warmup_s: float) -> dict:
    text = (REPO / "scenarios" / "default.yaml").read_text()  # its drafters priced on the H100 too
    raw = yaml.safe_load(text.replace("builtin:h200-llama3.1-8b-vllm-drafter", "builtin:h100-llama3.1-8b-vllm-drafter"))
    variant = next(v for v in raw["sweep"]["variants"] if v["label"] == "MTP-1")
    raw["sweep"] = {"variants": [variant]}
    raw["hardware"]["profile"] = "builtin:h100-llama3.1-8b-vllm"
    raw["engine"]["kv_capacity_tokens"] = 430_000
    raw["horizon"] = {"duration_s": duration_s, "warmup_s": warmup_s}
    raw["workload"]["arrivals"] = {"kind": "poisson", "rate_per_s": 70}  # the plan's --rate scales Poisson arrivals
    return raw


def short_horizon_answer(duration_s: float, warmup_s: float) -> int | str | None:
    try:
        plan = rate_plan(h100_mtp1(duration_s, warmup_s), 70.0, 50.0, max_replicas=8, workers=1, seeds=1)
    except SpecplanError as exc:
        assert "is too short to judge whether the cluster keeps up" in str(exc)
        return "too short"
    return plan.variants[0].replicas


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_a_short_horizon_gives_the_long_horizons_answer_or_says_it_is_too_short(cli, tmp_path):
    # the old rule (tokens emitted ÷ tokens requested in the window) found no cluster up to 256 at 5 s
    long = short_horizon_answer(20, 4)
    assert long == 2
    assert short_horizon_answer(5, 1) in (long, "too short")
    assert short_horizon_answer(10, 2) in (long, "too short")
    path = write_yaml(tmp_path / "short.yaml", h100_mtp1(3, 1))
    status, out, err = cli("plan", path, "--rate", 70, "--sla-tps", 50, "--seeds", 1, "--quiet")
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "horizon.duration_s 3 is too short to judge whether the cluster keeps up" in err
    assert "raise horizon.duration_s to at least" in err


def test_plan_out_writes_every_probe_and_a_report_and_a_rerun_reuses_them(cli, tmp_path, monkeypatch):
    scenario = copy.deepcopy(KNOWN)
    scenario["sweep"]["variants"] = scenario["sweep"]["variants"][1:]
    path = write_yaml(tmp_path / "known.yaml", scenario)
    out = tmp_path / "plan"
    args = ("plan", path, "--rate", RATE, "--sla-tps", SLA, "--statistic", "p50", "--seeds", 2, "--out", out)
    status, text, _ = cli(*args)
    assert status == 0 and "one fewer" in text and " ± " in text
    probes = pd.read_csv(out / "probes.csv")
    assert sorted(set(probes["replicas"])) == [1, 2] and len(probes) == 4  # 2 sizes × 2 seeds
    assert len(list((out / "probes").glob("*.json"))) == 4
    record = json.loads(next((out / "probes").glob("*.json")).read_text())
    assert record["summary"]["keep_up_verdict"] in (KEEPS_UP, FALLS_BEHIND) and "engine" in record["scenario"]
    assert [c for c in probes.columns if describe("probes.csv", c) is None] == []  # the outputs registry
    assert [k for k in record["summary"] if describe("probes/KEY.json", k) is None] == []
    assert json.loads((out / "plan.json").read_text())["variants"][0]["replicas"] == 2
    assert "← answer" in (out / "plan.md").read_text()

    def no_simulation(*_a, **_k):
        raise AssertionError("a stored probe was simulated again")

    monkeypatch.setattr("specplan.simulator.study.plan.probe.simulate", no_simulation)
    status, again, _ = cli(*args)
    assert status == 0 and again == text


def test_kv_capacity_beyond_the_profiles_memory_model_is_refused_with_both_numbers(cli):
    status, _, err = cli("check", REPO / "scenarios" / "default.yaml",
                         "--set", "hardware.profile=builtin:h100-llama3.1-8b-vllm")
    assert status == 2 and len(err.strip().splitlines()) == 1
    # 880,000 is past what the H100 holds at all: 80 GiB less 15 GiB of weights, 532,836 tokens
    assert "engine.kv_capacity_tokens: 880,000 KV tokens" in err and "(532,836 tokens" in err
    status, _, _ = cli("check", REPO / "scenarios" / "default.yaml",
                       "--set", "hardware.profile=builtin:h100-llama3.1-8b-vllm",
                       "--set", "engine.kv_capacity_tokens=432992",
                       "--set", "drafter.latency.match_target=false")  # the variants name H200 drafters
    assert status == 0


def fleet(router: str) -> dict:
    """KNOWN's c = 0.5 ms variant as one scenario: 10 req/s per replica is where it meets p50 >= SLA."""
    scenario = copy.deepcopy(KNOWN)
    scenario["sweep"] = {"variants": [scenario["sweep"]["variants"][1]]}
    scenario["cluster"]["router"] = router
    scenario["horizon"] = {"duration_s": 30, "warmup_s": 6}
    return scenario


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_a_fleet_plans_on_a_sample_of_its_replicas_and_the_swamped_probes_fall_behind(tmp_path):
    # 680 req/s: the mean field's threshold is 68 replicas; the 1-replica probe completes nothing of its window
    plan = rate_plan(fleet("random"), 680.0, SLA, statistic="p50", workers=1, seeds=2, replica_sample=4,
                         out_dir=tmp_path)
    (variant,) = plan.variants
    assert 0.9 * 68 <= variant.replicas <= 1.1 * 68
    probes = {p.replicas: p for p in variant.probes}
    assert probes[1].keep_up == FALLS_BEHIND and not probes[1].meets_sla
    assert all(p.simulated == min(p.replicas, 4) for p in variant.probes)
    assert variant.one_fewer is not None and not variant.one_fewer.meets_sla
    assert variant.gpus == 2 * variant.replicas
    assert "probes above 4 replicas simulate 4 of them" in plan_table(plan)
    stored = list((tmp_path / "probes").glob("*.json"))
    assert len(stored) == 2 * len(variant.probes)  # a sampled probe's runs under keys of their own
    write_plan_files(plan, tmp_path)
    rows = pd.read_csv(tmp_path / "probes.csv")
    assert (rows["replicas_simulated"] == rows["replicas"].clip(upper=4)).all()
    assert capacity_json(plan)["variants"][0]["one_fewer"]["replicas_simulated"] == 4


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_other_routers_are_simulated_whole_unless_asked(tmp_path):
    whole = rate_plan(fleet("round_robin"), 85.0, SLA, statistic="p50", workers=1, seeds=1, replica_sample=4)
    assert all(p.simulated == p.replicas for p in whole.variants[0].probes)
    assert max(p.replicas for p in whole.variants[0].probes) > 4
    sampled = rate_plan(fleet("round_robin"), 85.0, SLA, statistic="p50", workers=1, seeds=1,
                            replica_sample=4, sample_any_router=True)
    assert any(p.simulated < p.replicas for p in sampled.variants[0].probes)
    assert "other routers approximated" in plan_table(sampled)


def test_a_bad_replica_sample_is_refused_in_one_line(cli, tmp_path):
    path = write_yaml(tmp_path / "fleet.yaml", fleet("random"))
    status, out, err = cli("plan", path, "--rate", 85, "--sla-tps", SLA, "--replica-sample", -1)
    assert status == 2 and out == "" and err.strip() == "specplan: error: --replica-sample must be an integer >= 0, got -1"


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_a_sampled_probes_replicas_on_two_processes_give_the_same_plan():
    plans = [rate_plan(fleet("random"), 170.0, SLA, statistic="p50", workers=w, seeds=1, replica_sample=4)
             for w in (1, 2)]
    one, two = (p.variants[0] for p in plans)
    assert one.replicas == two.replicas and one.replicas > 4
    assert [(p.replicas, p.stats) for p in one.probes] == [(p.replicas, p.stats) for p in two.probes]


def test_after_one_swamped_replica_the_search_jumps_and_still_brackets_the_answer():
    run = {"keep_up_growth": 0.99}
    probes = {1: swamped(0.99, (run, run))}
    grow = swamped_growth(probes)
    assert grow(1) == 32 and grow(32) == 64  # 1 replica serves 1%: 0.5 / 0.01 = 50 → 32
    probes[1] = swamped(0.5, ({"keep_up_growth": 0.5},))
    assert grow(1) == 2  # serving half its demand: no jump
    calls: list[int] = []

    def meets(n: int) -> bool:
        calls.append(n)
        if n == 1:
            probes[1] = swamped(0.99, (run,))
        return n >= 20

    probes.clear()
    assert fewest_replicas(meets, 256, swamped_growth(probes)) == 20
    assert calls[:2] == [1, 32] and 19 in calls
