"""`specplan tune`: a per-batch-size speculation-length schedule, searched, verified and exported for engines.

    specplan tune scenarios/default.yaml --out out/tune [--lengths 0:7] [--buckets 1,2,4,...] [--workers 2]

The search and verification are specplan.simulator.study.tune.schedule, the engine
files specplan.simulator.study.tune.export (the schedule three ways: specplan
policy block, TensorRT-LLM `draft_len_schedule`, a plain batch-size →
length table; and tune.json). This module parses the command line's
strings into the search space, writes the files and the report, and prints
the schedule and how it compares.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

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
from specplan.reports.tune import write_tune_report
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.study.backends import worker_count
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.tune.export import SCHEDULE_FILES, tune_record
from specplan.simulator.study.tune.run import TuneAsk, tune_schedule
from specplan.simulator.study.tune.schedule import (
    TUNED_ROLE,
    BucketChoice,
    TunedSchedule,
    key_rows,
    runs_text,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help=help_of("tune"))
    p.add_argument("scenario", help="scenario YAML file with a sweep load axis (and an sla: block to tune at)")
    p.add_argument("--out", required=True, help="results folder (created; re-running resumes it)")
    p.add_argument("--lengths", help="candidate static lengths, 'LOW:HIGH' or a comma list (default 0:γ)")
    p.add_argument("--buckets", help="batch-size upper bounds, comma list (default 1,2,4,... up to max_batch_requests)")
    p.add_argument("--loads", help="load values to search at (default: the scenario's sweep.load axis)")
    p.add_argument("--sla-tps", type=float, help="tokens/s/user to tune at (default: the scenario's first sla.tps_user)")
    p.add_argument("--seeds", type=whole_number,
                   help="seeds per point (the scenario's seed, +1, ...; default: the scenario's sweep.seeds): with "
                        "two or more each pick's interval is over seeds, else over one run's requests")
    p.add_argument("--workers", type=whole_number, help="parallel simulations (default: the number of cores)")
    add_override_args(p)
    p.add_argument("--no-report", dest="report", action="store_false", help="write the schedule files only")
    p.add_argument("--json", action="store_true", help="print the tune as JSON (no progress bar)")
    p.add_argument("--quiet", action="store_true", help="print nothing (no progress bar)")
    add_calibration_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = out_folder(args.out)
    calibration = take_calibration(args)
    say_calibration(calibration, args)
    write_calibration_record(calibration, out)
    ask = TuneAsk(lengths=parse_lengths(args.lengths), buckets=parse_buckets(args.buckets),
                  loads=parse_loads(args.loads), sla_tps=args.sla_tps, seeds=args.seeds)
    tuned = tune_schedule(args.scenario, ask, RunOptions(out_dir=out, workers=worker_count(args.workers, "--workers"),
                                                         progress=False if (args.quiet or args.json) else None,
                                                         overrides=tuple(args.overrides)))
    files = {name: out / name for name in SCHEDULE_FILES}
    if args.report:
        files["report.html"] = write_tune_report(tuned, out)
    if args.json:
        payload = {**tune_record(tuned), "files": {name: str(path) for name, path in files.items()}}
        sys.stdout.write(json.dumps(clean(payload), indent=2) + "\n")
    elif not args.quiet:
        print(schedule_text(tuned))
        print(comparison_text(tuned))
        print("files: " + ", ".join(str(path) for path in files.values()))
    if tuned.warning and not args.quiet:
        print(f"specplan: warning: {tuned.warning}", file=sys.stderr)
    return 0


# ---- arguments ----------------------------------------------------------------------------------
def parse_lengths(text: str | None) -> tuple[int, ...] | None:
    """--lengths: 'LOW:HIGH' (inclusive) or '0,1,3' → the lengths (None: the tune's default, 0..γ)."""
    if text is None:
        return None
    try:
        if ":" in text:
            start, stop = (int(v) for v in text.split(":", 1))
            if start > stop:
                raise SpecplanError(f"--lengths {text}: the range is reversed (LOW:HIGH, LOW <= HIGH: "
                                    f"write {stop}:{start})")
            return tuple(range(start, stop + 1))
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SpecplanError(f"--lengths: expected 'LOW:HIGH' or a comma list of whole numbers, got {text!r}") from None
    if not values:
        raise SpecplanError(f"--lengths: give at least one length, got {text!r}")
    return values


def parse_buckets(text: str | None) -> tuple[int, ...] | None:
    """--buckets: '1,4,16' → batch-size upper bounds (None: the tune's default, powers of two)."""
    if text is None:
        return None
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SpecplanError(f"--buckets: expected a comma list of whole numbers, got {text!r}") from None


def parse_loads(text: str | None) -> tuple[float, ...] | None:
    """--loads: '8,16,32' → the load values to search at (None: the scenario's sweep.load axis)."""
    if text is None:
        return None
    try:
        values = sorted({float(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise SpecplanError(f"--loads: expected a comma list of numbers, got {text!r}") from None
    if len(values) < 2 or values[0] <= 0:
        raise SpecplanError(f"--loads: give at least two positive load values, got {text!r}")
    return tuple(values)


# ---- output -------------------------------------------------------------------------------------
def schedule_text(tuned: TunedSchedule) -> str:
    """The tuned schedule, one line per bucket: the pick, the lengths tied with it, a cap."""
    base = tuned.base
    lines = [f"tuned length schedule for {base.name} ({base.drafter.family}, γ = {tuned.block_size}); "
             f"objective: {tuned.objective.describe()}",
             f"  a length whose difference from the best lies within its 95% interval ({interval_words(tuned)}) "
             "ties with it; a tie is broken toward the schedule's shape: the longest first, then the previous "
             "bucket's length"]
    for choice in tuned.buckets:
        best = choice.figures[choice.length]
        where = "" if best.measured else " (outside the measured batches: nearest operating point)"
        lines.append(f"  batch {choice.sizes:>7}: length {choice.length}  (read at batch {choice.batch:.1f}: "
                     f"{best.throughput_per_gpu:,.0f} ± {best.throughput_ci95:,.0f} tok/s/GPU, "
                     f"{best.tps_user:.0f} tok/s/user){tie_text(choice)}{where}")
    lines.append(f"  schedule {{batch-size upper bound: length}}: {tuned.schedule}")
    return "\n".join(lines)


def interval_words(tuned: TunedSchedule) -> str:
    if tuned.interval == "seeds":
        return "Student-t over the seeds' paired differences"
    return "over one seed's requests: add --seeds 2 or more for one over seeds"


def tie_text(choice: BucketChoice) -> str:
    """'; tie of 2–5' and '; capped at 2 by the first bucket (best alone: 4)' where they apply."""
    text = f"; tie of {runs_text(sorted(choice.tied))}" if len(choice.tied) > 1 else ""
    if choice.capped_from is not None:
        text += (f"; capped at {choice.length} by the first bucket (TensorRT-LLM: max_draft_len is the first "
                 f"bucket's length; uncapped: {choice.capped_from})")
    return text


def comparison_text(tuned: TunedSchedule) -> str:
    """Per level: the tuned schedule's figure and its gain over the best static length, MTP-1, dspark-async."""
    rows = key_rows(tuned.comparison)
    if rows.empty:
        return "verification: no operating point of the tuned schedule to compare at"
    measure = rows["measure"].iloc[0]
    head = ("verification, throughput per GPU at each SLA (tuned's gain over each):" if measure.endswith("sla")
            else "verification, tokens/s/user at the tuned schedule's throughputs (tuned's gain over each):")
    lines = [head]
    for level, group in rows.groupby("level", sort=False):
        cells = [cell(r) for r in group.itertuples()]
        lines.append(f"  {'>= ' if measure.endswith('sla') else 'at '}{level:,.0f}: " + "; ".join(cells))
    return "\n".join(lines)


def cell(row: pd.Series) -> str:
    value = "unreachable" if not math.isfinite(row.value) else f"{row.value:,.0f}"
    value += f" (at {row.edge})" if isinstance(row.edge, str) and row.edge else ""
    tag = " (best static)" if row.best_static else ""
    gain = "" if row.role == TUNED_ROLE or not math.isfinite(row.tuned_gain) else f" ({100 * row.tuned_gain:+.1f}%)"
    return f"{row.label}{tag} {value}{gain}"
