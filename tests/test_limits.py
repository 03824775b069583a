"""Questions the model cannot answer are refused in one line with the numbers, before anything runs.

- A horizon whose estimated steps and arrivals need more than an hour or
  more memory than the machine has (`specplan.simulator.scenario.size`);
  its step count bounds what a run really does.
- A block size beyond what an acceptance preset was fitted to, unless
  `drafter.acceptance.extrapolate: true` asks for it.
"""

from __future__ import annotations

import copy

import pytest

from specplan.hwprofiles import load_profile
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.presets import FITTED_BLOCK
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario, scenario_from_mapping
from specplan.simulator.scenario.size import run_size
from specplan.simulator.study.points import design_sweep
from tests.test_load_axes import TRACE_ROWS, write_trace
from tests.test_sweep import BASE, REPO, tiny, write_yaml

DEFAULT = REPO / "scenarios" / "default.yaml"


def test_a_horizon_of_1e12_seconds_is_refused_with_its_estimate(cli):
    for command in ("check", "run"):
        extra = ("--out", "/nonexistent/never-written") if command == "run" else ()
        status, out, err = cli(command, DEFAULT, "--set", "horizon.duration_s=1e12", *extra)
        assert status == 2 and out == "" and err.count("\n") == 1
        assert "horizon.duration_s: this run is about 2e+14 engine steps and 1.2e+13 arrivals" in err
        assert "the limits are 1 hour" in err and "GiB" in err


def test_too_many_requests_or_too_high_a_load_is_refused(tmp_path):
    raw = tiny(horizon={"requests": 10**12})
    with pytest.raises(SpecplanError, match=r"horizon.requests: this run is about .* 1e\+12 arrivals"):
        design_sweep(raw)
    raw = tiny()
    raw["sweep"]["load"] = {"users": [4, 10**9]}
    with pytest.raises(SpecplanError, match=r"sweep.variants\[0\] \(plain\): sweep.load.users: this run is"):
        design_sweep(raw)
    trace = copy.deepcopy(BASE)
    trace["workload"] = {"arrivals": {"kind": "trace", "path": str(write_trace(tmp_path / "t.csv")),
                                      "format": "csv", "rate_scale": 1e12}}
    with pytest.raises(SpecplanError, match=r"about .* 6e\+12 arrivals"):
        scenario_from_mapping(trace, tmp_path)


def test_a_long_horizon_that_fits_is_accepted():
    scenario = load_scenario(DEFAULT, ["horizon.duration_s=3000"])
    assert scenario.horizon.duration_s == 3000


@pytest.mark.parametrize("arrivals", [
    {"kind": "closed_loop", "users": 6, "think_s": 0.0},
    {"kind": "closed_loop", "users": 3, "think_s": 2.0},
    {"kind": "poisson", "rate_per_s": 0.5},
    {"kind": "trace"},
])
def test_the_estimate_bounds_what_a_run_does(tmp_path, arrivals):
    raw = copy.deepcopy(BASE)
    del raw["sweep"], raw["sla"]
    if arrivals["kind"] == "trace":
        arrivals = {"kind": "trace", "path": str(write_trace(tmp_path / "t.csv")), "format": "csv", "rate_scale": 2}
    raw["workload"]["arrivals"] = arrivals
    scenario = scenario_from_mapping(raw, tmp_path)
    result = simulate(scenario)
    for read_files in (False, True):
        size = run_size(scenario, load_profile(scenario.hardware.profile), read_files)
        assert len(result.steps) <= size.steps  # every step takes at least the shortest step
        assert len(result.requests) <= 1.5 * size.arrivals + 3  # arrivals: an expected count, give or take noise
    if arrivals["kind"] == "trace":
        assert size.arrivals == 2 * len(TRACE_ROWS)


def test_a_block_beyond_the_presets_fitted_range_is_refused_unless_extrapolation_is_asked(cli, tmp_path):
    status, _, err = cli("check", DEFAULT, "--set", f"drafter.block_size={FITTED_BLOCK + 1}")
    assert status == 2 and err.count("\n") == 1
    assert (f"drafter.block_size: {FITTED_BLOCK + 1} is beyond what preset 'qwen3-8b' was fitted to "
            f"(block size <= {FITTED_BLOCK}); set drafter.acceptance.extrapolate: true") in err
    status, _, _ = cli("check", DEFAULT, "--set", f"drafter.block_size={FITTED_BLOCK}")
    assert status == 0
    scenario = load_scenario(DEFAULT, ["drafter.block_size=20", "drafter.acceptance.extrapolate=true"])
    assert scenario.drafter.block_size == 20 and scenario.drafter.acceptance.extrapolate
    per_position = load_scenario(DEFAULT, ["drafter.block_size=20",
                                           "drafter.acceptance={per_position: {chat: [0.8]}, domains: {chat: 1}}",
                                           "drafter.acceptance.per_position.chat=" + str([0.8] * 20)])
    assert per_position.drafter.block_size == 20  # curves given in full: no preset range applies
    raw = tiny()
    raw["drafter"] = {**raw["drafter"], "acceptance": {"preset": "deepseek-v3"}}
    raw["sweep"]["variants"][2] = {"label": "static-40", "drafter": {"block_size": 40},
                                   "policy": {"name": "static", "params": {"length": 40}}}
    path = write_yaml(tmp_path / "s.yaml", raw)
    status, _, err = cli("check", path)  # the variant sweep would refuse is refused by check
    assert status == 2 and "sweep.variants[2] (static-40): drafter.block_size: 40 is beyond" in err
