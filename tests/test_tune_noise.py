"""`tune` exports a schedule, not noise (issue 39, item 6).

On the issue's tune.yaml (Llama-3.1-8B on H200, EAGLE-3 k = 5) the tune
picked length 2 at batch 1 from 5-6 requests, where lengths 2-5 read
225.5-226.9 tok/s/GPU, and TensorRT-LLM's rule (the first bucket's length
is the largest) then capped every bucket at 2: `{128: 2}`, silently, though
length 4 led in 6 of 8 buckets. Now a pick has an interval (over seeds, or
over one seed's requests), lengths inside it tie and a tie goes to the
schedule's shape; a capped bucket says so; a schedule that loses to the
best static length in its own verification carries a warning everywhere.
"""

from __future__ import annotations

import json
import types

import pandas as pd
import pytest
import yaml

from specplan.cli.commands.tune import tie_text
from specplan.reports.tune import cap_blocks
from specplan.simulator.study.tune import (
    TUNED_ROLE,
    BucketChoice,
    LengthFigures,
    Objective,
    losing_warning,
    pick,
    runs_text,
)
from tests.test_sweep import write_yaml

TUNE = {  # the issue's tune.yaml, its load axis cut to 16 users to keep the test short
    "name": "llama8b-eagle3-h200", "seed": 11, "horizon": {"duration_s": 12, "warmup_s": 2},
    "hardware": {"profile": "builtin:h200-llama3.1-8b-vllm", "gpus_per_replica": 1},
    "cluster": {"replicas": 1, "router": "least_loaded"}, "engine": {"max_batch_requests": 128},
    "drafter": {"family": "eagle3", "block_size": 5,
                "acceptance": {"per_position": {"chat": [0.78, 0.72, 0.68, 0.64, 0.60]}, "domains": {"chat": 1.0}},
                "confidence": {"kind": "perfect"},
                "latency": {"kind": "profile", "path": "builtin:h200-llama3.1-8b-vllm-drafter-1l"}},
    "policy": {"name": "static", "params": {"length": 5}},
    "workload": {"arrivals": {"kind": "closed_loop", "users": 8, "think_s": 0.5},
                 "prompt_tokens": {"kind": "lognormal", "median": 1200, "sigma": 0.8, "max": 8000},
                 "output_tokens": {"kind": "lognormal", "median": 250, "sigma": 0.7, "max": 1500}},
    "sweep": {"load": {"users": [1, 2, 4, 8, 16]}, "seeds": [11],
              "variants": [{"label": "MTP-1 stand-in (EAGLE-3 k=1)", "policy": {"name": "mtp-1"}}]},
    "sla": {"tps_user": [120], "statistic": "p50"},
}


def reading(throughput: float, half: float, seeds: tuple[float, ...] = ()) -> LengthFigures:
    return LengthFigures(throughput, 200.0, 0.1, True, half, 1.0, seeds, tuple(200.0 for _ in seeds))


def test_lengths_inside_the_interval_tie_and_go_to_the_schedules_shape():
    at_sla = Objective("p50", 120.0, None)
    batch_one = {2: reading(226.9, 8.0), 3: reading(226.0, 8.0), 4: reading(225.5, 8.0), 5: reading(226.1, 8.0),
                 0: reading(167.0, 6.0)}
    first = pick(batch_one, at_sla, None)
    assert set(first.tied) == {2, 3, 4, 5}
    assert first.length == 5  # the longest: it caps every later bucket
    # a later bucket keeps the previous length while tied, rather than zigzag 7 → 6 → 7 on 1% differences
    later = {4: reading(1000.0, 15.0), 5: reading(990.0, 15.0), 3: reading(900.0, 15.0)}
    assert pick(later, at_sla, 5, previous=5).length == 5
    assert pick(later, at_sla, 5, previous=4).length == 4
    # a clear winner is taken whatever the shape
    clear = {4: reading(1000.0, 5.0), 5: reading(900.0, 5.0)}
    assert pick(clear, at_sla, 5, previous=5).length == 4
    # seeds pair their lengths (same requests): a steady 1% lead over three seeds is no tie
    paired = {4: reading(1010.0, 90.0, (900.0, 1010.0, 1120.0)), 5: reading(1000.0, 90.0, (891.0, 1000.0, 1109.0))}
    assert pick(paired, at_sla, 5, previous=5).length == 4


def test_a_capped_bucket_says_so_in_the_terminal_and_the_report():
    capped = BucketChoice(1, 2, 1.4, 2, {}, (4,), capped_from=4)
    assert "capped at 2 by the first bucket" in tie_text(capped) and "uncapped: 4" in tie_text(capped)
    tuned = types.SimpleNamespace(buckets=[BucketChoice(0, 1, 1.0, 2, {}, (2,)), capped])
    text = " ".join(str(block) for block in cap_blocks(tuned))  # type: ignore[arg-type]
    assert "max_draft_len = 2" in text and "batch 2: capped at 2 (uncapped: 4)" in text


def test_a_schedule_that_loses_to_a_static_length_is_warned_about():
    rows = pd.DataFrame([
        {"measure": "throughput_per_gpu_at_sla", "level": 120.0, "label": "tuned schedule", "role": TUNED_ROLE,
         "value": 14298.0, "tuned_gain": float("nan"), "best_static": False, "edge": ""},
        {"measure": "throughput_per_gpu_at_sla", "level": 120.0, "label": "static 3", "role": "static length",
         "value": 14561.0, "tuned_gain": 14298.0 / 14561.0 - 1, "best_static": True, "edge": ""},
    ])
    warning = losing_warning(rows)
    assert "loses to the best static length" in warning and "static 3's 14,561 (-1.8%)" in warning
    assert losing_warning(rows.assign(value=[14600.0, 14561.0])) == ""


def test_runs_of_lengths_read_short():
    assert runs_text(list(range(6, 100))) == "6–99" and runs_text([2, 3, 4, 5]) == "2–5"
    assert runs_text([1, 3, 4]) == "1, 3–4"


@pytest.mark.slow("a length-schedule tune of Llama-3.1-8B on H200 up to 16 users (about 25 s)")
def test_the_issues_tune_no_longer_exports_a_noise_pick(tmp_path, cli):
    path = write_yaml(tmp_path / "tune.yaml", TUNE)
    out = tmp_path / "tune"
    status, text, err = cli("tune", path, "--out", out, "--workers", 2, "--lengths", "2:5")
    assert status == 0, err
    record = json.loads((out / "tune.json").read_text())
    first = record["buckets"][0]
    assert len(first["tied"]) > 1 and first["length"] == max(first["tied"])  # batch 1 is a tie: the longest
    assert "tie of" in text and "over one seed's requests" in text
    assert record["schedule"] != {"128": 2}
    lengths = [b["length"] for b in record["buckets"]]
    assert lengths == sorted(lengths, reverse=True)  # the shape: no zigzag
    header = (out / "schedule.yaml").read_text()
    if record["warning"]:  # a loss in its own verification is said on stderr and in every export
        assert "warning" in err and "WARNING" in header and "Warning" in (out / "report.md").read_text()
    else:
        assert "warning" not in err and "WARNING" not in header
    assert yaml.safe_load(header)["policy"]["params"]["schedule"] == {int(k): v for k, v in record["schedule"].items()}
    status, _, err = cli("tune", path, "--out", tmp_path / "bad", "--lengths", "0:99")
    assert status == 2 and "got 6–99" in err and "7, 8, 9" not in err
