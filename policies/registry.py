"""Policy names → classes. Adding a policy is one module plus one line here.

The scenario layer checks `policy.params` against a class's `Params`
(specplan.simulator.scenario.policy) and hands the instance to `make_policy`.
"""

from __future__ import annotations

import difflib
from typing import Any

from specplan.policies.base import Policy
from specplan.policies.baselines import MTP1, NoSpeculation, Static
from specplan.policies.dspark import DSparkAsync, DSparkGlobal, DSparkGreedy
from specplan.policies.errors import PolicyKeyError
from specplan.policies.goodput import Goodput
from specplan.policies.oracle import Oracle
from specplan.policies.schedule import LengthSchedule
from specplan.policies.threshold import Threshold

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
        raise PolicyKeyError(path, f"unknown policy '{name}'" + closest(name, POLICIES))
    return POLICIES[name]


def make_policy(name: str, params: Any, block_size: int) -> Policy:
    """The policy `name` with its `Params` instance (validated by the scenario layer)."""
    return policy_class(name)(params, block_size)


def closest(name: str, valid: dict[str, Any]) -> str:
    """' (did you mean 'x'?)' for the closest valid name, else the list of valid names."""
    match = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else f" (valid: {', '.join(sorted(valid))})"
