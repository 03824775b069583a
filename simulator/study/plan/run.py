"""A plan's entry points: (source, target, options[, plan]), each writing its own files in `options.out_dir`.

    plan = plan_capacity(source, target, options, plan)   per variant, the fewest replicas (planner.size_capacity)
    plan = plan_search(source, target, options, plan)     every deployment of the search space (search.size_search)

`options` are the shared RunOptions, `plan` the plan's own PlanOptions (the
replica cap, the sampling of large fleets; specplan.simulator.study.options).

With a results folder, the probes are stored under probes/ as they run (a
re-run reuses them) and the plan's files are written at the end
(specplan.simulator.study.plan.files); `plan.files` names them.
"""

from __future__ import annotations

from specplan.simulator.study.options import PlanOptions, RunOptions, Source
from specplan.simulator.study.plan.files import write_plan_files, write_search_files
from specplan.simulator.study.plan.planner import CapacityPlan, size_capacity
from specplan.simulator.study.plan.search import DeploymentPlan, size_search
from specplan.simulator.study.plan.target import Target


def plan_capacity(source: Source, target: Target, options: RunOptions | None = None,
                  plan_options: PlanOptions | None = None) -> CapacityPlan:
    """Fewest replicas (and GPUs, cost) per variant serving the target's demand at its SLA; the SLA is
    `target.bounds`, or the scenario's sla.bounds when it gives none."""
    plan = size_capacity(source, target, options, plan_options)
    out = plan.options.out_path
    if out is not None:
        plan.files = write_plan_files(plan, out)
    return plan


def plan_search(source: Source, target: Target, options: RunOptions | None = None,
                plan_options: PlanOptions | None = None) -> DeploymentPlan:
    """Every point of the scenario's search space sized and ranked by cost (specplan.simulator.study.plan.search)."""
    plan = size_search(source, target, options, plan_options)
    out = plan.options.out_path
    if out is not None:
        plan.files = write_search_files(plan, out)
    return plan
