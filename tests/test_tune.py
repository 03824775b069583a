"""`specplan tune`: per-batch-size lengths searched on static sweeps, verified, exported three ways.

The small scenario has a linear step time (5 ms + 0.5 ms per verified
token, 0.5 ms drafting) and homogeneous acceptance 0.8, 0.7, 0.6, so the
best static length at batch R is the argmax of τ(ℓ) / T(R, ℓ), with
τ(ℓ) = 1 + Σ_{j≤ℓ} Π p_i and T = 5 + 0.5·R·(1 + ℓ) + 0.5·[ℓ > 0] ms: it
falls from 3 at batch 1 to 1 at batch 12.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from specplan.cli.commands.tune import parse_buckets, parse_lengths, parse_loads
from specplan.policies.schedule import LengthSchedule, LengthScheduleParams
from specplan.simulator.scenario.merge import deep_merge
from specplan.simulator.study.export import write_schedule_files
from specplan.simulator.study.tune import (
    BucketChoice,
    LengthFigures,
    Objective,
    bucket_bounds,
    candidate_lengths,
    comparison_frame,
    merged_schedule,
    pick,
    tune_schedule,
)

CURVE = (0.8, 0.7, 0.6)
SMALL = {
    "name": "tune-small", "seed": 3, "horizon": {"duration_s": 12, "warmup_s": 2},
    "hardware": {"profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.5}, "gpus_per_replica": 1},
    "cluster": {"replicas": 1, "router": "round_robin"},
    "engine": {"max_batch_requests": 16, "kv_capacity_tokens": 1_000_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 200_000}},
    "drafter": {"family": "mtp", "block_size": 3,
                "acceptance": {"per_position": {"chat": list(CURVE)}, "domains": {"chat": 1.0},
                               "request_sigma": 0.0, "token_sigma": 0.0},
                "latency": {"kind": "fixed", "ms": 0.5}},
    "policy": {"name": "static", "params": {"length": 3}},
    "workload": {"arrivals": {"kind": "closed_loop", "users": 4, "think_s": 0.0},
                 "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 60}},
    "sweep": {"load": {"users": [1, 2, 4, 8, 16]},
              "variants": [{"label": "MTP-1", "policy": {"name": "mtp-1"}},
                           {"label": "confidence async", "drafter": {"confidence": {"kind": "perfect"}},
                            "policy": {"name": "dspark-async"}}]},
    "sla": {"tps_user": [150], "statistic": "p50"},
}


def analytic_rate(batch: float, length: int) -> float:
    """Tokens per second per request at a batch size: τ(ℓ) / T(R, ℓ)."""
    tau = 1 + float(np.cumprod(CURVE)[:length].sum())
    step_ms = 5.0 + 0.5 * batch * (1 + length) + (0.5 if length else 0.0)
    return 1000.0 * tau / step_ms


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tune")
    (folder / "small.yaml").write_text(yaml.safe_dump(SMALL))
    out = folder / "out"
    result = tune_schedule(folder / "small.yaml", out, workers=2, progress=False)
    write_schedule_files(result, out)
    return folder, out, result


@pytest.mark.slow("a whole length-schedule tune: search and verification sweeps")
def test_write_schedule_files_takes_a_str_folder(tuned, tmp_path):
    """Issue 39, item 9: `write_schedule_files(tuned, "dir")` refused the str that tune_schedule takes."""
    files = write_schedule_files(tuned[2], str(tmp_path / "exports"))
    assert files["schedule.yaml"] == tmp_path / "exports" / "schedule.yaml" and files["schedule.yaml"].is_file()


@pytest.mark.slow("a whole length-schedule tune: search and verification sweeps")
def test_schedule_follows_the_analytic_best_length_where_it_is_clear(tuned):
    _, _, result = tuned
    lengths = [c.length for c in result.buckets]
    assert [c.high for c in result.buckets] == [1, 2, 4, 8, 16]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] == 3 and lengths[-1] == 1
    for choice in result.buckets:
        rates = {n: analytic_rate(choice.batch, n) for n in range(4)}
        best, second = sorted(rates.values(), reverse=True)[:2]
        if best > 1.05 * second:  # a clear analytic winner must be the pick
            assert choice.length == max(rates, key=lambda n: rates[n]), choice


def test_verification_puts_the_schedule_level_with_the_best_static_length(tuned):
    _, _, result = tuned
    rows = result.comparison
    tuned_row = rows[rows["role"] == "tuned"].iloc[0]
    best = rows[rows["best_static"]].iloc[0]
    assert tuned_row["level"] == 150 and math.isfinite(tuned_row["value"])
    assert tuned_row["value"] >= 0.97 * best["value"]
    assert set(rows["role"]) == {"tuned", "static length", "mtp-1", "dspark-async"}


def test_exports_agree_with_the_length_schedule_policy(tuned, cli):
    folder, out, result = tuned
    policy = yaml.safe_load((out / "schedule.yaml").read_text())["policy"]
    trt = yaml.safe_load((out / "trtllm.yaml").read_text())["speculative_config"]
    table = json.loads((out / "schedule.json").read_text())["batch_size_to_length"]
    assert policy["params"]["schedule"] == trt["draft_len_schedule"] == result.schedule
    keys = sorted(trt["draft_len_schedule"])
    assert trt["max_draft_len"] == trt["draft_len_schedule"][keys[0]] == max(trt["draft_len_schedule"].values())
    engine = LengthSchedule(LengthScheduleParams({str(k): v for k, v in result.schedule.items()}), 3)
    assert {int(k): v for k, v in table.items()} == {r: engine.planned_length(r) for r in range(1, 17)}
    ranges = json.loads((out / "vllm.json").read_text())["num_speculative_tokens_per_batch_size"]
    assert {r: k for first, last, k in ranges for r in range(first, last + 1)} == {int(k): v for k, v in table.items()}
    merged = deep_merge({k: v for k, v in SMALL.items() if k not in ("sweep", "sla")}, {"policy": policy})
    (folder / "deploy.yaml").write_text(yaml.safe_dump(merged))
    assert cli("check", folder / "deploy.yaml")[0] == 0


def test_a_second_tune_reuses_every_point(tuned):
    folder, out, first = tuned
    again = tune_schedule(folder / "small.yaml", out, workers=1, progress=False)
    assert again.search.computed == 0 and again.verification.computed == 0
    assert again.schedule == first.schedule


@pytest.mark.slow("a whole length-schedule tune: search and verification sweeps")
def test_cli_writes_report_and_json(tuned, cli):
    folder, out, result = tuned
    status, stdout, _ = cli("tune", folder / "small.yaml", "--out", out, "--json")
    assert status == 0
    record = json.loads(stdout)
    assert record["schedule"] == {str(k): v for k, v in result.schedule.items()}
    assert record["points"]["simulated"] == 0 and (out / "report.html").is_file()
    text = (out / "report.md").read_text()
    assert "What a confidence head is worth" in text and "draft_len_schedule" in text


def test_without_an_sla_it_compares_tokens_per_user_at_matched_throughput(tuned):
    folder, out, _ = tuned
    raw = {k: v for k, v in SMALL.items() if k != "sla"}
    (folder / "nosla.yaml").write_text(yaml.safe_dump(raw))
    result = tune_schedule(folder / "nosla.yaml", out, workers=2, progress=False)
    assert result.objective.sla_tps is None and "matched throughput" in result.objective.describe()
    assert set(result.comparison["measure"]) == {"tps_user_at_matched_throughput"}
    assert result.buckets[0].length == 3


def figures(throughput: float, tps: float, measured: bool = True) -> LengthFigures:
    return LengthFigures(throughput, tps, 0.1, measured)


def test_pick_prefers_throughput_among_lengths_meeting_the_sla():
    at_sla = Objective("p50", 100.0, None)
    candidates = {0: figures(50, 150), 1: figures(80, 120), 2: figures(90, 90), 3: figures(95, 80)}
    assert pick(candidates, at_sla, None).length == 1  # 2 and 3 miss the SLA
    capped = pick(candidates, at_sla, 0, previous=0)
    assert capped.length == 0 and capped.capped_from == 1  # capped by the first bucket's length, and says so
    nowhere = {0: figures(50, 60), 1: figures(80, 70)}
    assert pick(nowhere, at_sla, None).length == 1  # none meets it: the fastest for users
    tie = {1: figures(80, 120), 2: figures(80, 120)}
    assert pick(tie, at_sla, None).length == 2  # a first bucket's tie: the longest (it caps the rest)
    assert pick(tie, at_sla, 2, previous=1).length == 1  # a later bucket's: the previous length
    assert pick(candidates, Objective("p50", None, None), None).length == 0


def bucket(high: int, length: int) -> BucketChoice:
    return BucketChoice(high // 2, high, float(high), length, {})


def test_merged_schedule_uses_upper_bounds_and_drops_a_trailing_zero():
    assert merged_schedule([bucket(1, 7), bucket(2, 7), bucket(4, 5), bucket(8, 5), bucket(16, 0)]) == {2: 7, 8: 5}
    assert merged_schedule([bucket(1, 0), bucket(2, 0)]) == {2: 0}


def test_argument_parsing_and_the_search_space():
    assert parse_lengths(None) is None and parse_lengths("1:2") == (1, 2) and parse_lengths("3,1") == (3, 1)
    assert parse_buckets("8,4") == (8, 4) and parse_loads("16,8") == (8.0, 16.0)
    assert candidate_lengths(None, 3) == (0, 1, 2, 3) and candidate_lengths((3, 1), 3) == (1, 3)
    assert bucket_bounds(None, 128) == (1, 2, 4, 8, 16, 32, 64, 128)
    assert bucket_bounds(None, 48) == (1, 2, 4, 8, 16, 32, 48)
    assert bucket_bounds((8, 4), 16) == (4, 8, 16)


@pytest.mark.parametrize("args, message", [
    (("--lengths", "0:5"), "lengths: must lie in 0..3"),
    (("--lengths", "0:x"), "--lengths: expected 'LOW:HIGH'"),
    (("--buckets", "4,32"), "buckets: 32 is above engine.max_batch_requests (16)"),
    (("--loads", "8"), "--loads: give at least two positive load values"),
    (("--loads", "1.5,3"), "give whole numbers"),
    (("--set", "sweep.load=null"), "tune needs a load axis of at least two values"),
    (("--set", "drafter.family=none", "--set", "policy={name: none}", "--set", "sweep.variants=[]"),
     "tune needs a drafter that speculates"),
    (("--set", "sweep.variants=[{label: static 2}]"), "variant label 'static 2' is one tune generates"),
])
@pytest.mark.slow("a whole length-schedule tune: search and verification sweeps")
def test_bad_tune_requests_get_one_line(tuned, cli, args, message):
    folder, _, _ = tuned
    status, _, stderr = cli("tune", folder / "small.yaml", "--out", folder / "bad", "--no-report", *args)
    assert status == 2 and message in stderr and len(stderr.strip().splitlines()) == 1


def test_a_value_read_at_the_largest_simulated_load_says_so(tuned):
    _, _, result = tuned
    statics = [label for label in result.verification.design.labels if label.startswith("static")]
    ops = result.verification.operating
    # an SLA slower than every operating point reads each label's highest throughput
    rows = comparison_frame(result.verification, result.objective, statics, [1.0])
    for r in rows.itertuples():
        mine = ops[ops["label"] == r.label]
        best = mine.loc[mine["throughput_per_gpu"].idxmax()]
        assert r.value == pytest.approx(best["throughput_per_gpu"])
        assert r.edge == ("max load 16" if best["load"] == 16 else "")
    assert (rows["edge"] == "max load 16").any()
    assert (result.comparison["edge"] == "").all()  # at SLA 150 every reading lies inside the load axis
