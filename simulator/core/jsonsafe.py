"""JSON that any reader accepts: NaN and infinities become null, numpy scalars plain numbers."""

from __future__ import annotations

import json
import math
from typing import Any


def clean(obj: Any) -> Any:
    """NaN and infinities → None (JSON null); numpy scalars → Python numbers."""
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(clean(obj), indent=2, sort_keys=False) + "\n"
