"""`specplan replicate DIR`: predict published measurements (benchmarks/published/) and report the errors.

DIR is one case folder (source.yaml, scenario.yaml, published.csv) or a
folder of them. `--calibrate` adds the calibrated and transferred errors
(specplan.simulator.study.replication.replicate: host time and a level fitted
per engine version, layout and model, and cross-validated leaving one GPU, then one
layout, out: the grid points each fit needs are searched, `--full-grid`
simulates them all); `--grid FILE` reuses an earlier run's calibration_grid.csv
instead of simulating it again; `--write-table PATH` writes the calibration table
(the shipped one is hwprofiles/public/calibration.yaml). Writes replication.csv, .md, .json
and .png to --out and prints the table. `--only step` runs the step cases alone
(a static batch priced by the step model, no simulation: seconds), `--only
serving` the serving cases. `--attribute` names, for every serving figure off
by more than 30% with nothing fitted, the mode, cap or rule responsible
(one ablation at a time: specplan.simulator.study.replication.attribution).

The suite never shrinks in silence: the report opens with "N of M cases not
predicted" and each such case's reason, and the command then exits with status
1 (one line on stderr) unless `--allow-missing` accepts a partial record. A
folder with no figure that can be predicted is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specplan.cli.args import whole_number
from specplan.cli.commands import help_of
from specplan.reports.replication import write_replication
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.replicate import (
    Replication,
    ReplicationAsk,
    read_cases,
    replicate,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replicate", help=help_of("replicate"))
    p.add_argument("dir", help="a case folder, or a folder of case folders (benchmarks/published)")
    p.add_argument("--out", help="results folder (default: DIR/results)")
    p.add_argument("--calibrate", action="store_true",
                   help="also fit host time and a verify-time factor per engine version, layout and model (calibrated), "
                        "and cross-validate it leaving one GPU and one layout out (transferred)")
    p.add_argument("--grid", metavar="FILE",
                   help="with --calibrate: read the grid values an earlier --calibrate run wrote "
                        "(its calibration_grid.csv) instead of simulating them again")
    p.add_argument("--full-grid", action="store_true",
                   help="with --calibrate: simulate every grid point for every case and let every fit choose among "
                        "all of them (default: the search simulates the points the fits need, calibrate.py)")
    p.add_argument("--extend-us", nargs="+", type=extend_value, metavar="US",
                   help="with --calibrate: the values of an extend step's host cost per kernel (engine.cuda_graph."
                        "extend_op_us, µs; 'own' for the engine's own) each fit chooses among, beside host time and "
                        "scale, where a case's engine prices such a step by its launches; each fit takes the value whose choice reads "
                        "its TTFT figures best (default: own 10 16.9; 'own' alone: not fitted, about a third of the CPU time)")
    p.add_argument("--write-table", metavar="PATH",
                   help="with --calibrate: write the calibration table `run`, `sweep`, `plan` and `tune` apply "
                        "(the shipped one: hwprofiles/public/calibration.yaml)")
    p.add_argument("--workers", type=whole_number, default=1,
                   help="processes the predictions and the calibration's grid points run on (default 1; the cores you can spare)")
    p.add_argument("--only", choices=("step", "serving"),
                   help="run only the step cases (a static batch priced by the step model: seconds) or only the "
                        "serving cases")
    p.add_argument("--allow-missing", action="store_true",
                   help="exit 0 though some cases are not predicted (a missing built-in, a case marked not runnable); "
                        "without it such a record exits with status 1")
    p.add_argument("--attribute", action="store_true",
                   help="for every serving figure off by more than 30%% (predicted), predict it again with each "
                        "mode, cap or rule removed or at its alternative, and name the one that moves it most "
                        "toward the published figure (the responsible column)")
    p.add_argument("--quiet", action="store_true", help="print only the statistics")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    out = Path(args.out) if args.out else folder / "results"
    if args.workers < 1:
        raise SpecplanError(f"--workers must be at least 1, got {args.workers}")
    needs = [flag for flag, given in (("--grid", args.grid), ("--write-table", args.write_table),
                                      ("--full-grid", args.full_grid), ("--extend-us", args.extend_us)) if given]
    if needs and not args.calibrate:
        raise SpecplanError(f"{needs[0]} needs --calibrate")
    if args.grid and not Path(args.grid).is_file():
        raise SpecplanError(f"--grid {args.grid}: no such file")
    cases = [case for case in read_cases(folder) if args.only is None or case.kind == args.only]
    if not cases:
        raise SpecplanError(f"{folder}: no {args.only} case inside")
    ask = ReplicationAsk(calibrate=args.calibrate, grid=Path(args.grid) if args.grid else None, full_grid=args.full_grid,
                         table=Path(args.write_table) if args.write_table else None, command=command_line(args),
                         attribute=args.attribute, **({"extend_grid": tuple(args.extend_us)} if args.extend_us else {}))
    result = replicate(cases, ask,
                       RunOptions(out_dir=out, workers=args.workers, progress=not args.quiet))
    if not result.compared():
        raise SpecplanError(f"{folder}: nothing to compare: no figure of its {len(result.cases)} case(s) can be "
                            f"predicted ({first_reason(result)})")
    text = write_replication(result, out)
    lines = text.splitlines()
    print("\n".join(lines if not args.quiet else [line for line in lines if not line.startswith("|")]))
    print(f"results in {out}/")
    missing = result.not_predicted()
    if missing and not args.allow_missing:
        print(f"specplan: {len(missing)} of {len(result.cases)} cases not predicted (the first: {first_reason(result)}; "
              f"each in {out / 'replication.md'}); --allow-missing accepts a partial record", file=sys.stderr)
        return 1
    return 0


def command_line(args: argparse.Namespace) -> str:
    """The command as the table's provenance records it (the folder and flags that shape the fit)."""
    extend = ["--extend-us", *("own" if v is None else f"{v:g}" for v in args.extend_us)] if args.extend_us else []
    flags = ["--calibrate"] + (["--full-grid"] if args.full_grid else []) + (["--only", args.only] if args.only else []) + \
        extend + (["--write-table", args.write_table] if args.write_table else [])
    return " ".join(["specplan replicate", args.dir, *flags])


def extend_value(text: str) -> float | None:
    """An --extend-us value: 'own' (the engine's own figure) or a positive number of µs."""
    if text == "own":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give 'own' or a positive number of µs")
    return value


def first_reason(result: Replication) -> str:
    """The first case not predicted and its reason, cut to a readable length (the report has it whole)."""
    name, reason = next(iter(result.not_predicted().items()), ("", "no case"))
    reason = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS].rstrip() + "..."
    return f"{name}: {reason}" if name else reason


REASON_CHARS = 120
