"""`specplan plan`: the fewest replicas (GPUs, cost) per variant for a demand at an SLA.

Each probe runs `--seeds` seeds; the table shows the statistic's 95%
interval for the answer and its one-fewer probe. `--out DIR` stores every
probe run (DIR/probes/<key>.json, reused by a re-run) and writes plan.json,
probes.csv, plan.md and the winner's launch lines (the variant meeting the SLA on the fewest GPUs, for the
engine the plan priced; the entry point writes them: specplan.simulator.study.plan.files), which it also prints.
The demand is one of `--rate`, `--rate-scale`, `--users` or `--lanes` (agent
sessions; by default the scenario's own lanes, as a trace's default is its
own rate). The flags spell a `Target` (specplan.simulator.study.plan.target) and `RunOptions`
(specplan.simulator.study.options): `--sla-tps` is
the bound tps_user_<statistic>>=VALUE and `--ttft-s` the bound
ttft_p99_s<=VALUE, beside every `--sla`; a refusal names the flag (`FLAGS`).

A scenario with a `search:` block is a deployment search instead
(specplan.simulator.study.plan.search): every GPU type × serving mode ×
variant planned, ranked by cost, `--backend ray [--address]` to run its
points as Ray tasks; `--out DIR` adds plan.csv and the winner's launch lines
(written by the entry point) and plan.png (specplan.reports.search_figure, this
command). The SLA is every `--sla`
bound together (`ttft_p99_s<=2`, `tps_user_p10>=30`, `itl_p99_ms<=80`),
`--sla-tps` / `--ttft-s`, or the scenario's `sla.bounds`. What loading took
from the profiles (`Scenario.notes`) and what a search's options did not
inherit from the base scenario are said once each on stderr (`say_notes`)
and in plan.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

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
from specplan.errors import SpecplanError
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.scenario.study import (
    LOWER_BOUNDED,
    SESSION_KEYS,
    STATISTICS,
    UPPER_BOUNDED,
    Bound,
    parse_bound,
    tps_column,
)
from specplan.simulator.study.caveats import search_caveats, source_caveats
from specplan.simulator.study.launch import launch_text
from specplan.simulator.study.options import (
    DEFAULT_MAX_REPLICAS,
    DEFAULT_REPLICA_SAMPLE,
    PlanOptions,
    RunOptions,
)
from specplan.simulator.study.plan.plan_json import capacity_json, search_json
from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.run import plan_capacity, plan_search
from specplan.simulator.study.plan.tables import plan_table, search_table
from specplan.simulator.study.plan.target import DEFAULT_SEEDS, Target
from specplan.simulator.study.points import read_source, validated
from specplan.traces.spec import SessionArrivals, TraceArrivals

# how a refusal names a Target, RunOptions or PlanOptions field: by the flag that sets it
FLAGS = {"rate_per_s": "--rate", "rate_scale": "--rate-scale", "users": "--users", "lanes": "--lanes",
         "seeds": "--seeds",
         "gpu_hour_usd": "--gpu-hour-usd", "max_replicas": "--max-replicas", "replica_sample": "--replica-sample",
         "workers": "--workers", "backend": "--backend", "out_dir": "--out DIR",
         "bounds": "--sla KEY<=VALUE / KEY>=VALUE (or --sla-tps)"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help=help_of("plan"))
    p.add_argument("scenario", help="scenario YAML file (its sweep.variants are compared)")
    demand = p.add_mutually_exclusive_group()
    demand.add_argument("--rate", type=float,
                        help="demand: the mean arrival rate, requests/s (poisson, gamma, mmpp, piecewise arrivals)")
    demand.add_argument("--rate-scale", type=float,
                        help="demand: the workload's own rate times this (open-loop arrivals and traces; "
                             "default 1 on a trace: the trace as recorded)")
    demand.add_argument("--users", type=whole_number, help="demand: closed-loop users (think time kept)")
    demand.add_argument("--lanes", type=whole_number,
                        help="demand: agent session lanes played at once (sessions; default: the scenario's own)")
    p.add_argument("--sla", action="append", default=[], metavar="KEY<=VALUE", help=sla_help())
    p.add_argument("--sla-tps", type=float, help="SLA: tokens/s/user the statistic must reach (the bound "
                                                 "tps_user_<statistic>>=VALUE)")
    p.add_argument("--statistic", choices=STATISTICS, default="p10",
                   help="statistic of per-request tokens/s/user (default p10: the slowest 10%%)")
    p.add_argument("--ttft-s", type=float, help="also require p99 time to first token <= this (s): the bound "
                                                "ttft_p99_s<=VALUE")
    p.add_argument("--gpu-hour-usd", type=float, help="price of one GPU-hour, for the cost column")
    p.add_argument("--max-replicas", type=whole_number, default=DEFAULT_MAX_REPLICAS, help="give up above this many replicas")
    p.add_argument("--seeds", type=whole_number, default=DEFAULT_SEEDS,
                   help=f"seeds per probe (the scenario's seed, +1, ...; default {DEFAULT_SEEDS}): the answer "
                        "carries a 95%% interval over them")
    p.add_argument("--replica-sample", type=whole_number, default=DEFAULT_REPLICA_SAMPLE, metavar="K",
                   help=f"a probe of more than K independent replicas (random routing of Poisson arrivals) "
                        f"simulates K of them at their share of the demand (exact in distribution; default "
                        f"{DEFAULT_REPLICA_SAMPLE}; 0: simulate every cluster whole)")
    p.add_argument("--sample-any-router", action="store_true",
                   help="sample probes under every router too: an approximation that stands random routing "
                        "in for round_robin / least_loaded (see benchmarks/replica_split.py for its cost)")
    p.add_argument("--out", help="folder for every probe run, plan.json, probes.csv and plan.md "
                                 "(created; re-running reuses its probes)")
    p.add_argument("--workers", type=whole_number, help="variants (search points) planned in parallel (default: the number "
                                               "of cores)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="where a search's points run: local processes, or Ray tasks (a scenario with a search: block)")
    p.add_argument("--address", help="with --backend ray: an existing Ray cluster (default: start one)")
    p.add_argument("--resample", choices=("windows", "blocks"),
                   help="on a trace: what each seed replays: windows (a window of workload.arrivals.duration_s "
                        "drawn anew over the trace) or blocks (a circular block bootstrap of the window), so the "
                        "intervals over seeds cover the traffic too (default: the scenario's "
                        "workload.arrivals.resample; none replays it as recorded)")
    p.add_argument("--resample-block-s", type=float, metavar="S",
                   help="with --resample blocks: the block length in seconds (default 60)")
    add_override_args(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_calibration_args(p)
    p.set_defaults(func=run)


def sla_help() -> str:
    """--sla's help, from the keys a bound may name (UPPER_BOUNDED, LOWER_BOUNDED): every key, its direction."""
    def keys(names: tuple[str, ...], session: bool) -> str:
        return ", ".join(k for k in names if (k in SESSION_KEYS) == session)

    return ("an SLA bound on a summary.json key, repeatable: KEY<=VALUE for " + keys(UPPER_BOUNDED, False)
            + "; KEY>=VALUE for " + keys(LOWER_BOUNDED, False) + "; on agent sessions, <= for "
            + keys(UPPER_BOUNDED, True) + ", >= for " + keys(LOWER_BOUNDED, True) + " (units: _s seconds, _ms "
            "milliseconds, tps_user and tokens_per_s tokens/s; default: the scenario's sla.bounds)")


