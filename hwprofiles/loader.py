"""`hardware.profile` of a scenario → a `StepProfile`.

Accepted forms: an inline profile (`{kind: linear, ...}` or
`{kind: table, ...}`, validated by the scenario layer into
`specplan.hwprofiles.inline` dataclasses), `builtin:NAME` (a file shipped in `hwprofiles/data/`),
or a path to a profile CSV file (already resolved against the scenario's
folder by the scenario loader).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from specplan.hwprofiles.fileformat import DATA_DIR, load_builtin, read_profile_csv
from specplan.hwprofiles.inline import InlineProfile, LinearProfile, TableProfile
from specplan.hwprofiles.profile import StepProfile, linear_profile, table_profile


def load_profile(spec: str | InlineProfile) -> StepProfile:
    """Resolve a scenario's profile spec; every failure is a one-line ProfileError.

    A file is read once per version: the cache is keyed by its size and
    modification time, so a profile edited in place is read again.
    """
    if isinstance(spec, (LinearProfile, TableProfile)):
        return inline_profile(spec)
    return _load_file_cached(spec, file_stamp(profile_file(spec)))


def profile_file(spec: str | InlineProfile) -> Path | None:
    """The file a profile spec reads (`builtin:NAME` is hwprofiles/data/NAME.csv); None for inline ones."""
    if isinstance(spec, (LinearProfile, TableProfile)):
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


def inline_profile(spec: InlineProfile) -> StepProfile:
    if isinstance(spec, LinearProfile):
        return linear_profile(spec.base_ms, spec.per_token_ms, spec.max_tokens)
    return table_profile(list(spec.tokens), list(spec.step_ms), spec.extrapolation)
