"""`specplan plan`: the fewest replicas (GPUs, cost) per variant for a demand at an SLA."""

from __future__ import annotations

import argparse
import json
import sys

from specplan.simulator.app.commands.run import add_override_args
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.scenario.study import STATISTICS
from specplan.simulator.study.planner import plan_capacity, plan_table


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
    p.add_argument("--workers", type=int, help="variants planned in parallel (default: the number of cores)")
    add_override_args(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plan = plan_capacity(args.scenario, args.rate, args.sla_tps, args.statistic, args.ttft_s,
                         args.gpu_hour_usd, max_replicas=args.max_replicas, workers=args.workers,
                         progress=False if (args.quiet or args.json) else None, overrides=args.overrides,
                         rate_scale=args.rate_scale, users=args.users)
    if args.json:
        sys.stdout.write(json.dumps(clean(plan.to_json()), indent=2) + "\n")
    else:
        print(plan_table(plan))
    return 0