def target_of(args: argparse.Namespace) -> Target:
    """The flags' demand and SLA: --sla bounds, then --sla-tps and --ttft-s as the bounds they spell."""
    axis, value = next((axis, getattr(args, dest)) for axis, dest in DEMANDS if getattr(args, dest) is not None)
    bounds = [parse_bound(text) for text in args.sla]
    if args.sla_tps is not None:
        bounds.append(Bound(tps_column(args.statistic), ">=", args.sla_tps))
    if args.ttft_s is not None:
        bounds.append(Bound("ttft_p99_s", "<=", args.ttft_s))
    return Target(axis=axis, value=value, bounds=tuple(bounds), statistic=args.statistic, seeds=args.seeds,
                  gpu_hour_usd=args.gpu_hour_usd)


def options_of(args: argparse.Namespace, out: Path | None) -> RunOptions:
    return RunOptions(workers=args.workers, out_dir=out, progress=False if (args.quiet or args.json) else None,
                      overrides=tuple(args.overrides), backend=args.backend, address=args.address, names=FLAGS)


def plan_options_of(args: argparse.Namespace) -> PlanOptions:
    return PlanOptions(max_replicas=args.max_replicas, replica_sample=args.replica_sample,
                       sample_any_router=args.sample_any_router)


def run(args: argparse.Namespace) -> int:
    resampled(args)
    default_demand(args)
    out = out_folder(args.out) if args.out else None
    calibration = take_calibration(args)
    say_calibration(calibration, args)
    target, options, plan_options = target_of(args), options_of(args, out), plan_options_of(args)
    with refused_cleanly(out):  # a refused plan removes the folder it created, calibration.json with it
        write_calibration_record(calibration, out)
        if has_search(args.scenario, args.overrides):
            return run_search(args.scenario, target, options, plan_options, args.json)
        plan = plan_capacity(args.scenario, target, options, plan_options)
    status = report_plan(plan, out, args.json)
    if not args.json:  # how well public figures validate the deployment; steady state of agent sessions
        for line in source_caveats(args.scenario, args.overrides):
            print(line)
    return status


