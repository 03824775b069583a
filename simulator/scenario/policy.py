"""`policy:` of a scenario: the name against the registry, `params` against the policy's `Params`.

The policies declare their parameters as plain dataclasses
(specplan.fields.bounded); this is where a mapping is checked against
them, with the key path and the closest valid key in every error, like
every other section of a scenario. Loading a scenario builds the params
once and writes them back with every default filled in
(specplan.simulator.scenario.load.with_policy_params).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specplan.policies.errors import PolicyKeyError
from specplan.policies.registry import policy_class
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Context, build


def policy_params(spec: Any, path: str = "policy") -> Any:
    """The policy's `Params` instance built from `spec.params` (a ScenarioError names the bad key)."""
    try:
        cls = policy_class(spec.name, f"{path}.name")
    except PolicyKeyError as exc:
        raise ScenarioError(exc.path, exc.detail) from None
    return build(cls.Params, dict(spec.params), f"{path}.params", Context(Path.cwd()))


def validate_policy(spec: Any, drafter: Any, path: str) -> None:
    """Check the name, and that the policy can run with this drafter (`policy_params` checks the params)."""
    try:
        cls = policy_class(spec.name, f"{path}.name")
    except PolicyKeyError as exc:
        raise ScenarioError(exc.path, exc.detail) from None
    if cls.drafts and not drafter.speculates:
        raise ScenarioError(
            f"{path}.name", f"policy '{spec.name}' verifies drafts but drafter.family is 'none'"
        )
