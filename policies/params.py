"""Plain declarations of a policy's `policy.params`: dataclass fields with their bounds as metadata.

`bounded(0.5, gt=0, le=1)` is a dataclass field whose metadata holds the
bounds (`gt`, `ge`, `lt`, `le`); the scenario layer reads them when it
validates `policy.params` against a policy's `Params` dataclass, so this
package declares its parameters without depending on the validator.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def bounded(default: Any = dataclasses.MISSING, *, gt: float | None = None, ge: float | None = None,
            lt: float | None = None, le: float | None = None) -> Any:
    """A dataclass field with numeric bounds (mutable defaults are copied per instance)."""
    meta = {"gt": gt, "ge": ge, "lt": lt, "le": le}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)