@contextlib.contextmanager
def refused_cleanly(out: Path | None) -> Iterator[None]:
    """A plan refused after its probes ran (a horizon too short to judge, ...): a folder this command created
    is removed (a refused command leaves no folder); one that was there before is the user's probe cache, kept,
    and the refusal says so."""
    existed = out is not None and out.exists()
    try:
        yield
    except SpecplanError as exc:
        if out is None or not out.exists():
            raise
        if not existed:
            shutil.rmtree(out, ignore_errors=True)
            raise
        raise SpecplanError(f"{exc} (the probes already simulated stay in {out / 'probes'}/ for a re-run)") from None


def report_plan(plan: CapacityPlan, out: Path | None, as_json: bool) -> int:
    """Print a capacity plan (its entry point wrote its files with --out)."""
    files = plan.files
    say_notes(plan.notes)
    if as_json:
        sys.stdout.write(json.dumps(clean(capacity_json(plan)), indent=2) + "\n")
    else:
        print(plan_table(plan))
        if plan.launch is not None:
            print(launch_text(plan.launch, f", {plan.launch_label}: the fewest GPUs"))
        if out is not None:
            print("files: " + ", ".join(str(path) for path in files.values()) + f", {out / 'probes'}/")
    return 0


def say_notes(notes: Iterable[str]) -> None:
    """What loading took from the profiles (Scenario.notes) and what a search's options did not inherit, each
    once on stderr, as `run` says a scenario's."""
    for note in notes:
        print(f"specplan: note: {note}", file=sys.stderr)


DEMANDS = (("rate_per_s", "rate"), ("rate_scale", "rate_scale"), ("users", "users"), ("lanes", "lanes"))


def default_demand(args: argparse.Namespace) -> None:
    """No demand flag: a trace is planned as recorded (--rate-scale 1), agent sessions at the scenario's own lanes
    (--lanes N), each said on stderr; anything else needs one."""
    if any(getattr(args, dest) is not None for _, dest in DEMANDS):
        return
    raw, folder, name = read_source(args.scenario, args.overrides)
    arrivals = validated(raw, folder, name, "").workload.arrivals
    if isinstance(arrivals, SessionArrivals):
        args.lanes = arrivals.lanes
        print(f"specplan: no demand given: planning the scenario's {arrivals.lanes} lanes (--lanes {arrivals.lanes})",
              file=sys.stderr)
        return
    if not isinstance(arrivals, TraceArrivals):
        raise SpecplanError("plan: give a demand: --rate R (requests/s), --rate-scale K (the workload's own rate "
                            "times K), --users N (a closed loop) or --lanes N (agent sessions)")
    args.rate_scale = 1.0
    print("specplan: no demand given: planning the trace as recorded (--rate-scale 1)", file=sys.stderr)


def resampled(args: argparse.Namespace) -> None:
    """--resample and --resample-block-s as the overrides they spell (after the command line's own), on a trace."""
    if args.resample is None and args.resample_block_s is None:
        return
    if args.resample_block_s is not None and args.resample != "blocks":
        raise SpecplanError("--resample-block-s: only with --resample blocks")
    raw, folder, name = read_source(args.scenario, args.overrides)
    arrivals = validated(raw, folder, name, "").workload.arrivals
    if not isinstance(arrivals, TraceArrivals):
        raise SpecplanError(f"--resample: {name}'s workload.arrivals is '{arrivals.KIND}', not a trace; its seeds "
                            "already draw their own arrivals")
    args.overrides = [*args.overrides, f"workload.arrivals.resample={args.resample}"]
    if args.resample_block_s is not None:
        args.overrides.append(f"workload.arrivals.resample_block_s={args.resample_block_s!r}")


def has_search(scenario: str, overrides: list[str]) -> bool:
    raw, folder, name = read_source(scenario, overrides)
    return validated(raw, folder, name, "").search is not None


def run_search(scenario: str, target: Target, options: RunOptions, plan_options: PlanOptions, as_json: bool) -> int:
    """The scenario's search: block: every deployment planned, ranked; files and launch lines with --out."""
    plan = plan_search(scenario, target, options, plan_options)
    say_notes(plan.notes)
    out = options.out_path
    files = dict(plan.files)
    if out is not None:
        # plan.png (matplotlib): imported only where the figure is written
        from specplan.reports.search_figure import write_search_figure

        files["plan.png"] = write_search_figure(plan, out / "plan.png")
    if as_json:
        sys.stdout.write(json.dumps(clean(search_json(plan)), indent=2) + "\n")
        return 0
    print(search_table(plan))
    launch = plan.launch()
    if launch is not None:
        print(launch_text(launch))
    for line in search_caveats(plan):  # the winner's validation and steady state
        print(line)
    if out is not None:
        print("files: " + ", ".join(str(path) for path in files.values()) + f", {out / 'probes'}/")
    return 0
