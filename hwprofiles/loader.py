"""`hardware.profile` of a scenario → a `StepProfile`.

Accepted forms: an inline mapping (`{kind: linear, ...}` or
`{kind: table, ...}`), `builtin:NAME` (a file shipped in `hwprofiles/data/`),
or a path to a profile CSV file (already resolved against the scenario's
folder by the scenario loader).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from specplan.hwprofiles.fileformat import DATA_DIR, load_builtin, read_profile_csv
from specplan.hwprofiles.profile import StepProfile, linear_profile, table_profile
from specplan.simulator.core.errors import SpecplanError

INLINE_KINDS = ("linear", "table")


def load_profile(spec: str | dict[str, Any]) -> StepProfile:
    """Resolve a scenario's profile spec; every failure is a one-line SpecplanError.

    A file is read once per version: the cache is keyed by its size and
    modification time, so a profile edited in place is read again.
    """
    if isinstance(spec, dict):
        return inline_profile(spec)
    return _load_file_cached(spec, file_stamp(profile_file(spec)))


def profile_file(spec: str | dict[str, Any]) -> Path | None:
    """The file a profile spec reads (`builtin:NAME` is hwprofiles/data/NAME.csv); None for inline ones."""
    if isinstance(spec, dict):
        return None
    if spec.startswith("builtin:"):
        return DATA_DIR / f"{spec.removeprefix('builtin:')}.csv"
    return Path(spec)


def file_stamp(path: Path | None) -> tuple[int, int] | None:
    """(size, mtime in ns) of a file, None when it cannot be read (the loader then names the problem)."""
    try:
        stat = os.stat(path) if path is not None else None
    except OSError:
        return None
    return None if stat is None else (stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _load_file_cached(spec: str, stamp: tuple[int, int] | None) -> StepProfile:
    if spec.startswith("builtin:"):
        return load_builtin(spec.removeprefix("builtin:"))
    return read_profile_csv(spec)


def inline_profile(spec: dict[str, Any]) -> StepProfile:
    kind = spec.get("kind")
    allowed = {"linear": {"kind", "base_ms", "per_token_ms", "max_tokens"},
               "table": {"kind", "tokens", "step_ms", "extrapolation"}}
    if kind not in allowed:
        raise SpecplanError(f"kind: must be one of {', '.join(INLINE_KINDS)}, got {kind!r}")
    unknown = set(spec) - allowed[kind]
    if unknown:
        raise SpecplanError(f"{sorted(unknown)[0]}: unknown key for a {kind} profile")
    try:
        if kind == "linear":
            return linear_profile(
                _number(spec, "base_ms"), _number(spec, "per_token_ms"), int(spec.get("max_tokens", 16384))
            )
        return table_profile(_numbers(spec, "tokens"), _numbers(spec, "step_ms"), spec.get("extrapolation", "none"))
    except (TypeError, ValueError) as exc:
        raise SpecplanError(f"bad {kind} profile: {exc}") from None


def _number(spec: dict[str, Any], key: str) -> float:
    if key not in spec:
        raise SpecplanError(f"{key}: required key is missing")
    value = spec[key]
    if isinstance(value, bool):
        raise SpecplanError(f"{key}: expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SpecplanError(f"{key}: expected a number, got {value!r}") from None


def _numbers(spec: dict[str, Any], key: str) -> list[float]:
    if key not in spec:
        raise SpecplanError(f"{key}: required key is missing")
    values = spec[key]
    if not isinstance(values, list) or not values:
        raise SpecplanError(f"{key}: expected a non-empty list of numbers")
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise SpecplanError(f"{key}: expected a list of numbers") from None
