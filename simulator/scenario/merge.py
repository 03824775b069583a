"""Variant and load → a point's raw scenario mapping (before validation).

A sweep variant is a partial scenario deep-merged over the base scenario's
raw YAML mapping: mappings merge key by key, anything else replaces. Where
the schema offers alternatives, the variant's choice replaces the base's
with no leftovers from the other alternative:

- a tagged union (`kind:` or `mode:`: workload.arrivals, prompt/output
  lengths, engine.prefill, drafter.latency, hardware.profile, the
  confidence head's `kind`): when the variant names a different tag than
  the base, the variant's mapping replaces the base's wholesale;
- `policy`: a different `name` replaces the whole block (params included);
- `drafter.acceptance`: `preset` and `per_position` exclude each other;
- `horizon`: `duration_s` and `requests` exclude each other (a run stops at
  one of them; both would stop arrivals at one and measure to the other);
- `drafter.acceptance.domains` is a request mix: a variant's mix replaces
  the base's (merging two mixes would not sum to 1).

The load axis is applied after the merge, to the validated variant's own
arrivals (specplan.simulator.scenario.scaling): it scales the workload the
user wrote (users of a closed loop, the rate of an arrival process, a
trace's rate_scale) and never substitutes another kind.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from specplan.simulator.core.schema import to_plain
from specplan.simulator.scenario.scaling import SWEEP_NAMES, scaled_arrivals

TAG_KEYS = ("kind", "mode")
NAME_TAGGED = (("policy",),)
EXCLUSIVE: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {
    ("drafter", "acceptance"): (("preset",), ("per_position",)),
    ("horizon",): (("duration_s",), ("requests",)),
}
WHOLE: tuple[tuple[str, ...], ...] = (("drafter", "acceptance", "domains"),)


def deep_merge(base: Any, over: Any, path: tuple[str, ...] = ()) -> Any:
    """`over` merged onto `base` (neither is modified) with the alternatives rule."""
    if not isinstance(base, dict) or not isinstance(over, dict) or path in WHOLE or replaces_wholesale(base, over, path):
        return copy.deepcopy(over)
    out = copy.deepcopy(base)
    for key in excluded_by(over, path):
        out.pop(key, None)
    for key, value in over.items():
        out[key] = deep_merge(out[key], value, (*path, key)) if key in out else copy.deepcopy(value)
    return out


def replaces_wholesale(base: dict, over: dict, path: tuple[str, ...]) -> bool:
    """True when `over` picks a different alternative of a tagged union than `base`."""
    tags = TAG_KEYS + (("name",) if path in NAME_TAGGED else ())
    return any(tag in over and tag in base and over[tag] != base[tag] for tag in tags)


def excluded_by(over: dict, path: tuple[str, ...]) -> list[str]:
    """Keys of the other alternative, which the variant's choice removes from the base."""
    groups = EXCLUSIVE.get(path, ())
    out: list[str] = []
    for group in groups:
        if any(key in over for key in group):
            out += [key for other in groups if other is not group for key in other]
    return out


def apply_variant(base: dict, variant: dict) -> dict:
    """The base mapping with one variant (its `label` removed) merged on top."""
    body = {k: v for k, v in variant.items() if k != "label"}
    return deep_merge(base, body)


def apply_load(raw: dict, arrivals: Any, load_kind: str, value: float,
               names: Mapping[str, str] = SWEEP_NAMES) -> dict:
    """`raw` with its workload's arrivals (`arrivals`, the validated spec of `raw`) scaled to one load value.

    `names` shows each load axis in a refusal (sweep.load.users, or a command-line flag).
    """
    out = copy.deepcopy(raw)
    out["workload"]["arrivals"] = to_plain(scaled_arrivals(arrivals, load_kind, value, names))
    return out


def strip_study_blocks(raw: dict) -> dict:
    """The mapping without `sweep:`, `sla:` and `search:` (a point is one plain scenario)."""
    return {k: v for k, v in raw.items() if k not in ("sweep", "sla", "search", "source")}
