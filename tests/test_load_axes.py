"""Load axes scale the workload the user wrote: every sweep point keeps its arrival kind and lengths.

One story per arrival kind (poisson, gamma, mmpp, piecewise, closed loop,
trace): the resolved scenario of every sweep point has the base's kind,
its lengths and every parameter the axis does not scale, and the scaled
rate is the one asked for, checked against the arrival process's own
analytic mean gap. An axis that does not fit the workload is refused in
one line naming both, by `sweep`, `check` and `plan` alike.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from specplan.cli.commands.plan import FLAGS
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.planner import variant_mappings
from specplan.simulator.study.plan.target import Target
from specplan.simulator.study.points import design_sweep, validated
from specplan.traces.arrivals import arrival_process
from tests.test_sweep import BASE, write_yaml

LENGTHS = {"prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.6, "max": 2000},
           "output_tokens": {"kind": "fixed", "value": 40}}
TRACE_ROWS = [(0.0, 33, 7), (0.4, 47, 9), (0.5, 51, 5), (2.0, 29, 11), (2.1, 61, 6), (3.5, 38, 8)]


def write_trace(path: Path) -> Path:
    lines = ["timestamp,prompt_tokens,output_tokens"] + [f"{t},{p},{o}" for t, p, o in TRACE_ROWS]
    path.write_text("\n".join(lines) + "\n")
    return path


def scenario_with(arrivals: dict[str, Any], load: dict[str, list[float]], lengths: bool = True) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["workload"] = {"arrivals": arrivals, **(copy.deepcopy(LENGTHS) if lengths else {})}
    raw["sweep"]["load"] = load
    return raw


def mean_rate(arrivals: Any) -> float:
    """The arrival process's own long-run rate (traces.arrivals: its mean rate, else 1 / its mean gap)."""
    process = arrival_process(arrivals)
    return getattr(process, "mean_rate_per_s", 1.0 / process.mean_gap_s)


def unscaled(arrivals: Any, *names: str) -> dict[str, Any]:
    """The spec's fields other than `names` (what scaling must keep)."""
    return {f.name: getattr(arrivals, f.name) for f in dataclasses.fields(arrivals) if f.name not in names}


def check_points(raw: dict[str, Any], scaled: tuple[str, ...]) -> list[Any]:
    """Every point keeps the base's arrival kind, lengths and unscaled parameters; returns their arrivals."""
    plan = design_sweep(raw)
    base = plan.base.workload
    assert len(plan.points) == len(raw["sweep"]["variants"]) * len(raw["sweep"]["seeds"]) * 2
    for point in plan.points:
        workload = point.scenario.workload
        assert workload.arrivals.KIND == base.arrivals.KIND
        assert (workload.prompt_tokens, workload.output_tokens) == (base.prompt_tokens, base.output_tokens)
        assert unscaled(workload.arrivals, *scaled) == unscaled(base.arrivals, *scaled)
    return [p.scenario.workload.arrivals for p in plan.points]


def test_poisson_rate_axis_sets_the_rate():
    raw = scenario_with({"kind": "poisson", "rate_per_s": 3.0}, {"rate_per_s": [1.5, 6.0]})
    rates = {a.rate_per_s for a in check_points(raw, ("rate_per_s",))}
    assert rates == {1.5, 6.0}
    raw["sweep"]["load"] = {"rate_scale": [2, 4]}
    assert {a.rate_per_s for a in check_points(raw, ("rate_per_s",))} == {6.0, 12.0}


def test_gamma_keeps_its_cv():
    raw = scenario_with({"kind": "gamma", "rate_per_s": 2.0, "cv": 3.0}, {"rate_per_s": [1.0, 5.0]})
    arrivals = check_points(raw, ("rate_per_s",))
    assert {a.cv for a in arrivals} == {3.0} and {mean_rate(a) for a in arrivals} == {1.0, 5.0}


def test_mmpp_scales_both_rates_and_keeps_its_sojourns():
    spec = {"kind": "mmpp", "rate_on_per_s": 8.0, "rate_off_per_s": 1.0, "mean_on_s": 2.0, "mean_off_s": 6.0}
    raw = scenario_with(spec, {"rate_per_s": [1.5, 9.0]})
    arrivals = check_points(raw, ("rate_on_per_s", "rate_off_per_s"))
    for a in arrivals:
        assert a.rate_on_per_s / a.rate_off_per_s == pytest.approx(8.0)  # the burst ratio is kept
    assert sorted({round(mean_rate(a), 9) for a in arrivals}) == [1.5, 9.0]


def test_piecewise_scales_every_segment_and_keeps_the_profile():
    spec = {"kind": "piecewise", "times_s": [0, 10, 30], "rates_per_s": [1.0, 4.0, 0.0], "period_s": 40}
    raw = scenario_with(spec, {"rate_per_s": [2.0, 8.0]})
    arrivals = check_points(raw, ("rates_per_s",))
    for a in arrivals:
        assert a.rates_per_s[2] == 0.0 and a.rates_per_s[1] / a.rates_per_s[0] == pytest.approx(4.0)
    assert sorted({round(mean_rate(a), 9) for a in arrivals}) == [2.0, 8.0]
    raw["sweep"]["load"] = {"rate_scale": [0.5, 3]}
    assert {a.rates_per_s for a in check_points(raw, ("rates_per_s",))} == {(0.5, 2.0, 0.0), (3.0, 12.0, 0.0)}


