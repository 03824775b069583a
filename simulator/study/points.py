"""A sweep's base scenario → its points (variant × load × seed), their keys and their store.

Each point is one validated plain scenario. Its cache key is the sha256 of
the canonical JSON of its resolved mapping (every default filled in, paths
absolute, without the `sweep`/`sla` blocks) together with the digests of
every file it reads and of specplan's code (`specplan.simulator.study.inputs`):
two points with the same key are the same simulation, whatever label or
order produced them, and a profile or trace edited in place, or another
specplan, gives a new key. A finished
point is stored as `points/<key>.json` (written to a temporary file, then
renamed: a reader never sees half a file), so a sweep killed at any moment
and started again recomputes only what never finished.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.scenario import (
    Scenario,
    apply_overrides,
    read_yaml,
    resolved_mapping,
    scenario_from_mapping,
)
from specplan.simulator.scenario.merge import apply_load, apply_variant, strip_study_blocks
from specplan.simulator.scenario.scaling import SWEEP_NAMES, check_fits, load_key
from specplan.simulator.scenario.study import SlaSpec
from specplan.simulator.study.inputs import key_inputs
from specplan.simulator.study.shadows import check_load, check_seed, check_variants, override_paths


@dataclass(frozen=True)
class Point:
    """One simulation of the sweep: a labelled variant at one load and one seed."""

    label: str
    variant: int
    load_kind: str | None
    load: float | None
    seed: int
    scenario: Scenario
    key: str


@dataclass(frozen=True)
class SweepDesign:
    """The validated base scenario, its labels (variant order) and every point (row order)."""

    base: Scenario
    labels: list[str]
    points: list[Point]
    sla: SlaSpec | None
    source: str

    @property
    def variant_scenarios(self) -> dict[str, Scenario]:
        """The first point's scenario of each label (for report descriptions)."""
        out: dict[str, Scenario] = {}
        for point in self.points:
            out.setdefault(point.label, point.scenario)
        return out

    @property
    def notes(self) -> tuple[str, ...]:
        """What loading took from the profiles (Scenario.notes) over the base and every point, each once."""
        scenarios = [self.base, *(point.scenario for point in self.points)]
        return tuple(dict.fromkeys(note for scenario in scenarios for note in scenario.notes))

    @property
    def unique_points(self) -> list[Point]:
        """Points with distinct keys, first occurrence kept (order preserved)."""
        seen: dict[str, Point] = {}
        for point in self.points:
            seen.setdefault(point.key, point)
        return list(seen.values())


