"""Seeds that resample a trace's arrivals, and intervals that say what they cover (issue 39, item 5).

A replay sends a trace's window as recorded, so seeds varied only the
simulator's own draws: a plan on one 600 s window of a Mooncake trace read
TTFT p90 1.592 ± 0.000 "sure". Now the plan says what its interval covers,
and `workload.arrivals.resample` (or `plan --resample`) makes each seed
replay a window drawn anew over the trace or a circular block bootstrap of
its window (specplan.traces.resample), drawn from the scenario's seed.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.core.streams import stream
from specplan.simulator.study.frontier import ci95
from specplan.traces.resample import block_bootstrap, window_start_s
from tests.test_sweep import BASE, write_yaml


def bursty_trace(path, seconds: float = 120.0) -> str:
    """A Mooncake-format trace: 1 request/s, with a burst of 40 in the first second of every 30 s."""
    times = [float(t) for t in np.arange(0.0, seconds, 1.0)]
    times += [30.0 * k + 0.025 * i for k in range(int(seconds // 30)) for i in range(40)]
    lines = [json.dumps({"timestamp": t * 1000, "input_length": 200 + i % 7, "output_length": 40 + i % 11,
                         "hash_ids": [i]}) for i, t in enumerate(sorted(times))]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_block_bootstrap_keeps_the_window_its_requests_and_their_count_on_average():
    rng = np.random.default_rng(0)
    times = np.sort(rng.uniform(0.0, 600.0, 900))
    counts = []
    for i in range(40):
        rows, at = block_bootstrap(times, 600.0, 60.0, stream(11, "trace.resample", i))
        assert np.all(np.diff(at) >= 0) and at.min() >= 0 and at.max() < 600.0  # in order, inside the window
        assert set(rows) <= set(range(times.size))  # requests of the trace, not invented ones
        counts.append(len(rows))
    half = ci95(pd.Series(counts, dtype=float))
    assert abs(np.mean(counts) - times.size) < half and half > 0  # unbiased for the count, and it varies


def test_a_drawn_window_lies_inside_the_trace_and_spreads_over_it():
    starts = [window_start_s(0.0, 1000.0, 600.0, stream(3, "trace.resample", i), "t") for i in range(60)]
    assert min(starts) >= 0.0 and max(starts) <= 400.0
    half = ci95(pd.Series(starts, dtype=float))
    assert abs(np.mean(starts) - 200.0) < half  # uniform over the 400 s of room


def trace_plan(tmp_path, cli, *flags: str) -> tuple[str, dict, pd.DataFrame]:
    raw = copy.deepcopy(BASE)
    del raw["sweep"], raw["sla"]
    raw["horizon"] = {"duration_s": 120, "warmup_s": 5}
    raw["workload"] = {"arrivals": {"kind": "trace", "format": "mooncake", "duration_s": 120,
                                    "path": bursty_trace(tmp_path / "bursty.jsonl", 240.0)}}
    path = write_yaml(tmp_path / "trace.yaml", raw)
    out = tmp_path / ("plan" + "".join(flags).replace("-", ""))
    status, text, err = cli("plan", path, "--sla", "ttft_p90_s<=5", "--seeds", 3, "--max-replicas", 2,
                            "--workers", 1, "--quiet", "--out", out, *flags)
    assert status == 0, err
    return text, json.loads((out / "plan.json").read_text()), pd.read_csv(out / "probes.csv")


@pytest.mark.slow("three capacity plans of a small engine on a 120 s trace window, three seeds each (about 15 s)")
def test_a_plan_on_a_trace_says_what_its_interval_covers_and_resamples_when_asked(tmp_path, cli):
    text, plan, probes = trace_plan(tmp_path, cli)
    assert "every seed replays the trace's arrivals as recorded" in text and "not the traffic" in text
    assert "as recorded" in plan["seeds_replay"]
    first = probes[probes["replicas"] == probes["replicas"].min()]
    assert first["requests_completed"].nunique() == 1  # the same arrivals every seed
    for flag, words in ((("--resample", "blocks", "--resample-block-s", "20"), "block bootstrap"),
                        (("--resample", "windows"), "window drawn anew")):
        text, plan, probes = trace_plan(tmp_path, cli, *flag)
        assert words in text and words in plan["seeds_replay"] and "covers the traffic too" in text
        first = probes[probes["replicas"] == probes["replicas"].min()]
        assert first["requests_completed"].nunique() > 1  # each seed its own traffic


def test_resampling_is_refused_off_a_trace(tmp_path, cli):
    raw = copy.deepcopy(BASE)
    del raw["sweep"], raw["sla"]
    path = write_yaml(tmp_path / "poisson.yaml", raw)
    status, out, err = cli("plan", path, "--rate", 4, "--sla-tps", 10, "--resample", "blocks")
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "not a trace" in err
