"""Capacity plans: the fewest replicas (a capacity plan) or GPUs (a deployment search) that meet an SLA.

    plan = plan_capacity(source, target, options)   per variant, the fewest replicas at the target's demand
    plan = plan_search(source, target, options)     every point of the scenario's `search:` space, ranked by cost

`target.py` says what a plan must meet (the demand and the SLA); `probe.py`
judges one cluster size, `probe_store.py` keeps its runs, `replica_search.py`
searches sizes, `reach.py` stops a search that cannot meet its SLA, `runs.py`
runs independent sizings side by side, `search.py` sizes a search's
deployments, `plan_json.py`, `tables.py` and `files.py` are the plan's JSON,
text tables and files (written by the entry points themselves when the
options give a results folder).
"""

from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.run import plan_capacity, plan_search
from specplan.simulator.study.plan.search import DeploymentPlan
from specplan.simulator.study.plan.target import Target

__all__ = ["CapacityPlan", "DeploymentPlan", "Target", "plan_capacity", "plan_search"]
