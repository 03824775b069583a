"""`specplan fit`: a deployment's own benchmark runs and server logs → a calibration file and its report.

    specplan fit c1.json c8.json c32.jsonl --scenario deployment.yaml --out fitted/
    specplan run plan.yaml --calibration fitted/calibration.yaml --out out/

The readers, the fit and the report are specplan.simulator.study.fit; this module reads the arguments,
writes the files and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from specplan.cli.commands import help_of
from specplan.cli.commands.run import add_override_args
from specplan.cli.output import add_force_arg, out_folder
from specplan.engines.launch_line import scenario_of_launch
from specplan.errors import SpecplanError
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.drafters.vllm_metrics import (
    drafter_mapping,
    fit_acceptance,
    read_scrape,
    scrape_windows,
)
from specplan.simulator.scenario.calibration import deployment_of, replace_path, write_calibration
from specplan.simulator.study.fit.fitting import RunSimulator, fit_runs
from specplan.simulator.study.fit.readers import read_runs
from specplan.simulator.study.fit.report import calibration_of, report_text, run_rows, write_rows

FIT_FILES = ("calibration.yaml", "fit_runs.csv", "fit.md", "deployment.yaml")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help=help_of("fit"))
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="result files: sglang.bench_serving JSONL, vllm bench serve JSON, aiperf / genai-perf "
                        "profile exports, SGLang server logs ('Decode batch.' lines)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--scenario",
                       help="the deployment as a scenario file (engine, version, parallelism, caps, graphs, "
                            "speculation); its workload is replaced by each run's bench client")
    where.add_argument("--launch", metavar="LINE",
                       help="the deployment as its launch line ('vllm serve MODEL ...' or 'python -m "
                            "sglang.launch_server ...'), read into a scenario (written to OUT/deployment.yaml) "
                            "with --profile")
    p.add_argument("--profile", help="with --launch: the step-time profile of the GPUs it ran on (builtin:NAME or "
                                     "a file): a launch line does not name its GPU")
    p.add_argument("--engine-version", help="with --launch: the engine's version (default: the profile's)")
    add_override_args(p)
    p.add_argument("--metrics", nargs="+", metavar="SCRAPE", default=[],
                   help="vLLM /metrics scrapes taken around the runs: the drafter's acceptance is fitted from "
                        "them (as `specplan acceptance vllm-metrics`) before the terms")
    p.add_argument("--out", required=True, help="folder for calibration.yaml, fit_runs.csv and fit.md")
    add_force_arg(p)
    said = p.add_mutually_exclusive_group()
    said.add_argument("--json", action="store_true", help="print the calibration and errors as JSON")
    said.add_argument("--quiet", action="store_true", help="print nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = out_folder(args.out, FIT_FILES, args.force)
    runs = [r for path in args.runs for r in read_runs(path)]
    names = [r.name for r in runs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecplanError(f"two runs named {twice[0]}: give files of distinct names")
    overrides = list(args.overrides)
    scenario = args.scenario or deployment_from_launch(args, out)
    if args.metrics:
        overrides.append(f"@{acceptance_fragment(args.metrics, out)}")
    say = (lambda _: None) if (args.quiet or args.json) else (lambda line: print(f"  {line}", file=sys.stderr))
    sim = RunSimulator(scenario, overrides, out)
    result = fit_runs(sim, runs, say, seed=sim.base.seed)
    rows = run_rows(runs, result)
    calibration = replace_path(calibration_of(result, runs, deployment_of(sim.base), sim.base.engine.host_overhead_ms,
                                              rows), str(out / "calibration.yaml"))
    write_calibration(calibration, out / "calibration.yaml")
    write_rows(rows, out / "fit_runs.csv")
    (out / "fit.md").write_text(report_text(calibration, rows, str(scenario)))
    if args.json:
        sys.stdout.write(json.dumps(clean({"calibration": str(out / "calibration.yaml"), "fit": calibration.fit,
                                           "terms": {k: t.as_dict() for k, t in calibration.terms.items()},
                                           "runs": rows}), indent=2) + "\n")
    elif not args.quiet:
        print(report_text(calibration, rows, str(scenario)).split("\n", 2)[2].strip())
        print(f"files: {', '.join(str(out / name) for name in FIT_FILES)}")
    return 0


def deployment_from_launch(args: argparse.Namespace, out: Path) -> Path:
    """The launch line's scenario, written to OUT/deployment.yaml; what it read and left out said on stderr."""
    if not args.profile:
        raise SpecplanError("--launch needs --profile: the step-time profile of the GPUs the line ran on "
                            "(a launch line does not name its GPU)")
    raw, used, ignored = scenario_of_launch(args.launch, args.profile, args.engine_version)
    path = out / "deployment.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    if not (args.quiet or args.json):
        print(f"deployment from the launch line: {path} (read {', '.join(used) or 'no flag'}"
              f"{'; not modelled: ' + ', '.join(ignored) if ignored else ''})", file=sys.stderr)
    return path


def acceptance_fragment(paths: list[str], out: Path) -> Path:
    """The drafter block the scrapes fit (specplan.simulator.drafters.vllm_metrics), written beside the report."""
    total, windows = scrape_windows([read_scrape(path) for path in paths])
    fragment = out / "drafter.yaml"
    out.mkdir(parents=True, exist_ok=True)
    fragment.write_text(yaml.safe_dump(drafter_mapping(fit_acceptance(total, windows=windows)), sort_keys=False))
    return fragment
