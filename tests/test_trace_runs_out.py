"""A trace that runs out says so, and never dilutes what is measured (issue 32, item 3).

The window of a replayed trace may end before the horizon (its duration_s,
or the file's last request). The run then measures up to that point and
goes on to the horizon only so that the requests it sent finish:
throughput over a 30 s horizon equals throughput over a horizon that ends
with the trace, and summary.json names the point (`trace_ran_out_s`). A
window with no request, or one that runs out within the warm-up, is
refused; so is an empty trace in `trace-stats`; and a plan whose trace runs
out says so instead of asking for a longer horizon, which would add no
request.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario.study import parse_bound
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.target import Target
from specplan.traces.errors import TraceError
from tests.conftest import make_scenario
from tests.test_plan_trace import poisson_trace
from tests.test_planner import KNOWN
from tests.test_sweep import write_yaml


def steady_trace(path: Path, seconds: float, gap_s: float = 0.1) -> Path:
    rows = [f"{t:.3f},120,40" for t in np.arange(0.0, seconds, gap_s)]
    path.write_text("timestamp,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return path


def replay(trace: Path, horizon_s: float, **window):
    arrivals = {"kind": "trace", "path": str(trace), "format": "csv", **window}
    return simulate(make_scenario(horizon={"duration_s": horizon_s, "warmup_s": 2.0},
                                  workload={"arrivals": arrivals}))


def test_a_window_shorter_than_the_horizon_is_measured_to_its_end(tmp_path):
    trace = steady_trace(tmp_path / "t.csv", 40.0)
    long, exact = replay(trace, 30.0, start_s=20.0, duration_s=10.0), replay(trace, 10.0, start_s=20.0, duration_s=10.0)
    assert long.summary["trace_ran_out_s"] == 10.0 and exact.summary["trace_ran_out_s"] is None
    assert long.summary["window_s"] == exact.summary["window_s"] == 8.0 and long.summary["simulated_s"] == 30.0
    assert long.summary["throughput_tokens_per_s"] == exact.summary["throughput_tokens_per_s"]
    assert long.summary["requests_completed"] == long.summary["requests_arrived"] == 100  # the tail drained


def test_a_file_that_ends_first_is_measured_to_its_last_arrival(tmp_path):
    result = replay(steady_trace(tmp_path / "t.csv", 6.0), 30.0)
    assert result.summary["trace_ran_out_s"] == pytest.approx(5.9)
    assert result.summary["window_s"] == pytest.approx(3.9)


def test_a_window_without_requests_is_refused_before_the_run(tmp_path):
    trace = steady_trace(tmp_path / "t.csv", 6.0)
    with pytest.raises(TraceError, match=r"no request in the window \(workload.arrivals.start_s 9999\); the "
                                         r"trace's requests span 0–5.9 s"):
        replay(trace, 30.0, start_s=9999)


def test_a_window_that_runs_out_within_the_warmup_is_refused(tmp_path):
    with pytest.raises(TraceError, match=r"runs out at 1.9 s of simulated time, within horizon.warmup_s \(2 s\)"):
        replay(steady_trace(tmp_path / "t.csv", 2.0), 30.0)


def test_the_command_refuses_an_empty_window_in_one_line(cli, tmp_path):
    raw = copy.deepcopy(KNOWN)
    raw["workload"] = {"arrivals": {"kind": "trace", "path": str(steady_trace(tmp_path / "t.csv", 6.0)),
                                    "format": "csv", "start_s": 9999}}
    status, _, err = cli("run", write_yaml(tmp_path / "s.yaml", raw), "--out", tmp_path / "out")
    assert status == 2 and err.count("\n") == 1 and "no request in the window" in err
    assert not (tmp_path / "out").exists()


def test_trace_stats_refuses_an_empty_trace_as_run_does(cli, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("timestamp,prompt_tokens,output_tokens\n")
    status, out, err = cli("trace-stats", empty, "--format", "csv")
    assert status == 2 and out == "" and f"{empty}: no requests in the trace" in err


def test_a_plan_whose_trace_runs_out_says_so_rather_than_asking_for_a_longer_horizon(tmp_path):
    raw = copy.deepcopy(KNOWN)
    raw["sweep"]["variants"] = raw["sweep"]["variants"][1:]
    trace = poisson_trace(tmp_path / "few.csv", 1.0, 20.0)  # about 20 requests
    raw["workload"] = {"arrivals": {"kind": "trace", "path": str(trace), "format": "csv"}}
    with pytest.raises(SpecplanError, match=r"the trace ran out at [\d.]+ s \(\d+ requests\), too soon to judge .* "
                                            r"a longer horizon adds no request"):
        plan_capacity(raw, Target("rate_scale", 1.0, (parse_bound("tps_user_p50>=1"),), seeds=1),
                      RunOptions(workers=1))


def test_run_says_when_the_trace_ran_out(cli, tmp_path):
    """Issue 39: `specplan run` on a trace that ran out printed nothing of trace_ran_out_s / window_s."""
    import yaml

    from tests.conftest import BASE, merged

    trace = steady_trace(tmp_path / "t.csv", 6.0)
    raw = merged(BASE, {"horizon": {"duration_s": 30, "warmup_s": 2.0}})
    raw["workload"]["arrivals"] = {"kind": "trace", "path": str(trace), "format": "csv"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, out, err = cli("run", path, "--out", tmp_path / "o")
    assert status == 0, err
    assert "the trace ran out at 5.9 s of the 30 s horizon" in out and "3.9 s window" in out, out
    raw["horizon"]["duration_s"] = 5
    path.write_text(yaml.safe_dump(raw))
    status, out, _ = cli("run", path, "--out", tmp_path / "p")
    assert status == 0 and "ran out" not in out
