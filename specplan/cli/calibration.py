"""`--calibration FILE`, `--calibration-transfer FACTS` and `--uncalibrated` of `run`, `sweep`, `plan` and `tune`.

By default the shipped calibration table's row for the scenario's engine, engine version, layout and model is applied
(specplan.simulator.scenario.calibration_table), named in the printout and the summary; where no row matches a
line says so and the physics runs alone. `--uncalibrated` runs the physics alone; `--calibration FILE` applies a
deployment's own fit instead of the table.

The file (specplan.simulator.scenario.calibration) is checked against the scenario's deployment and turned into
overrides appended after the command line's own `--set` / `--merge`, so every point, probe and tune run takes
it; the command prints which file it applied (its summary.json names it too, `calibration.json` beside a
sweep's, plan's or tune's files).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specplan.errors import SpecplanError
from specplan.simulator.scenario import Scenario, load_scenario
from specplan.simulator.scenario.calibration import (
    TRANSFERABLE,
    Applied,
    apply_calibration,
    parse_transfer,
    read_calibration,
)
from specplan.simulator.scenario.calibration_table import TableApplied, table_calibration

CALIBRATION_FILE = "calibration.json"


def add_calibration_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", metavar="FILE",
                   help="apply a calibration file written by `specplan fit` (host cycle, verify scale, ...): "
                        "refused when fitted for another engine, engine version, GPU, model or layout")
    p.add_argument("--calibration-transfer", metavar="FACTS",
                   help="carry a calibration fitted elsewhere: the facts that may differ, comma-separated ("
                        f"{', '.join(TRANSFERABLE)}; 'version' for engine_version); its terms apply unchanged")
    p.add_argument("--uncalibrated", action="store_true",
                   help="the physics alone: leave out the shipped calibration table's row (applied by default where "
                        "one matches the scenario's engine, engine version, layout and model)")


def launch_priced(scenario: Scenario) -> bool:
    """Whether the scenario's engine prices a step carrying prompt tokens by its launches (a calibration's extend
    term applies there), asked only where a calibration gives one."""
    # the engine's modules load pandas (its request log) when imported: `check` and `--help` stay light without it
    from specplan.simulator.engine.assembly import prices_extend_by_launches

    return prices_extend_by_launches(scenario)


def take_calibration(args: argparse.Namespace) -> Applied | None:
    """Read --calibration (else the shipped table's row), check it against the scenario (before the calibration) and
    append its overrides to args.overrides; None under --uncalibrated."""
    path = getattr(args, "calibration", None)
    if path and getattr(args, "uncalibrated", False):
        raise SpecplanError("--uncalibrated and --calibration FILE: give one (the physics alone, or your fit)")
    if not path:
        if getattr(args, "calibration_transfer", None):
            parse_transfer(args.calibration_transfer)  # a bad name is still refused
        if getattr(args, "uncalibrated", False):
            return None
        scenario = load_scenario(args.scenario, args.overrides, getattr(args, "seed", None))
        table = table_calibration(scenario, launch_priced=launch_priced)
        if table.row is None and not table.here.engine_version:
            return None   # no serving engine (a synthetic profile): no table could have its row, nothing to say
        args.overrides = [*args.overrides, *table.overrides]
        return table
    calibration = read_calibration(path)
    transfer = parse_transfer(getattr(args, "calibration_transfer", None))
    scenario = load_scenario(args.scenario, args.overrides, getattr(args, "seed", None))
    applied = apply_calibration(calibration, scenario, transfer, launch_priced=launch_priced)
    args.overrides = [*args.overrides, *applied.overrides]
    return applied


def say_calibration(applied: Applied | None, args: argparse.Namespace) -> None:
    """The calibration's lines: on stdout, on stderr under --json (stdout is the JSON), none under --quiet."""
    if applied is None or getattr(args, "quiet", False):
        return
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    for line in applied.lines():
        print(line, file=stream)


def write_calibration_record(applied: Applied | None, out: Path | None) -> None:
    """calibration.json beside a sweep's, plan's or tune's files: which file, what it set, what it carried."""
    if applied is None or out is None or (isinstance(applied, TableApplied) and applied.row is None):
        return
    out.mkdir(parents=True, exist_ok=True)
    record = {**applied.summary_keys(), "overrides": applied.overrides, "not_applied": applied.not_applied,
              "terms": {name: term.as_dict() for name, term in applied.calibration.terms.items()}}
    (out / CALIBRATION_FILE).write_text(json.dumps(record, indent=2) + "\n")
