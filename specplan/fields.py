"""Plain declarations of a scenario key: a dataclass field whose metadata holds its bounds.

`bounded(0.5, gt=0, le=1)` is a dataclass field with numeric bounds (`gt`,
`ge`, `lt`, `le`), or with `path=True` a file path to resolve against the
scenario's folder, or with `verify_length=True` a verification length (an
int, or a mapping of them): drafts a request verifies per step, which can
never exceed the drafter's block γ (the scenario layer refuses more:
specplan.simulator.scenario.policy.check_verify_lengths). The scenario layer (specplan.simulator.core.schema)
reads the metadata when it validates a mapping, so the leaf packages
(hwprofiles, traces, policies) declare their keys with this one helper and
depend on no validator. Mutable defaults are copied per instance.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def bounded(default: Any = dataclasses.MISSING, *, gt: float | None = None, ge: float | None = None,
            lt: float | None = None, le: float | None = None, path: bool = False,
            verify_length: bool = False) -> Any:
    """A dataclass field with numeric bounds, a path mark or a verification-length mark, as metadata."""
    meta = {"gt": gt, "ge": ge, "lt": lt, "le": le, "path": path, "verify_length": verify_length}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)
