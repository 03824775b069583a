"""`specplan plan`: the fewest replicas (GPUs, cost) per variant for a demand at an SLA.

Each probe runs `--seeds` seeds; the table shows the statistic's 95%
interval for the answer and its one-fewer probe. `--out DIR` stores every
probe run (DIR/probes/<key>.json, reused by a re-run) and writes plan.json,
probes.csv and plan.md (specplan.simulator.study.plan_files).
"""

from __future__ import annotations

import argparse
import json
import sys

from specplan.simulator.app.commands.run import add_override_args
from specplan.simulator.app.output import out_folder
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.scenario.study import STATISTICS
from specplan.simulator.study.plan_files import write_plan_files
from specplan.simulator.study.planner import DEFAULT_SEEDS, plan_capacity, plan_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="capacity plan: fewest replicas per variant meeting an SLA at a demand")
    p.add_argument("scenario", help="scenario YAML file (its sweep.variants are compared)")
    demand = p.add_mutually_exclusive_group(required=True)
    demand.add_argument("--rate", type=float,
                        help="demand: the mean arrival rate, requests/s (poisson, gamma, mmpp, piecewise arrivals)")
    demand.add_argument("--rate-scale", type=float,
                        help="demand: the workload's own rate times this (open-loop arrivals and traces)")
    demand.add_argument("--users", type=int, help="demand: closed-loop users (think time kept)")
    p.add_argument("--sla-tps", type=float, required=True, help="SLA: tokens/s/user the statistic must reach")
    p.add_argument("--statistic", choices=STATISTICS, default="p10",
                   help="statistic of per-request tokens/s/user (default p10: the slowest 10%%)")
    p.add_argument("--ttft-s", type=float, help="also require p99 time to first token <= this (s)")
    p.add_argument("--gpu-hour-usd", type=float, help="price of one GPU-hour, for the cost column")
    p.add_argument("--max-replicas", type=int, default=256, help="give up above this many replicas")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                   help=f"seeds per probe (the scenario's seed, +1, ...; default {DEFAULT_SEEDS}): the answer "
                        "carries a 95%% interval over them")
    p.add_argument("--out", help="folder for every probe run, plan.json, probes.csv and plan.md "
                                 "(created; re-running reuses its probes)")
    p.add_argument("--workers", type=int, help="variants planned in parallel (default: the number of cores)")
    add_override_args(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = out_folder(args.out) if args.out else None
    plan = plan_capacity(args.scenario, args.rate, args.sla_tps, args.statistic, args.ttft_s,
                         args.gpu_hour_usd, max_replicas=args.max_replicas, workers=args.workers,
                         progress=False if (args.quiet or args.json) else None, overrides=args.overrides,
                         rate_scale=args.rate_scale, users=args.users, seeds=args.seeds, out_dir=out)
    files = write_plan_files(plan, out) if out is not None else {}
    if args.json:
        sys.stdout.write(json.dumps(clean(plan.to_json()), indent=2) + "\n")
    else:
        print(plan_table(plan))
        if out is not None:
            print("files: " + ", ".join(str(path) for path in files.values()) + f", {out / 'probes'}/")
    return 0
