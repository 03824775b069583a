"""The shipped calibration table: the non-kernel terms fitted once per engine version, layout kind and model on the
public development set, and how `run`, `sweep`, `plan` and `tune` take a row of it by default.

Place in the data flow: `specplan replicate benchmarks/published --calibrate --write-table PATH`
(specplan.simulator.study.replication.table) writes the table; it ships as package data
(hwprofiles/public/calibration.yaml, `SHIPPED_TABLE`); the command line's calibration step
(specplan.cli.calibration) asks `table_calibration` for the row that matches a scenario's engine, engine version,
layout and model, and applies it exactly as a calibration file is applied (calibration.apply_calibration: scenario
overrides after the command line's own). No row matches: a line says so and the physics runs alone.
`--uncalibrated` skips the table; `--calibration FILE` (a deployment's own fit) replaces it.

The file (YAML, `format: specplan-calibration-table/1`):

    format: specplan-calibration-table/1
    version: 3                      # bumped by every --write-table over an existing table
    written: 2026-12-07
    written_by: specplan replicate benchmarks/published --calibrate ... --write-table ...
    development_set: {folder: benchmarks/published, serving_cases: 20, held_out: "..."}
    rows:
      - match: {engine: sglang, engine_version: 0.5.14, layout: dp-attention, model: DeepSeek-V4-Flash}
        label: 18 public sglang DP-attention runs (...)
        terms: {host_cycle_ms: {value, interval, source}, verify_scale: ..., dp_sync_ms: ...,
                eager_surcharge_ms: ..., extend_op_us: ..., ttft_per_request_ms: ...}   # a calibration file's
        fitted_on: {runs, figures, cases, gpus, models, measured_versions}
        errors: {calibrated: ..., transferred: ..., transferred_layout: ...}   # median |error| (informative)
    not_shipped:
      - {engine: vllm, engine_version: "0.24", layout: tp, reason: "..."}

The rule that carries a row to a scenario: a row matches on engine, engine version (as the scenario resolves it:
`calibration.deployment_of`), layout kind and model (the profile's, as `calibration.model_name` names it: a
repackaging such as -FP8 is the same model); its GPU is the scenario's own, and the row's transferred
(leave-one-GPU-out) error on the development set is the estimate of what that costs. A row of another model is
never carried: the level a row fits is its model's kernel tables' (DeepSeek-R1 on H200 fits a scale of 0.62-0.85
where DeepSeek-V4-Flash's SGLang TP row fits 1.2; docs/guides/replication.md, "Calibration that transfers"). A row
with no `model` (tables before v7) matches every model. A sweep's or search's variants take the row the base scenario matched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specplan import hwprofiles
from specplan.simulator.scenario.calibration import (
    FACTS,
    Applied,
    Calibration,
    CalibrationError,
    Deployment,
    LaunchPriced,
    apply_calibration,
    deployment_of,
    model_name,
    read_term,
    read_yaml_of_format,
)
from specplan.simulator.scenario.spec import Scenario

TABLE_FORMAT = "specplan-calibration-table/1"
SHIPPED_TABLE = Path(hwprofiles.__file__).resolve().parent / "public" / "calibration.yaml"
MATCH = ("engine", "engine_version", "layout")
ANY_MODEL = "any"   # a row written before rows were keyed by model (table v6 and older)
LAYOUT_WORDS = {"tp": "TP", "dp-attention": "DP-attention"}


@dataclass(frozen=True)
class TableRow:
    """One row: what it matches, its terms (a calibration file's), its label and what it was fitted on."""

    match: dict[str, str]
    label: str
    calibration: Calibration
    fitted_on: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[str, ...]:
        return (*(self.match[k] for k in MATCH), self.model)

    @property
    def model(self) -> str:
        return self.match.get("model", ANY_MODEL)


@dataclass(frozen=True)
class Table:
    """The table as read: its version, rows and the rows not shipped (and why)."""

    version: int
    rows: list[TableRow]
    not_shipped: list[dict[str, str]]
    path: str
    written_by: str = ""

    def find(self, here: Deployment) -> TableRow | None:
        want, model = (here.engine, here.engine_version, here.layout), model_name(here.model)
        return next((row for row in self.rows if row.key()[:3] == want and row.model in (model, ANY_MODEL)), None)


def describe_match(engine: str, version: str, layout: str, model: str = ANY_MODEL) -> str:
    """'sglang 0.5.14 DP-attention, DeepSeek-V4-Flash' (the engine as the traits table names it)."""
    words = f"{engine} {version} {LAYOUT_WORDS.get(layout, layout)}"
    return words if model == ANY_MODEL else f"{words}, {model}"


def read_table(path: str | Path | None = None) -> Table:
    """The table at `path` (default: the shipped one, SHIPPED_TABLE), checked (one-line CalibrationError)."""
    path = Path(path or SHIPPED_TABLE)
    raw = read_yaml_of_format(path, f"calibration table {path}", TABLE_FORMAT, f"expected format: {TABLE_FORMAT}")
    version = raw.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CalibrationError(f"calibration table {path}: version must be a whole number >= 1")
    rows = [read_row(path, i, body) for i, body in enumerate(raw.get("rows") or [])]
    keys = [row.key() for row in rows]
    if len(set(keys)) != len(keys):
        raise CalibrationError(f"calibration table {path}: two rows match the same engine, version, layout and model")
    return Table(version, rows, list(raw.get("not_shipped") or []), str(path), str(raw.get("written_by", "")))


def read_row(path: Path, index: int, body: Any) -> TableRow:
    where = f"calibration table {path}: rows[{index}]"
    match = body.get("match") if isinstance(body, dict) else None
    if not isinstance(match, dict) or any(not isinstance(match.get(k), str) for k in MATCH):
        raise CalibrationError(f"{where}.match must give {', '.join(MATCH)} as strings")
    terms = body.get("terms")
    if not isinstance(terms, dict):
        raise CalibrationError(f"{where}.terms must be a mapping of terms")
    if not isinstance(match.get("model", ANY_MODEL), str):
        raise CalibrationError(f"{where}.match.model must be a model's name (as calibration.model_name gives it)")
    keys = (*MATCH, "model") if "model" in match else MATCH
    label = str(body.get("label") or describe_match(*(match[k] for k in keys)))
    facts = Deployment(match["engine"], match["engine_version"], "any", "any", match["layout"])
    calibration = Calibration(facts, {name: read_term(path, name, term) for name, term in terms.items()},
                              path=str(path))
    return TableRow({k: str(match[k]) for k in keys}, label, calibration, dict(body.get("fitted_on") or {}),
                    dict(body.get("errors") or {}))


@dataclass(frozen=True)
class TableApplied(Applied):
    """A table row as one scenario takes it (the overrides are a calibration file's), or no row at all."""

    table: Table
    row: TableRow | None
    here: Deployment

    @classmethod
    def of(cls, applied: Applied | None, table: Table, row: TableRow | None, here: Deployment) -> TableApplied:
        if applied is None:
            return cls(Calibration(here, {}, path=table.path), [], {}, [], table, row, here)
        return cls(applied.calibration, applied.overrides, {}, applied.not_applied, table, row, here)

    def source(self) -> str:
        if not self.table.version:
            return f"no calibration table is installed ({self.table.path} is missing), so it"
        return f"the shipped calibration table v{self.table.version}"

    def lines(self) -> list[str]:
        here = describe_match(self.here.engine, self.here.engine_version, self.here.layout,
                              model_name(self.here.model))
        if self.row is None:
            return [f"calibration: none: {self.source()} has no row for {here}; the physics alone "
                    f"(`--calibration FILE` applies a fit of your own)"]
        out = [f"calibration: calibrated on {self.row.label} ({self.source()}; --uncalibrated for the physics "
               f"alone)"]
        out += self.applied_lines() + self.not_applied_lines()
        transferred = self.row.errors.get("transferred")
        if isinstance(transferred, float):
            rule = ("engine, version and layout match" if self.row.model == ANY_MODEL else
                    "engine, version, layout and model match")
            out.append(f"  carried to {self.here.gpu}, {self.here.model} by the table's rule ({rule}); "
                       f"leave-one-GPU-out median |error| on its development set {transferred:.1%}")
        return out

    def summary_keys(self) -> dict[str, Any]:
        if self.row is None:
            return {"calibration": "none", "calibration_deployment": "no row of the shipped table matches",
                    "calibration_transfer": "none"}
        return {"calibration": f"{self.source()}: {self.row.label}",
                "calibration_deployment": describe_match(*self.row.key()),
                "calibration_transfer": f"gpu any -> {self.here.gpu}; model {self.row.model} -> {self.here.model} "
                                        "(the table's rule)"}


def table_calibration(scenario: Scenario, table: Table | None = None,
                      launch_priced: LaunchPriced | None = None) -> TableApplied:
    """The shipped table's row for `scenario` (loaded without it) as overrides, or no row (a line says so);
    `launch_priced` as for `apply_calibration` (the extend term applies)."""
    here = deployment_of(scenario)
    if table is None and not SHIPPED_TABLE.exists():   # an install without its package data: said, never guessed
        return TableApplied.of(None, Table(0, [], [], str(SHIPPED_TABLE)), None, here)
    table = table or read_table()
    row = table.find(here)
    if row is None:
        return TableApplied.of(None, table, None, here)
    fitted = Deployment(*(getattr(here, f) if f in ("gpu", "model") else getattr(row.calibration.deployment, f)
                          for f in FACTS))
    calibration = Calibration(fitted, row.calibration.terms, path=table.path)
    return TableApplied.of(apply_calibration(calibration, scenario, launch_priced=launch_priced), table, row, here)