def test_closed_loop_users_keep_their_think_time_distribution():
    spec = {"kind": "closed_loop", "users": 4, "think_s": 0.7, "think_cv": 0.25}
    arrivals = check_points(scenario_with(spec, {"users": [2, 32]}), ("users",))
    assert {(a.users, a.think_s, a.think_cv) for a in arrivals} == {(2, 0.7, 0.25), (32, 0.7, 0.25)}


def test_trace_rate_scale_keeps_the_trace_its_window_and_its_lengths(tmp_path):
    path = write_trace(tmp_path / "t.csv")
    spec = {"kind": "trace", "path": str(path), "format": "csv", "rate_scale": 1.5, "time_scale": 0.5,
            "superpose_shift_s": 0.2}
    raw = scenario_with(spec, {"rate_scale": [1, 2]}, lengths=False)
    raw["horizon"] = {"duration_s": 30, "warmup_s": 0}
    arrivals = check_points(raw, ("rate_scale",))
    assert {a.rate_scale for a in arrivals} == {1.5, 3.0}  # the trace's own scale times the axis
    assert {a.use_lengths for a in arrivals} == {True}
    point = next(p for p in design_sweep(raw).points if p.load == 2)
    requests = simulate(point.scenario).requests
    assert len(requests) == 3 * len(TRACE_ROWS)  # an integer scale: exactly 3 copies of the window
    assert set(requests["prompt_tokens"]) == {p for _, p, _ in TRACE_ROWS}  # the trace's own lengths


@pytest.mark.parametrize(("arrivals", "load", "message"), [
    ({"kind": "poisson", "rate_per_s": 1.0}, {"users": [2]},
     r"sweep.load.users: a 'users' load does not fit workload.arrivals kind 'poisson'.*sweep.load.rate_per_s"),
    ({"kind": "closed_loop", "users": 2}, {"rate_per_s": [2]},
     r"sweep.load.rate_per_s: .* kind 'closed_loop'.*scale this workload with sweep.load.users"),
    ({"kind": "closed_loop", "users": 2}, {"rate_scale": [2]}, r"sweep.load.rate_scale: .* kind 'closed_loop'"),
    ({"kind": "trace", "path": "TRACE", "format": "csv"}, {"users": [2]},
     r"sweep.load.users: .* kind 'trace'.*sweep.load.rate_scale"),
    ({"kind": "trace", "path": "TRACE", "format": "csv"}, {"rate_per_s": [2]}, r"sweep.load.rate_per_s: .*'trace'"),
])
def test_an_axis_that_does_not_fit_is_refused_never_substituted(cli, tmp_path, arrivals, load, message):
    if arrivals.get("path") == "TRACE":
        arrivals = {**arrivals, "path": str(write_trace(tmp_path / "t.csv"))}
    raw = scenario_with(arrivals, load)
    with pytest.raises(SpecplanError, match=message):
        design_sweep(raw)
    path = write_yaml(tmp_path / "s.yaml", raw)
    for command in (("sweep", path, "--out", tmp_path / "o"), ("check", path)):
        status, out, err = cli(*command)
        assert status == 2 and out == "" and err.count("\n") == 1 and "does not fit" in err
    assert not (tmp_path / "o" / "points").exists()


def test_a_variant_with_another_workload_is_checked_against_the_axis(tmp_path):
    raw = scenario_with({"kind": "closed_loop", "users": 2}, {"users": [1, 4]})
    raw["sweep"]["variants"][1]["workload"] = {"arrivals": {"kind": "poisson", "rate_per_s": 2.0}}
    with pytest.raises(SpecplanError, match=r"sweep.variants\[1\] \(MTP-1\): sweep.load.users: .*'poisson'"):
        design_sweep(raw)


def test_plan_probes_scale_the_same_workload_the_same_way(tmp_path):
    spec = {"kind": "gamma", "rate_per_s": 2.0, "cv": 2.5}
    raw = scenario_with(spec, {"rate_per_s": [1.0]})
    flags = RunOptions(names=FLAGS)
    mappings, folder, name = variant_mappings(raw, Target("rate_per_s", 7.0), flags)
    for _label, mapping, where in mappings:
        workload = validated(mapping, folder, name, where).workload
        assert (workload.arrivals.KIND, workload.arrivals.cv, workload.arrivals.rate_per_s) == ("gamma", 2.5, 7.0)
        assert workload.prompt_tokens == design_sweep(raw).base.workload.prompt_tokens
    with pytest.raises(SpecplanError, match=r"--users: a 'users' load does not fit .*'gamma'.*--rate"):
        variant_mappings(raw, Target("users", 4), flags)
    trace = scenario_with({"kind": "trace", "path": str(write_trace(tmp_path / "t.csv")), "format": "csv"},
                          {"rate_scale": [1]}, lengths=False)
    mappings, folder, name = variant_mappings(trace, Target("rate_scale", 3.0), flags)
    scaled = validated(mappings[0][1], folder, name, mappings[0][2]).workload.arrivals
    assert (scaled.KIND, scaled.rate_scale, scaled.use_lengths) == ("trace", 3.0, True)
