"""A study's options: what every product takes (RunOptions) apart from what a plan alone takes (PlanOptions).

Stories: the shared options carry no plan field and a plan's carry nothing shared; the
sweep, tune and replication entry points take the shared options alone, a plan both; a
bad plan option is refused in one line named by the caller's flag.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan.run import plan_capacity, plan_search
from specplan.simulator.study.plan.target import Target
from specplan.simulator.study.replication.replicate import replicate
from specplan.simulator.study.sweep.run import run_sweep
from specplan.simulator.study.tune.run import tune_schedule
from tests.conftest import BASE

SHARED = {"workers", "out_dir", "progress", "overrides", "backend", "address", "names"}
PLAN = {"max_replicas", "replica_sample", "sample_any_router"}


def test_the_shared_options_and_a_plans_own_are_apart():
    assert {f.name for f in dataclasses.fields(RunOptions)} == SHARED
    assert {f.name for f in dataclasses.fields(PlanOptions)} == PLAN


@pytest.mark.parametrize("entry", [run_sweep, tune_schedule, replicate])
def test_the_other_products_take_the_shared_options_alone(entry):
    parameters = inspect.signature(entry).parameters
    assert "options" in parameters and not [p for p in parameters if "plan" in p]


@pytest.mark.parametrize("entry", [plan_capacity, plan_search])
def test_a_plan_takes_both(entry):
    parameters = list(inspect.signature(entry).parameters)
    assert parameters[2:] == ["options", "plan_options"]


@pytest.mark.parametrize(("plan", "message"), [
    (PlanOptions(max_replicas=0), "--max-replicas must be >= 1, got 0"),
    (PlanOptions(replica_sample=-1), "--replica-sample must be an integer >= 0, got -1"),
])
def test_a_bad_plan_option_is_one_line_named_by_its_flag(plan, message):
    names = {"max_replicas": "--max-replicas", "replica_sample": "--replica-sample"}
    with pytest.raises(SpecplanError, match=message):
        plan_capacity(dict(BASE), Target("rate_per_s", 4.0, ("ttft_p99_s<=5",), seeds=1),
                      RunOptions(workers=1, names=names), plan)
