"""`hardware.profile` of a scenario → a `StepProfile`.

Accepted forms: an inline profile (`{kind: linear, ...}` or
`{kind: table, ...}`, validated by the scenario layer into
`specplan.hwprofiles.inline` dataclasses), `builtin:NAME` (a file shipped in `hwprofiles/data/`),
or a path to a profile CSV file (already resolved against the scenario's
folder by the scenario loader).
"""

from __future__ import annotations

from functools import lru_cache

from specplan.hwprofiles.fileformat import load_builtin, read_profile_csv
from specplan.hwprofiles.inline import InlineProfile, LinearProfile, TableProfile
from specplan.hwprofiles.profile import StepProfile, linear_profile, table_profile


def load_profile(spec: str | InlineProfile) -> StepProfile:
    """Resolve a scenario's profile spec; every failure is a one-line ProfileError."""
    if isinstance(spec, (LinearProfile, TableProfile)):
        return inline_profile(spec)
    return _load_file_cached(spec)


@lru_cache(maxsize=64)
def _load_file_cached(spec: str) -> StepProfile:
    if spec.startswith("builtin:"):
        return load_builtin(spec.removeprefix("builtin:"))
    return read_profile_csv(spec)


def inline_profile(spec: InlineProfile) -> StepProfile:
    if isinstance(spec, LinearProfile):
        return linear_profile(spec.base_ms, spec.per_token_ms, spec.max_tokens)
    return table_profile(list(spec.tokens), list(spec.step_ms), spec.extrapolation)
