"""Trace replay: windows, time and rate scaling, and replay inside a simulation."""

from __future__ import annotations

import collections
import functools
import json

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.streams import stream
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.traces.readers import TraceFile, TraceReader
from specplan.traces.replay import Replay
from specplan.traces.spec import TraceArrivals
from tests.conftest import BASE, SHARED, merged

AZURE = SHARED / "traces" / "azure2023"
CODE = str(AZURE / "AzureLLMInferenceTrace_code.csv")
CONV = str(AZURE / "AzureLLMInferenceTrace_conv.csv")


def replayed(path=CONV, seed=1, **options):
    return list(Replay(TraceArrivals(path=path, **options), functools.partial(stream, seed)).arrivals())


def trace_times(path):
    stamps = pd.to_datetime(pd.read_csv(path)["TIMESTAMP"])
    return (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy()


def per_minute(times, minutes):
    return np.bincount((np.asarray(times) // 60).astype(int), minlength=minutes)[:minutes]


def test_window_picks_trace_time_and_starts_at_zero():
    times = trace_times(CONV)
    got = replayed(start_s=600.0, duration_s=300.0)
    inside = times[(times >= 600.0) & (times < 900.0)]
    assert len(got) == inside.size
    assert [r.time_s for r in got] == pytest.approx(inside - 600.0, abs=1e-6)


def test_time_scale_stretches_time_and_keeps_everything_else():
    plain = replayed(duration_s=600.0)
    slow = replayed(duration_s=600.0, time_scale=2.0)
    assert len(slow) == len(plain)
    assert [r.time_s for r in slow] == pytest.approx([2.0 * r.time_s for r in plain])
    assert [r.prompt_tokens for r in slow] == [r.prompt_tokens for r in plain]
    gaps, slow_gaps = np.diff([r.time_s for r in plain]), np.diff([r.time_s for r in slow])
    assert slow_gaps.std() / slow_gaps.mean() == pytest.approx(gaps.std() / gaps.mean())


def test_thinning_keeps_the_rate_profile():
    full = replayed(CODE)
    half = replayed(CODE, rate_scale=0.5)
    n = len(full)
    assert abs(len(half) - n / 2) < 4 * np.sqrt(n / 4)
    minutes = 57
    corr = np.corrcoef(per_minute([r.time_s for r in full], minutes), per_minute([r.time_s for r in half], minutes))
    assert corr[0, 1] > 0.95
    full_prompt = np.array([r.prompt_tokens for r in full])
    half_prompt = np.array([r.prompt_tokens for r in half])
    assert np.median(half_prompt) == pytest.approx(np.median(full_prompt), rel=0.1)


def test_superposing_copies_scales_the_rate_and_keeps_the_shape():
    full = replayed(CODE)
    triple = replayed(CODE, rate_scale=3.0)
    times = np.array([r.time_s for r in triple])
    assert len(triple) == 3 * len(full)
    assert (np.diff(times) >= 0).all()
    span = full[-1].time_s * len(full) / (len(full) - 1)
    assert times.min() >= 0 and times.max() < span
    pairs = collections.Counter((r.prompt_tokens, r.output_tokens) for r in triple)
    assert pairs == collections.Counter({k: 3 * v for k, v in
                                         collections.Counter((r.prompt_tokens, r.output_tokens) for r in full).items()})
    minutes = 57
    base, scaled = per_minute([r.time_s for r in full], minutes), per_minute(times, minutes)
    assert np.corrcoef(base, scaled)[0, 1] > 0.95
    assert scaled.max() / scaled.mean() == pytest.approx(base.max() / base.mean(), rel=0.1)
    same_instant = (np.diff(times) == 0).mean()
    assert same_instant <= (np.diff([r.time_s for r in full]) == 0).mean() + 0.01


def test_fractional_rate_scale_adds_a_thinned_copy():
    window = replayed(duration_s=900.0)
    scaled = replayed(duration_s=900.0, rate_scale=2.5)
    n = len(window)
    assert abs(len(scaled) - 2.5 * n) < 4 * np.sqrt(n / 4)
    assert max(r.time_s for r in scaled) < 900.0


def test_rate_scale_is_deterministic_per_seed():
    a = [r.time_s for r in replayed(duration_s=120.0, rate_scale=1.7, seed=4)]
    b = [r.time_s for r in replayed(duration_s=120.0, rate_scale=1.7, seed=4)]
    c = [r.time_s for r in replayed(duration_s=120.0, rate_scale=1.7, seed=5)]
    assert a == b
    assert a != c


def trace_scenario(tmp_path, arrivals, **changes):
    raw = merged(BASE, {"horizon": {"duration_s": 120.0, "warmup_s": 0.0},
                        "engine": {"max_batch_requests": 256, "kv_capacity_tokens": 50_000_000},
                        "workload": {"arrivals": {"kind": "trace", "path": CONV, **arrivals}}})
    raw["workload"].pop("prompt_tokens")
    raw["workload"].pop("output_tokens")
    return scenario_from_mapping(merged(raw, changes), tmp_path)


def test_replay_in_a_simulation_submits_the_trace_requests(tmp_path):
    result = simulate(trace_scenario(tmp_path, {"start_s": 60.0}))
    times = trace_times(CONV)
    window = times[(times >= 60.0) & (times < 180.0)] - 60.0
    requests = result.requests
    assert len(requests) == window.size
    assert requests["arrival_s"].to_numpy() == pytest.approx(window, abs=1e-6)
    expected = pd.read_csv(CONV)[(times >= 60.0) & (times < 180.0)]
    assert requests["prompt_tokens"].tolist() == expected["ContextTokens"].tolist()
    assert requests["output_tokens"].tolist() == expected["GeneratedTokens"].tolist()
    assert result.summary["trace_bad_lines"] == 0
    assert result.summary["trace_failed_requests"] == 0


def test_trace_mapped_to_a_domain(tmp_path):
    mix = {"drafter": {"block_size": 1, "acceptance": {"per_position": {"chat": [0.8], "code": [0.9]},
                                                      "domains": {"chat": 0.5, "code": 0.5}}},
           "policy": {"name": "mtp-1", "params": {}}}
    result = simulate(trace_scenario(tmp_path, {"domain": "code", "duration_s": 20.0}, **mix))
    assert set(result.requests["domain"]) == {"code"}
    drawn = simulate(trace_scenario(tmp_path, {"duration_s": 60.0}, **mix))
    assert set(drawn.requests["domain"]) == {"chat", "code"}


def test_trace_domain_absent_from_the_acceptance_mix_is_a_load_error(tmp_path):
    with pytest.raises(SpecplanError, match=r"workload\.arrivals\.domain: 'code' is not in drafter"):
        trace_scenario(tmp_path, {"domain": "code"})


def test_csv_domain_column_and_bad_lines_in_the_summary(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("t,p,o,d\n0.0,100,5,chat\n0.5,120,4,chat\nbroken\n1.0,90,3,chat\n1.5,80,0,chat\n")
    arrivals = {"path": str(path), "format": "csv", "skip_bad_lines": True,
                "columns": {"timestamp": "t", "prompt_tokens": "p", "output_tokens": "o", "domain": "d"}}
    result = simulate(trace_scenario(tmp_path, arrivals))
    assert len(result.requests) == 3
    assert result.summary["trace_bad_lines"] == 1
    assert result.summary["trace_failed_requests"] == 1
    path.write_text("t,p,o,d\n0.0,100,5,math\n")
    with pytest.raises(SpecplanError, match=r"mine\.csv:2: domain 'math' is not in drafter"):
        simulate(trace_scenario(tmp_path, arrivals))


def test_trace_lengths_can_come_from_the_workload_instead(tmp_path):
    scenario = trace_scenario(tmp_path, {"use_lengths": False, "duration_s": 30.0},
                              workload={"output_tokens": {"kind": "fixed", "value": 7}})
    result = simulate(scenario)
    assert set(result.requests["output_tokens"]) == {7}
    assert set(result.requests["prompt_tokens"]) == {512}


def test_csv_options_rejected_for_other_formats(tmp_path):
    with pytest.raises(SpecplanError, match=r"workload\.arrivals\.time_unit: only for format csv"):
        trace_scenario(tmp_path, {"time_unit": "ms"})
    with pytest.raises(SpecplanError, match=r"columns\.stamp: unknown column role"):
        trace_scenario(tmp_path, {"format": "csv", "columns": {"stamp": "t"}})


def test_missing_trace_fails_before_the_run(tmp_path):
    scenario = trace_scenario(tmp_path, {"path": str(tmp_path / "gone.csv")})
    with pytest.raises(SpecplanError, match=r"gone\.csv: cannot read trace"):
        simulate(scenario)


def test_contract_azure_trace_runs(cli, tmp_path):
    status, _, err = cli("run", SHARED / "scenarios" / "contract-azure-trace.yaml", "--out", tmp_path,
                         "--quiet", "--set", "horizon.duration_s=40", "--set", "horizon.warmup_s=5")
    assert status == 0, err
    summary = json.loads((tmp_path / "summary.json").read_text())
    times = trace_times(CONV)
    assert summary["requests_arrived"] == int((times < 40.0).sum())
    assert summary["requests_completed"] > 0
    assert summary["trace_bad_lines"] == 0


def test_reader_counts_restart_on_each_pass(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("timestamp,prompt_tokens,output_tokens\n0,1,1\nx,1,1\n1,1,1\n")
    reader = TraceReader(TraceFile(str(path), "csv", skip_bad_lines=True))
    assert len(list(reader)) == 2 and reader.bad_lines == 1
    assert len(list(reader)) == 2 and reader.bad_lines == 1
