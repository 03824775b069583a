"""Plain declarations of the `workload:` keys: dataclass fields with their bounds as metadata.

`bounded(0.0, ge=0)` is a dataclass field whose metadata holds the bounds
(`gt`, `ge`, `lt`, `le`) and, with `path=True`, marks a file path; the
scenario layer reads them when it validates a `workload:` mapping against
these dataclasses (resolving paths against the scenario's folder), so this
package declares its keys without depending on the validator.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def bounded(default: Any = dataclasses.MISSING, *, gt: float | None = None, ge: float | None = None,
            lt: float | None = None, le: float | None = None, path: bool = False) -> Any:
    """A dataclass field with numeric bounds or a path mark (mutable defaults are copied per instance)."""
    meta = {"gt": gt, "ge": ge, "lt": lt, "le": le, "path": path}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)
