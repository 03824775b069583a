"""`policy:` of a scenario: the name against the registry, `params` against the policy's `Params`.

The policies declare their parameters as plain dataclasses
(specplan.fields.bounded); this is where a mapping is checked against
them, with the key path and the closest valid key in every error, like
every other section of a scenario. One rule covers every policy's lengths:
a parameter declared a verification length (`bounded(..., verify_length=True)`:
static's `length`, length-schedule's entries, dspark-async's `cold_length`)
lies in 0..γ, the drafter's block; a longer one is refused here, in one
line, rather than cut to γ while the resolved scenario kept the asked
value (`verify_length_error` is the rule; `specplan tune --lengths` asks it
too). Loading a scenario builds the params
once and writes them back with every default filled in
(specplan.simulator.scenario.load.with_policy_params).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specplan.policies.errors import PolicyKeyError
from specplan.policies.registry import policy_class
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Context, build, join


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
    check_verify_lengths(policy_params(spec, path), drafter.block_size if drafter.speculates else 0,
                         f"{path}.params")


def check_verify_lengths(params: Any, block_size: int, path: str) -> None:
    """Every field of `params` (nested ones too) declared a verification length lies in 0..block_size."""
    for f in dataclasses.fields(params):
        value, where = getattr(params, f.name), join(path, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check_verify_lengths(value, block_size, where)
        elif f.metadata.get("verify_length") and value is not None:
            entries = value.items() if isinstance(value, dict) else [("", value)]
            for key, length in entries:
                problem = verify_length_error([length], block_size)
                if problem is not None:
                    raise ScenarioError(join(where, key) if key else where, problem)


def verify_length_error(lengths: Iterable[int], block_size: int) -> str | None:
    """Why these verification lengths cannot run with a block of γ = `block_size` drafts, or None."""
    values = list(lengths)
    if values and all(0 <= v <= block_size for v in values):
        return None
    shown = values[0] if len(values) == 1 else values
    return (f"must lie in 0..{block_size} (a step verifies at most the drafter's block of drafter.block_size "
            f"= {block_size} drafts per request), got {shown}")
