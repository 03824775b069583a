"""`specplan trace-stats PATH --format F [--json] [--plot PNG]`: the shape of a request trace.

Request count, time span, mean rate, burstiness (interarrival CV, peak
1-minute rate), prompt/output length percentiles and, where the trace has
block hashes (Mooncake's `hash_ids`), the share of repeated blocks, read in one streaming
pass (traces/stats.py); `--plot` draws rate over time and the length
distributions (traces/plots.py).
"""

from __future__ import annotations

import argparse
import sys

from specplan.cli.commands import help_of
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.jsonsafe import dumps
from specplan.traces.plots import plot_trace
from specplan.traces.readers import TraceFile
from specplan.traces.spec import CSV_COLUMNS, TIME_UNITS, TRACE_FORMATS
from specplan.traces.stats import trace_stats


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace-stats", help=help_of("trace-stats"))
    p.add_argument("path", help="trace file (.gz accepted)")
    p.add_argument("--format", required=True, choices=TRACE_FORMATS, help="trace format")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument("--plot", metavar="PNG", help="write rate over time and length distributions to PNG")
    p.add_argument("--columns", default="", metavar="ROLE=NAME,...",
                   help=f"csv only: column names for the roles {', '.join(CSV_COLUMNS)}")
    p.add_argument("--time-unit", default="s", choices=TIME_UNITS, help="csv only: unit of the timestamp column")
    p.add_argument("--delimiter", default=",", help="csv only: field separator")
    p.add_argument("--skip-bad-lines", action="store_true", help="skip and count malformed lines")
    p.set_defaults(func=run)


def parse_columns(text: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        role, sep, name = item.partition("=")
        if not sep or role.strip() not in CSV_COLUMNS or not name.strip():
            raise SpecplanError(f"--columns: expected ROLE=NAME with ROLE in {', '.join(CSV_COLUMNS)}, got {item!r}")
        pairs.append((role.strip(), name.strip()))
    return tuple(sorted(pairs))


def run(args: argparse.Namespace) -> int:
    if args.format != "csv" and (args.columns or args.time_unit != "s" or args.delimiter != ","):
        raise SpecplanError("--columns, --time-unit and --delimiter apply to --format csv only")
    file = TraceFile(args.path, args.format, parse_columns(args.columns), args.time_unit, args.delimiter,
                     args.skip_bad_lines)
    stats = trace_stats(file)
    if args.plot:
        plot_trace(stats, args.plot)
    if args.json:
        sys.stdout.write(dumps(stats.as_json()))
    else:
        print(stats_table(stats.as_json()))
        if args.plot:
            print(f"  plot in {args.plot}")
    return 0


def stats_table(s: dict) -> str:
    def fmt(x: float | None, spec: str) -> str:
        return "n/a" if x is None or x != x else format(x, spec)

    lines = [f"{s['path']} ({s['format']})",
             f"  {'requests':<31} {s['requests']:,}",
             f"  {'span':<31} {fmt(s['span_s'], '.1f')} s",
             f"  {'mean rate':<31} {fmt(s['rate_per_s'], '.3f')} req/s",
             f"  {'interarrival CV':<31} {fmt(s['interarrival_cv'], '.3f')}",
             f"  {'peak 1-minute rate':<31} {fmt(s['peak_1min_rate_per_s'], '.3f')} req/s"]
    for key in ("prompt_tokens", "output_tokens"):
        q = s[key]
        lines.append(f"  {key.replace('_', ' ') + ' p50/p90/p99/max':<31} "
                     + " / ".join(fmt(q[k], ".0f") for k in ("p50", "p90", "p99", "max")))
    blocks = s.get("blocks")
    if blocks:
        lines.append(f"  {'prompt blocks (hash_ids)':<31} {blocks['block_references']:,} references, "
                     f"{blocks['distinct_blocks']:,} distinct")
        lines.append(f"  {'repeated blocks':<31} {fmt(100 * blocks['repeated_block_share'], '.1f')}% (seen "
                     f"earlier); {fmt(100 * blocks['prefix_reuse_share'], '.1f')}% as a prompt's leading run "
                     "(what a prefix cache skips)")
    if s["bad_lines"] or s["failed_requests"]:
        lines.append(f"  {'skipped':<31} {s['bad_lines']} bad lines, {s['failed_requests']} failed requests")
    return "\n".join(lines)
