"""Policy names → classes. Adding a policy is one module plus one line here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specplan.policies.base import Policy
from specplan.policies.baselines import MTP1, NoSpeculation, Static
from specplan.policies.dspark import DSparkAsync, DSparkGlobal, DSparkGreedy
from specplan.policies.goodput import Goodput
from specplan.policies.oracle import Oracle
from specplan.policies.schedule import LengthSchedule
from specplan.policies.threshold import Threshold
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Context, build, closest

POLICIES: dict[str, type[Policy]] = {
    "none": NoSpeculation,
    "mtp-1": MTP1,
    "static": Static,
    "threshold": Threshold,
    "dspark-greedy": DSparkGreedy,
    "dspark-global": DSparkGlobal,
    "dspark-async": DSparkAsync,
    "goodput": Goodput,
    "length-schedule": LengthSchedule,
    "oracle": Oracle,
}


def policy_class(name: str, path: str = "policy.name") -> type[Policy]:
    if name not in POLICIES:
        raise ScenarioError(path, f"unknown policy '{name}'" + closest(name, POLICIES))
    return POLICIES[name]


def policy_params(spec: Any, path: str = "policy") -> Any:
    cls = policy_class(spec.name, f"{path}.name")
    return build(cls.Params, dict(spec.params), f"{path}.params", Context(Path.cwd()))


def validate_policy(spec: Any, drafter: Any, path: str) -> None:
    """Check the name and params, and that the policy can run with this drafter."""
    cls = policy_class(spec.name, f"{path}.name")
    policy_params(spec, path)
    if cls.drafts and not drafter.speculates:
        raise ScenarioError(
            f"{path}.name", f"policy '{spec.name}' verifies drafts but drafter.family is 'none'"
        )


def make_policy(spec: Any, block_size: int) -> Policy:
    cls = policy_class(spec.name)
    return cls(policy_params(spec), block_size)