def point_key(scenario: Scenario) -> str:
    """sha256 of the canonical JSON of the resolved scenario (without `sweep`/`sla`) and its inputs.

    The inputs (specplan.simulator.study.inputs) are the digests of every file
    the scenario reads and specplan's version and code digest.
    """
    mapping = {k: v for k, v in resolved_mapping(scenario).items() if k not in ("sweep", "sla")}
    material = {"scenario": mapping, "inputs": key_inputs(scenario)}
    text = json.dumps(clean(material), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def read_source(source: str | Path | Scenario | dict, overrides: tuple[str, ...] | list[str] = (),
                base_dir: Path | None = None) -> tuple[dict, Path, str]:
    """(raw mapping, folder relative paths resolve against, name for messages) of a sweep's base."""
    if isinstance(source, Scenario):
        raw = resolved_mapping(source)
        return apply_overrides(raw, overrides), base_dir or Path.cwd(), source.source
    if isinstance(source, dict):
        return apply_overrides(source, overrides), base_dir or Path.cwd(), "<mapping>"
    path = Path(source)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise SpecplanError(f"{path}: a scenario must be a YAML mapping")
    return apply_overrides(raw, overrides), path.resolve().parent, str(path)


def design_sweep(source: str | Path | Scenario | dict, overrides: tuple[str, ...] | list[str] = (),
               base_dir: Path | None = None, sweep_block: Mapping[str, Any] | None = None) -> SweepDesign:
    """Validate the base scenario and every variant × load; list the points in row order. `sweep_block`
    replaces the scenario's `sweep:` block (its overrides applied after)."""
    raw, folder, name = read_source(source, (), base_dir)
    if sweep_block is not None:
        raw = {**raw, "sweep": dict(sweep_block)}
    raw = apply_overrides(raw, overrides)
    base = validated(raw, folder, name, "")
    sweep = base.sweep
    variants = list(sweep.variants) if sweep and sweep.variants else [{"label": base.policy.name}]
    load = sweep.load if sweep else None
    loads: list[tuple[str | None, float | None]] = (
        [(load.kind, v) for v in load.values] if load else [(None, None)])
    seeds = list(sweep.seeds) if sweep and sweep.seeds else [base.seed]
    if load:
        fits(base, load.kind, name, "")
    body = strip_study_blocks(raw)
    paths = override_paths(overrides)
    check_seed(name, paths, body, sweep.seeds if sweep and sweep.seeds else None)
    wheres = [f"sweep.variants[{index}] ({variant['label']})" if sweep and sweep.variants else ""
              for index, variant in enumerate(variants)]
    merges = [apply_variant(body, variant) for variant in variants]
    check_variants(name, paths, body, list(zip(wheres, merges, strict=True)) if sweep and sweep.variants else [])
    points = []
    for index, (variant, merged, where) in enumerate(zip(variants, merges, wheres, strict=True)):
        own = validated(merged, folder, name, where)
        for load_kind, value in loads:
            point_raw = loaded(merged, own, load_kind, value, name, where) \
                if load_kind and value is not None else copy.deepcopy(merged)
            shown = load_shown(own, load_kind) if load_kind else None
            if load_kind:
                check_load(name, paths, merged, point_raw, load_kind, SWEEP_NAMES[load_kind], own.workload.arrivals)
            scenario = validated(point_raw, folder, name, where, shown)
            for seed in seeds:
                seeded = dataclasses.replace(scenario, seed=seed)
                points.append(Point(variant["label"], index, load_kind, value, seed, seeded, point_key(seeded)))
    labels = [v["label"] for v in variants]
    return SweepDesign(base=base, labels=labels, points=points, sla=base.sla, source=name)


def validated(raw: dict, folder: Path, name: str, where: str, shown: Mapping[str, str] | None = None) -> Scenario:
    """scenario_from_mapping with errors naming the file and the variant; a key that `shown` maps is named
    as it was set (a load value set by `sweep.load.users` or `--users` rather than workload.arrivals.users)."""
    try:
        return scenario_from_mapping(raw, folder, source=name)
    except ScenarioError as exc:
        path = (shown or {}).get(exc.path)
        raise SpecplanError(prefix(name, where) + (f"{path}: {exc.detail}" if path else str(exc))) from None


def load_shown(scenario: Scenario, axis: str, names: Mapping[str, str] = SWEEP_NAMES) -> dict[str, str]:
    """How a refusal names the key a load axis sets in `scenario`'s workload: by the axis (`names`)."""
    return {load_key(scenario.workload.arrivals): names[axis]}


def loaded(raw: dict, scenario: Scenario, load_kind: str, value: float, name: str, where: str,
           names: Mapping[str, str] = SWEEP_NAMES) -> dict:
    """`raw` (validated as `scenario`) with its own workload scaled to one load value (sweeps and plans).

    `names` shows the load axes in the refusal when one does not fit the
    workload (`sweep.load.users`, or a plan's `rate_per_s` (the command's `--rate`), ...).
    """
    try:
        return apply_load(raw, scenario.workload.arrivals, load_kind, value, names)
    except ScenarioError as exc:
        raise SpecplanError(prefix(name, where) + str(exc)) from None


def fits(scenario: Scenario, load_kind: str, name: str, where: str, names: Mapping[str, str] = SWEEP_NAMES) -> None:
    """The refusal of `loaded`, before any mapping is built (the base's workload first, then each variant's)."""
    try:
        check_fits(scenario.workload.arrivals, load_kind, names)
    except ScenarioError as exc:
        raise SpecplanError(prefix(name, where) + str(exc)) from None


def prefix(name: str, where: str) -> str:
    return f"{name}: {where}: " if where else f"{name}: "


def normalise(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as it reads back from JSON (NaN → None), so fresh and cached rows are equal."""
    return json.loads(json.dumps(clean(summary)))


def point_path(points_dir: Path, key: str) -> Path:
    return points_dir / f"{key}.json"


def store_point(points_dir: Path, key: str, summary: dict[str, Any], scenario: Scenario) -> None:
    """Write points/<key>.json atomically (temporary file in the same folder, then os.replace)."""
    write_record(points_dir, key, point_record(key, summary, scenario))


def point_record(key: str, summary: dict[str, Any], scenario: Scenario) -> dict[str, Any]:
    """What points/<key>.json holds: the summary, the resolved scenario and the digests of its inputs."""
    return {"key": key, "summary": summary, "scenario": clean(resolved_mapping(scenario)),
            "inputs": key_inputs(scenario)}


def write_record(points_dir: Path, key: str, record: dict[str, Any]) -> None:
    """Write a point record atomically (a reader never sees half a file)."""
    points_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{key[:12]}.", suffix=".tmp", dir=points_dir)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, point_path(points_dir, key))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_partial(points_dir: Path | None, keys: list[str]) -> None:
    """Delete the temporary files of `keys` that killed workers may have left (never a stored point);
    the key "" matches every temporary file of the folder."""
    if points_dir is None:
        return
    for key in keys:
        for tmp in points_dir.glob(f".{key[:12]}.*.tmp" if key else ".*.tmp"):
            tmp.unlink(missing_ok=True)


def load_point(points_dir: Path, key: str) -> dict[str, Any] | None:
    """A stored point's summary, or None when it is missing or unreadable (then recomputed)."""
    path = point_path(points_dir, key)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key or not isinstance(record.get("summary"), dict):
        return None
    return record["summary"]
