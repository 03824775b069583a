"""`specplan fidelity`: measure specplan's prediction error against the reference engine.

Profiles the engine's model on this machine with the torch harness, then
runs every policy × load of the scenario's `sweep:` block twice, on the
real engine (specplan.validation.engine) and in the simulator with the captured
profile, and writes DIR/fidelity.json, DIR/fidelity.png and the captured
profiles. Needs torch (the `profile` extra), imported only when run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specplan.cli.args import whole_number
from specplan.cli.commands import help_of
from specplan.cli.commands.run import add_scenario_args
from specplan.cli.output import add_force_arg, out_folder
from specplan.hwprofiles.grid import parse_tokens
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.jsonsafe import dumps
from specplan.validation.fidelity import (
    DEFAULT_SHAPE,
    FidelitySettings,
    run_fidelity,
    run_fidelity_runs,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fidelity", help=help_of("fidelity"))
    add_scenario_args(p)
    p.add_argument("--out", required=True, help="results folder (created; earlier results kept unless --force)")
    add_force_arg(p)
    p.add_argument("--json", action="store_true",
                   help="print {points, median_abs_error, max_abs_error, ...} as JSON")
    p.add_argument("--model", default=str(DEFAULT_SHAPE),
                   help="engine model: a shape name (hwprofiles/shapes/) or YAML path; default validation/shapes/small-cpu.yaml")
    p.add_argument("--threads", type=whole_number, default=1, help="torch CPU threads for profiling and the engine (default 1)")
    p.add_argument("--repeats", type=whole_number, default=8, help="harness timed runs per profile point (default 8)")
    p.add_argument("--rounds", type=whole_number, default=2,
                   help="harness sweeps over the grid, repeats pooled (robust to load bursts; default 2)")
    p.add_argument("--profile-once", action="store_true",
                   help="profile once at the start instead of before every point")
    p.add_argument("--tokens", help="profile token counts (harness syntax; default 1..engine.max_step_tokens)")
    p.add_argument("--calibration-s", type=float, default=10.0,
                   help="seconds of the per-policy host-overhead calibration run (default 10)")
    p.add_argument("--runs", type=whole_number, default=1,
                   help="run the whole check N times (DIR/run-1 ...) and report the spread of its errors "
                        "(median and range of each run's median and max |error|; default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=fidelity)


def fidelity(args: argparse.Namespace) -> int:
    try:
        # torch is the optional 'profile' extra: checked here, before any work
        import torch  # noqa: F401
    except ImportError:
        raise SpecplanError("specplan fidelity needs torch: pip install 'specplan[profile]'") from None
    if min(args.threads, args.repeats, args.rounds, args.runs) < 1 or args.calibration_s <= 0:
        raise SpecplanError("--threads, --repeats, --rounds and --runs must be ≥ 1, --calibration-s > 0")
    out = out_folder(args.out, ("fidelity.json", "fidelity.png"), args.force)
    overrides = list(args.overrides) + ([f"seed={args.seed}"] if args.seed is not None else [])
    settings = FidelitySettings(model=args.model, threads=args.threads, repeats=args.repeats, rounds=args.rounds,
                                profile_each_point=not args.profile_once,
                                calibration_s=args.calibration_s,
                                tokens=tuple(parse_tokens(args.tokens)) if args.tokens else ())
    quiet = args.quiet or args.json
    if args.runs > 1:
        return fidelity_runs(args, settings, overrides, quiet, out)
    result = run_fidelity(args.scenario, settings, out, overrides,
                          None if quiet else lambda msg: print(msg, flush=True))
    if args.json:
        sys.stdout.write(dumps(result.as_json()))
    elif not args.quiet:
        s = result.summary
        print(f"median |error| {s['median_abs_error']:.1%}, max {s['max_abs_error']:.1%} "
              f"over {s['errors_counted']} (point, metric) pairs; results in {args.out}/")
    return 0


def fidelity_runs(args: argparse.Namespace, settings: FidelitySettings, overrides: list[str], quiet: bool,
                  out: Path) -> int:
    doc = run_fidelity_runs(args.scenario, settings, out, args.runs, overrides,
                            None if quiet else lambda msg: print(msg, flush=True))
    if args.json:
        sys.stdout.write(dumps(doc))
    elif not args.quiet:
        lo, hi = doc["median_abs_error_range"]
        mlo, mhi = doc["max_abs_error_range"]
        print(f"over {doc['runs']} runs: median |error| {doc['median_abs_error']:.1%} (range {lo:.1%}-{hi:.1%}), "
              f"max {doc['max_abs_error']:.1%} (range {mlo:.1%}-{mhi:.1%}); results in {args.out}/")
    return 0
