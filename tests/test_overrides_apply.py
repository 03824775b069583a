"""Overrides that a study would replace are refused; the others apply (issue 32, item 4).

A newcomer's `sweep --set seed=3` ran every point at sweep.seeds (7) while
scenario.resolved.yaml said 3. Every key a study's design sets per point is
checked the same way: the seed against sweep.seeds, the load's own key
against the load axis (a sweep's, or a plan's demand flag), a key a variant
sets for itself, a plan's cluster.replicas; and a horizon is one of two
alternatives, so setting one drops the other.
"""

from __future__ import annotations

import copy

import pytest

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import load_scenario, scenario_from_mapping
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.planner import variant_mappings
from specplan.simulator.study.plan.target import Target
from specplan.simulator.study.points import design_sweep
from tests.conftest import REPO
from tests.test_sweep import BASE, tiny, write_yaml


def test_a_seed_set_on_a_sweep_with_its_own_seeds_is_refused():
    with pytest.raises(SpecplanError, match=r"seed=3 does not apply: the sweep runs every point at sweep.seeds "
                                            r"\(\[1, 2\]\); set sweep.seeds=\[3\] instead"):
        design_sweep(tiny(), ["seed=3"])


def test_a_seed_set_with_the_seeds_it_runs_at_applies():
    design = design_sweep(tiny(), ["seed=3", "sweep.seeds=[3]"])
    assert {p.seed for p in design.points} == {3} and design.base.seed == 3
    without = tiny()
    del without["sweep"]["seeds"]
    assert {p.seed for p in design_sweep(without, ["seed=5"]).points} == {5}


def test_the_loads_own_key_set_under_a_load_axis_is_refused():
    with pytest.raises(SpecplanError, match=r"workload.arrivals.users does not apply: each point's users is set "
                                            r"by sweep.load.users \(2, not 64\)"):
        design_sweep(tiny(), ["workload.arrivals.users=64"])


def test_a_load_axis_that_scales_the_rate_composes_with_a_rate_set():
    raw = tiny(workload={**BASE["workload"], "arrivals": {"kind": "poisson", "rate_per_s": 2.0}})
    raw["sweep"]["load"] = {"rate_scale": [1, 2]}
    design = design_sweep(raw, ["workload.arrivals.rate_per_s=5"])
    assert sorted({p.scenario.workload.arrivals.rate_per_s for p in design.points}) == [5.0, 10.0]


def test_a_key_every_variant_sets_for_itself_is_refused_naming_them():
    with pytest.raises(SpecplanError, match=r"policy does not apply: every variant \(sweep.variants\[0\] \(plain\), "
                                            r".*\) sets its own"):
        design_sweep(tiny(), ["policy={name: threshold}"])


def test_a_key_some_variants_set_applies_to_the_others():
    design = design_sweep(tiny(), ["drafter.family=dflash"])  # 'plain' sets family none for itself
    families = {p.label: p.scenario.drafter.family for p in design.points}
    assert families == {"plain": "none", "MTP-1": "dflash", "static-3": "dflash"}


def test_a_key_no_variant_sets_applies_to_every_point():
    design = design_sweep(tiny(), ["drafter.latency.ms=0.25"])
    assert {p.scenario.drafter.latency.ms for p in design.points} == {0.25}


def test_a_plan_refuses_a_replica_count_and_a_load_its_demand_replaces(tmp_path):
    source = write_yaml(tmp_path / "s.yaml", tiny())
    options = RunOptions(overrides=("cluster.replicas=4",), names={"users": "--users"})
    with pytest.raises(SpecplanError, match=r"cluster\.replicas does not apply: a plan sizes the replicas itself"):
        variant_mappings(source, Target("users", 8), options)
    options = RunOptions(overrides=("workload.arrivals.users=16",), names={"users": "--users"})
    with pytest.raises(SpecplanError, match=r"each point's users is set by --users 8 \(8, not 16\)"):
        variant_mappings(source, Target("users", 8), options)


def test_a_plan_applies_an_arrival_process_whose_rate_is_the_demand(tmp_path):
    source = write_yaml(tmp_path / "s.yaml", tiny())
    options = RunOptions(overrides=("workload.arrivals={kind: poisson, rate_per_s: 120}",))
    variants, _, _ = variant_mappings(source, Target("rate_per_s", 120), options)
    assert all(raw["workload"]["arrivals"] == {"kind": "poisson", "rate_per_s": 120.0} for _, raw, _ in variants)


def test_a_horizon_gives_duration_or_requests_and_setting_one_drops_the_other(tmp_path):
    both = copy.deepcopy(BASE)
    both["horizon"] = {"duration_s": 6, "requests": 50}
    with pytest.raises(Exception, match="horizon: give 'duration_s' or 'requests', not both"):
        scenario_from_mapping(both, tmp_path)
    path = write_yaml(tmp_path / "s.yaml", tiny())
    horizon = load_scenario(path, ["horizon.requests=40"]).horizon
    assert horizon.requests == 40 and horizon.duration_s is None
    horizon = load_scenario(path, ["horizon.requests=40", "horizon.duration_s=9"]).horizon
    assert horizon.duration_s == 9 and horizon.requests is None


def test_the_command_refuses_in_one_line(cli, tmp_path):
    status, _, err = cli("sweep", REPO / "scenarios" / "default.yaml", "--set", "seed=3", "--out", tmp_path / "o")
    assert status == 2 and err.count("\n") == 1 and "set sweep.seeds=[3] instead" in err
    assert not (tmp_path / "o").exists()
