"""Overrides a study would replace at every point it runs: refused, naming what replaces them.

`--set KEY=VALUE` (and `--merge FILE`, `--seed`) change a sweep's or a plan's
base scenario. A point is that base with a variant merged over it, scaled to
a load and run at a seed, so three parts of the study's design can replace
what was set, and a run would answer another question than the one asked
while scenario.resolved.yaml showed the value set:

    seed                   a sweep runs every point at `sweep.seeds`
    cluster.replicas       a plan sizes the cluster itself
    the load's own key     `workload.arrivals.users` (sessions' `lanes`, poisson's / gamma's `rate_per_s`) are set
                           per point by the load axis: `sweep.load.<axis>`, or a plan's demand flag
    a variant's own keys   a key every variant sets for itself (or whose block every variant
                           replaces with another alternative, e.g. another policy) applies to no
                           point; one only some variants set applies to the others, as a base does;
                           a length schedule (`policy.params.schedule`) is one value, so `--merge
                           schedule.yaml` into variants that each run their own schedule is refused

A load axis that scales the workload (`rate_scale`, and `rate_per_s` on mmpp
or piecewise arrivals, which keeps their shape) composes with what was set,
so those overrides apply; so does a value every point keeps (a plan's
`--set workload.arrivals={kind: poisson, rate_per_s: 120} --rate 120`). Each
check raises one SpecplanError
naming the key, what replaces it and how to set it instead: `check_seed`,
`check_load` and `check_variants`, each given the paths `override_paths` reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import read_yaml
from specplan.simulator.scenario.scaling import load_key

MISSING = object()
# load axes that set (not scale) a key of these arrival kinds
SET_BY_AXIS = {("users", "closed_loop"), ("lanes", "sessions"), ("rate_per_s", "poisson"), ("rate_per_s", "gamma")}


def override_paths(overrides: Sequence[str]) -> list[tuple[str, ...]]:
    """The key paths the overrides set: `a.b=V` sets a.b; `@FILE` every leaf of its mapping."""
    paths: list[tuple[str, ...]] = []
    for item in overrides:
        if item.startswith("@"):
            fragment = read_yaml(Path(item[1:]))
            paths += list(leaves(fragment)) if isinstance(fragment, dict) else []
        else:
            key = item.partition("=")[0].strip()
            paths.append(tuple(key.split(".")))
    return paths


# mappings that are one value, a table, not keys each applying on its own: a length schedule
TABLES = (("policy", "params", "schedule"),)


def leaves(mapping: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in mapping.items():
        if isinstance(value, dict) and value and (*path, str(key)) not in TABLES:
            yield from leaves(value, (*path, str(key)))
        else:
            yield (*path, str(key))


def value_at(raw: Any, path: tuple[str, ...]) -> Any:
    """The value at a key path; a part matches a key by its text (a schedule's batch sizes are integers)."""
    for part in path:
        if not isinstance(raw, dict):
            return MISSING
        key = next((k for k in raw if str(k) == part), MISSING)
        if key is MISSING:
            return MISSING
        raw = raw[key]
    return raw


def check_seed(name: str, paths: Sequence[tuple[str, ...]], body: dict, seeds: Sequence[int] | None) -> None:
    """Refuse `seed` set while the points run at `seeds` (sweep.seeds; None: the base's seed)."""
    if ("seed",) in paths and seeds is not None and list(seeds) != [body.get("seed")]:
        seed = body.get("seed")
        raise SpecplanError(f"{name}: seed={seed} does not apply: the sweep runs every point at sweep.seeds "
                            f"({list(seeds)}); set sweep.seeds=[{seed}] instead")


def check_sized(name: str, paths: Sequence[tuple[str, ...]]) -> None:
    """Refuse `cluster.replicas` set for a plan, which sizes the cluster itself."""
    if any(path == ("cluster", "replicas")[: len(path)] and len(path) > 1 for path in paths):
        raise SpecplanError(f"{name}: cluster.replicas does not apply: a plan sizes the replicas itself (--max-replicas caps "
                            "them)")


def check_variants(name: str, paths: Sequence[tuple[str, ...]], body: dict,
                   variants: Sequence[tuple[str, dict]]) -> None:
    """Refuse a key set in `body` that every variant merged over it ((where, merged mapping) each) replaces:
    it applies to no point. A key only some variants set for themselves applies to the others, as a base does."""
    for path in paths:
        replaced = [where for where, merged in variants if value_at(merged, path) != value_at(body, path)]
        if variants and len(replaced) == len(variants):
            shown = replaced[0] if len(replaced) == 1 else f"every variant ({', '.join(replaced)})"
            raise SpecplanError(f"{name}: {'.'.join(path)} does not apply: {shown} sets its own; edit the "
                                "variants instead (or --merge a fragment into them)")


def check_load(name: str, paths: Sequence[tuple[str, ...]], body: dict, loaded: dict, axis: str, shown: str,
               arrivals: Any) -> None:
    """Refuse the load's own key set in `body` when the load axis (named `shown`) sets it to another value
    in `loaded` (a point's mapping at one load); an axis that scales the workload composes with it."""
    if (axis, arrivals.KIND) not in SET_BY_AXIS:
        return
    leaf = tuple(load_key(arrivals).split("."))
    for path in paths:
        if path == leaf[: len(path)] and value_at(loaded, leaf) != value_at(body, leaf):
            raise SpecplanError(f"{name}: {'.'.join(path)} does not apply: each point's {leaf[-1]} is set by {shown} "
                                f"({value_at(loaded, leaf)}, not {value_at(body, leaf)}); set the load there instead")
