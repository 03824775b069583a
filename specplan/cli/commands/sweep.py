"""`specplan sweep`: run (or resume) a scenario's sweep and write its CSVs and report."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from specplan.cli.args import whole_number
from specplan.cli.calibration import (
    add_calibration_args,
    say_calibration,
    take_calibration,
    write_calibration_record,
)
from specplan.cli.commands import help_of
from specplan.cli.commands.run import add_override_args
from specplan.cli.output import out_folder
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.study.backends import worker_count
from specplan.simulator.study.keepup import MIN_COMPLETED
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.sweep.run import SweepResult, run_sweep


def add_runner_args(p: argparse.ArgumentParser) -> None:
    """--workers, --backend, --address, --quiet, --json (shared with `specplan demo`)."""
    p.add_argument("--workers", type=whole_number, help="parallel simulations (default: the number of cores)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool, or Ray tasks (the 'ray' extra)")
    p.add_argument("--address", help="with --backend ray: an existing Ray cluster (default: start one)")
    p.add_argument("--no-report", dest="report", action="store_false", help="write the CSVs only")
    p.add_argument("--fidelity", metavar="DIR",
                   help="add the sim-to-real section of a `specplan fidelity --out DIR` result to the report")
    p.add_argument("--json", action="store_true", help="print a JSON summary (no progress bar)")
    p.add_argument("--quiet", action="store_true", help="print nothing (no progress bar)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help=help_of("sweep"))
    p.add_argument("scenario", help="scenario YAML file with a sweep: block")
    p.add_argument("--out", required=True, help="results folder (created; re-running resumes it)")
    add_override_args(p)
    add_runner_args(p)
    add_calibration_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    calibration = take_calibration(args)
    say_calibration(calibration, args)
    write_calibration_record(calibration, out_folder(args.out))
    sweep_and_report(args.scenario, args, args.overrides)
    return 0


def sweep_and_report(scenario: str | Path, args: argparse.Namespace, overrides: list[str] = []) -> None:  # noqa: B006
    """Run the sweep, write its report (unless --no-report) and print the outcome."""
    fidelity = Path(args.fidelity) if args.fidelity else None
    if fidelity is not None and not (fidelity / "fidelity.json").is_file():
        raise SpecplanError(f"--fidelity {fidelity}: no fidelity.json there (write one with `specplan fidelity --out DIR`)")
    out = out_folder(args.out)
    workers = worker_count(args.workers, "--workers")
    result = run_sweep(scenario, None, RunOptions(out_dir=out, workers=workers, backend=args.backend,
                                                  address=args.address,
                                                  progress=False if (args.quiet or args.json) else None,
                                                  overrides=tuple(overrides)))
    report = None
    if args.report:
        # the report's figures (matplotlib): imported only where one is written
        from specplan.reports.report import write_report

        report = write_report(result, out, fidelity)
    report_outcome(result, report, out, args)


def report_outcome(result: SweepResult, report: Path | None, out: Path, args: argparse.Namespace) -> None:
    """Print the JSON summary, or the SLA table and where the files are."""
    if args.json:
        payload = {"out": str(out), "report": str(report) if report else None,
                   "points": len(result.points), "computed": result.computed, "reused": result.reused,
                   "comparisons": result.comparisons.to_dict(orient="records"),
                   "lanes": result.lanes.to_dict(orient="records")}
        sys.stdout.write(json.dumps(clean(payload), indent=2) + "\n")
        return
    if args.quiet:
        return
    print(f"{len(result.points)} points ({result.computed} simulated, {result.reused} reused) in {out}/")
    if not result.comparisons.empty:
        print(comparison_text(result))
    if not result.lanes.empty:
        print(lanes_text(result))
    if report is not None:
        print(f"report: {report}")


def comparison_text(result: SweepResult) -> str:
    comp = result.comparisons
    thin = comp[comp["thin"].astype(str).str.len() > 0]
    if len(thin) == len(comp):  # nothing solid to compare: refused, not marked
        return "no comparison:" + thin_note(thin, every=True)[1:]
    lines = [f"throughput per GPU at each SLA (tokens/s/user {result.statistic}), gain vs "
             f"{comp['baseline'].iloc[0]}:"]
    if comp["throughput_edge"].astype(str).str.len().gt(0).any():
        lines[0] += " ('at max load': the largest simulated load's throughput, a lower bound)"
    baseline_thin = dict(zip(comp.loc[comp["label"] == comp["baseline"], "sla_tps_user"],
                             comp.loc[comp["label"] == comp["baseline"], "thin"], strict=True))
    for sla, group in comp.groupby("sla_tps_user", sort=False):
        cells = [f"{r.label} {fmt_thr(r.throughput_per_gpu)}{fmt_edge(r.throughput_edge, r.thin)}"
                 f"{fmt_gain(r.gain_vs_baseline, bool(r.thin or baseline_thin.get(sla)))}" for r in group.itertuples()]
        lines.append(f"  >= {sla:g}: " + "; ".join(cells))
    if not thin.empty:
        lines.append(thin_note(thin, every=False))
    return "\n".join(lines)


def lanes_text(result: SweepResult) -> str:
    """Each variant's throughput per GPU at each lanes value and its gain over the first (paired by seed, with
    its 95% interval): 'at 8 lanes: none 321; MTP-1 380 (+18% ± 7)'."""
    gains = result.lanes
    lines = [f"throughput per GPU at equal lanes (tok/s/GPU), gain vs {gains['baseline'].iloc[0]} paired by seed "
             "(± 95% interval; lanes.csv):"]
    for lanes, group in gains.groupby("lanes", sort=True):
        cells = [f"{r.label} {fmt_thr(r.throughput_per_gpu)}"
                 + ("" if r.label == r.baseline else fmt_paired(r.throughput_gain, r.throughput_gain_ci95))
                 for r in group.itertuples()]
        lines.append(f"  {lanes:g} lanes: " + "; ".join(cells))
    return "\n".join(lines)


def fmt_paired(gain: float, half: float) -> str:
    if math.isnan(gain):
        return ""
    return f" ({100 * gain:+.0f}%" + ("" if math.isnan(half) else f" ± {100 * half:.0f}") + ")"


def thin_note(thin: pd.DataFrame, every: bool) -> str:
    """What 'thin' means, the thinnest points, and what to do: the plan's rule, said once."""
    points = sorted({f"{r.label} at {r.thin}" for r in thin.itertuples()})
    shown = "; ".join(points[:4]) + (f"; and {len(points) - 4} more" if len(points) > 4 else "")
    head = "every reading would be thin" if every else "'thin'"
    return (f"  {head}: read from points where a seed completed fewer than {MIN_COMPLETED} requests in the "
            f"window ({shown}), too few to compare (a plan refuses such a probe); a gain is no firmer than its "
            "baseline: raise horizon.duration_s (or horizon.requests)" + ("" if every else " before reading these"))


def fmt_thr(value: float) -> str:
    return "unreachable" if math.isnan(value) else f"{value:,.0f}"


def fmt_edge(edge: object, thin: object = "") -> str:
    """' (at max load 128)': the reading is the largest simulated load's, a lower bound; '; thin' (or
    ' (thin)'): it rests on a point with too few requests to compare."""
    notes = [f"at {edge}" if isinstance(edge, str) and edge else "", "thin" if isinstance(thin, str) and thin else ""]
    shown = "; ".join(n for n in notes if n)
    return f" ({shown})" if shown else ""


def fmt_gain(value: float, thin: bool = False) -> str:
    return "" if math.isnan(value) else f" ({100 * value:+.0f}%{', thin' if thin else ''})"
