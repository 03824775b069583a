"""`specplan sweep`: run (or resume) a scenario's sweep and write its CSVs and report."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from simulator.output import clean


def add_runner_args(p: argparse.ArgumentParser) -> None:
    """--workers, --backend, --address, --quiet, --json (shared with `specplan demo`)."""
    p.add_argument("--workers", type=int, help="parallel simulations (default: the number of cores)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool, or Ray tasks (the 'ray' extra)")
    p.add_argument("--address", help="with --backend ray: an existing Ray cluster (default: start one)")
    p.add_argument("--no-report", dest="report", action="store_false", help="write the CSVs only")
    p.add_argument("--json", action="store_true", help="print a JSON summary (no progress bar)")
    p.add_argument("--quiet", action="store_true", help="print nothing (no progress bar)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a scenario's sweep: points, Pareto frontiers, SLA comparisons, report")
    p.add_argument("scenario", help="scenario YAML file with a sweep: block")
    p.add_argument("--out", required=True, help="results folder (created; re-running resumes it)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a value of the base scenario by dotted key; repeatable")
    add_runner_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from simulator.sweep import run_sweep

    result = run_sweep(args.scenario, args.out, workers=args.workers, backend=args.backend,
                       address=args.address, progress=False if (args.quiet or args.json) else None,
                       report=args.report, overrides=args.overrides)
    report_outcome(result, Path(args.out), args)
    return 0


def report_outcome(result: Any, out: Path, args: argparse.Namespace) -> None:
    """Print the JSON summary, or the SLA table and where the files are."""
    if args.json:
        payload = {"out": str(out), "report": str(result.report) if result.report else None,
                   "points": len(result.points), "computed": result.computed, "reused": result.reused,
                   "comparisons": result.comparisons.to_dict(orient="records")}
        sys.stdout.write(json.dumps(clean(payload), indent=2) + "\n")
        return
    if args.quiet:
        return
    print(f"{len(result.points)} points ({result.computed} simulated, {result.reused} reused) in {out}/")
    if not result.comparisons.empty:
        print(comparison_text(result))
    if result.report is not None:
        print(f"report: {result.report}")


def comparison_text(result: Any) -> str:
    lines = [f"throughput per GPU at each SLA (tokens/s/user {result.statistic}), gain vs "
             f"{result.comparisons['baseline'].iloc[0]}:"]
    for sla, group in result.comparisons.groupby("sla_tps_user", sort=False):
        cells = [f"{r.label} {fmt_thr(r.throughput_per_gpu)}{fmt_gain(r.gain_vs_baseline)}"
                 for r in group.itertuples()]
        lines.append(f"  >= {sla:g}: " + "; ".join(cells))
    return "\n".join(lines)


def fmt_thr(value: float) -> str:
    return "unreachable" if math.isnan(value) else f"{value:,.0f}"


def fmt_gain(value: float) -> str:
    return "" if math.isnan(value) else f" ({100 * value:+.0f}%)"
