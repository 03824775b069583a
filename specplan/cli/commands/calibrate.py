"""`specplan calibrate`: how well a scenario's confidence head is calibrated, before and after STS.

Fits Sequential Temperature Scaling on the same calibration sample the
simulation uses, scores raw and calibrated prefix survival on an
independent sample, and writes `calibration.json`, reliability diagrams
(`reliability_before.png`, `reliability_after.png`) and the resolved
scenario to `--out`. `--json` prints the result (keys `positions`,
`ece_before`, `ece_after`, `auc`, `temperatures`, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from specplan.cli.args import whole_number
from specplan.cli.commands import help_of
from specplan.cli.commands.run import add_scenario_args
from specplan.cli.output import add_force_arg, out_folder
from specplan.reports.reliability import plot_reliability
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.heads import HeadEvaluation, evaluate_head
from specplan.simulator.scenario import load_scenario, write_resolved

CALIBRATION_FILES = ("calibration.json", "reliability_before.png", "reliability_after.png", "scenario.resolved.yaml")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help=help_of("calibrate"))
    add_scenario_args(p)
    p.add_argument("--out", required=True, help="results folder (created; earlier results kept unless --force)")
    add_force_arg(p)
    p.add_argument("--samples", type=whole_number, default=50_000, help="held-out draft blocks to score (default 50000)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=calibrate)


def result_mapping(name: str, evaluation: HeadEvaluation, head: Any) -> dict[str, Any]:
    r = evaluation.report
    return {
        "scenario": name,
        "head": {"kind": head.kind, "overconfidence": head.overconfidence, "noise": head.noise,
                 "calibration": head.calibration, "sts_applied_in_simulation": evaluation.sts_applied},
        "calibration_samples": evaluation.calibration_samples,
        "eval_samples": evaluation.eval_samples,
        "metric_target": "prefix survival: cumulative product of confidences vs all drafts 1..k accepted",
        "positions": list(range(1, r.temperatures.size + 1)),
        "temperatures": r.temperatures.tolist(),
        "ece_before": r.ece_before.tolist(),
        "ece_after": r.ece_after.tolist(),
        "auc": r.auc_before.tolist(),
        "auc_after": r.auc_after.tolist(),
        "brier_before": r.brier_before.tolist(),
        "brier_after": r.brier_after.tolist(),
    }


def table(result: dict[str, Any]) -> str:
    lines = [f"{result['scenario']}: confidence calibration (held-out {result['eval_samples']} blocks)",
             "  pos   T_k   ECE raw   ECE STS   AUC raw   AUC STS   Brier raw  Brier STS"]
    for i, k in enumerate(result["positions"]):
        lines.append(
            f"  {k:>3}  {result['temperatures'][i]:5.2f}  {100 * result['ece_before'][i]:6.2f}%  "
            f"{100 * result['ece_after'][i]:6.2f}%   {result['auc'][i]:6.3f}    {result['auc_after'][i]:6.3f}"
            f"    {result['brier_before'][i]:7.4f}   {result['brier_after'][i]:7.4f}"
        )
    return "\n".join(lines)


def calibrate(args: argparse.Namespace) -> int:
    if args.samples < 100:
        raise SpecplanError(f"--samples: need at least 100 draft blocks, got {args.samples}")
    scenario = load_scenario(args.scenario, args.overrides, args.seed)
    out = out_folder(args.out, CALIBRATION_FILES, args.force)
    evaluation = evaluate_head(scenario.drafter, scenario.seed, args.samples)
    result = result_mapping(scenario.name, evaluation, scenario.drafter.confidence)
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(result, indent=2) + "\n")
    r = evaluation.report
    plot_reliability(r.reliability_before, out / "reliability_before.png",
                     f"{scenario.name}: raw confidence head", list(r.ece_before))
    plot_reliability(r.reliability_after, out / "reliability_after.png",
                     f"{scenario.name}: after STS", list(r.ece_after))
    write_resolved(scenario, out / "scenario.resolved.yaml")
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        print(table(result))
        print(f"  results in {out}/")
    return 0
