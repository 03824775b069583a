"""`specplan run` and `specplan check`: simulate one scenario, or only validate it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from specplan.cli.args import whole_number
from specplan.cli.calibration import add_calibration_args, say_calibration, take_calibration
from specplan.cli.commands import help_of
from specplan.cli.output import (
    RUN_FILES,
    add_force_arg,
    out_folder,
    summary_table,
    write_run,
)
from specplan.engines import REASONS
from specplan.engines.modes import MODES
from specplan.hwprofiles import load_profile
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.jsonsafe import dumps
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.step_modes import step_modes
from specplan.simulator.scenario import Scenario, load_scenario
from specplan.simulator.scenario.drafter_profile import drafter_profile_warning
from specplan.simulator.scenario.trace_check import read_traces
from specplan.simulator.study.caveats import answer_caveats
from specplan.simulator.study.points import design_sweep
from specplan.simulator.study.search_check import checked_points


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--seed", type=whole_number, help="override the scenario's seed")
    add_override_args(p)


def add_override_args(p: argparse.ArgumentParser) -> None:
    """--set KEY=VALUE and --merge FILE, applied to the scenario in the order given."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a value by dotted key (value parsed as YAML); repeatable")
    p.add_argument("--merge", dest="overrides", action="append", type=lambda path: f"@{path}", metavar="FILE",
                   help="deep-merge a YAML fragment (e.g. the drafter: block of `specplan acceptance`, "
                        "the policy: block of `specplan tune`) over the scenario; repeatable")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help=help_of("run"))
    add_scenario_args(p)
    p.add_argument("--out", required=True, help="results folder (created; earlier results kept unless --force)")
    add_force_arg(p)
    said = p.add_mutually_exclusive_group()
    said.add_argument("--json", action="store_true", help="print the summary as JSON")
    said.add_argument("--quiet", action="store_true", help="print nothing")
    p.add_argument("--split-replicas", type=whole_number, metavar="WORKERS", default=None,
                   help="simulate the replicas independently on WORKERS processes (exact for random routing "
                        "of Poisson arrivals; see specplan.simulator.study.split)")
    add_calibration_args(p)
    p.set_defaults(func=run)

    c = sub.add_parser("check", help=help_of("check"))
    add_scenario_args(c)
    c.set_defaults(func=check)


def run(args: argparse.Namespace) -> int:
    # the simulation (pandas) is imported here: `check`, in this module too, needs none
    from specplan.cli.progress import simulate_with_progress
    from specplan.simulator.study.split import simulate_split

    calibration = take_calibration(args)
    scenario = load_scenario(args.scenario, args.overrides, args.seed)
    warn_drafter_profile(scenario)
    say_notes(scenario)
    out = out_folder(args.out, RUN_FILES, args.force)
    say_calibration(calibration, args)
    if args.split_replicas is not None:
        result = simulate_split(scenario, workers=args.split_replicas, itl=True)
    else:
        result = simulate_with_progress(scenario, enabled=False if (args.quiet or args.json) else None)
    if calibration is not None:
        result.summary.update(calibration.summary_keys())
    write_run(result, out)
    if args.json:
        sys.stdout.write(dumps(result.summary))
    elif not args.quiet:
        print(summary_table(result.summary, f"{scenario.name} (seed {scenario.seed})"))
        for line in engine_lines(result.summary):
            print(line)
        for line in answer_caveats(scenario, load_profile(scenario.hardware.profile)):
            print(f"  {line}")
        print(f"  results in {out}/")
    return 0


def warn_drafter_profile(scenario: Scenario) -> None:
    """A drafter profile of another deployment the scenario accepted (match_target: false), said on stderr."""
    warning = drafter_profile_warning(scenario)
    if warning is not None:
        print(f"specplan: warning: {warning}", file=sys.stderr)


def say_notes(scenario: Scenario) -> None:
    """What loading took from the profile (DP ranks from its header, a memory model that disagrees with the
    engine's fraction) and what the serving engine resolved to (the row a version takes, kernel times of another
    engine: scenario.engine_notes), one line each on stderr."""
    for note in scenario.notes:
        print(f"specplan: note: {note}", file=sys.stderr)


def engine_lines(summary: dict[str, Any]) -> list[str]:
    """How the steps ran (share per mode, then per reason), the engine's cap that binds and the KV pool its memory
    fraction leaves, where known."""
    shares = {mode: summary.get(f"mode_step_share.{mode}") for mode in MODES}
    lines = []
    if any(isinstance(v, float) and v > 0 for k, v in shares.items() if k != "unmodelled"):
        parts = ", ".join(f"{v:.0%} {mode}" for mode, v in shares.items() if isinstance(v, float) and v > 0)
        lines.append(f"  {'steps by mode (share of steps)':<50} {parts}")
        reasons = sorted(((v, key.split(".", 1)[1]) for key, v in summary.items()
                          if key.startswith("mode_reason_step_share.") and isinstance(v, float) and v > 0),
                         reverse=True)
        lines += [f"    {share:.0%} of steps: {REASONS.get(reason, reason)}" for share, reason in reasons]
    tightest = summary.get("engine_cap_tightest")
    if tightest:
        binding = summary.get("engine_cap_binding")
        demand = summary.get("engine_cap_demand_per_rank", float("nan"))
        state = "binds" if binding == tightest else "not reached"
        label = "the engine's tightest cap"
        lines.append(f"  {label:<50} {tightest}: "
                     f"{summary.get('engine_cap_tightest_requests_per_rank')} requests per rank ({state}: "
                     f"{demand:.1f} outstanding per rank)")
    fraction = summary.get("engine_mem_fraction_static")
    if summary.get("kv_capacity_source") == "profile memory model" and fraction is not None:
        label = "KV pool (the profile's memory model)"
        lines.append(f"  {label:<50} {summary['kv_capacity_tokens']:,} tokens per replica at the engine's memory "
                     f"fraction {fraction:.3f}")
    return lines


def check(args: argparse.Namespace) -> int:
    """Validate the scenario, then every sweep point exactly as `specplan sweep` expands them."""
    design = design_sweep(args.scenario, args.overrides)  # --seed is `run`'s: a sweep runs at sweep.seeds
    scenario = design.base if args.seed is None else load_scenario(args.scenario, args.overrides, args.seed)
    block = scenario.drafter.block_size if scenario.drafter.speculates else 0
    try:  # the engine's settings resolve (CUDA-graph capture sizes within the step's budget, rank caps), and the
        # rule its steps run by (DeepEP's mode per deployment, no surcharge an eager step would not pay)
        step_modes(EngineConfig.from_scenario(scenario, load_profile(scenario.hardware.profile), block))
    except ScenarioError as exc:
        raise SpecplanError(f"{args.scenario}: {exc}") from None
    warn_drafter_profile(scenario)
    say_notes(scenario)
    read = read_traces([scenario, *(point.scenario for point in design.points)])  # run's readers, whole files
    study = f", {counted(len(design.points), 'sweep point')} over {counted(len(design.labels), 'variant')}" \
        if scenario.sweep else ""
    print(f"{args.scenario}: ok ({scenario.name}, policy {scenario.policy.name}, "
          f"{scenario.cluster.replicas} replica(s){study}{searched(args.scenario, args.overrides, scenario)})")
    for phrase in read:
        print(f"  {phrase}")
    return 0


def searched(path: str, overrides: list[str], scenario: Scenario) -> str:
    """', search: 12 deployments (2 hardware options, 3 serving modes, 2 variants), each valid at one replica':
    a search: block's space, every point validated as `plan` expands it (one line for a bad one)."""
    search = scenario.search
    if search is None:
        return ""
    points = checked_points(path, overrides)
    parts = [counted(len(search.hardware), "hardware option"),
             counted(sum(len(s.labels()) for s in search.serving), "serving mode"),
             counted(len({p.variant for p in points}), "variant")]
    if search.block_sizes:
        parts.append("block sizes " + ", ".join(map(str, search.block_sizes)))
    return (f", search: {counted(len(points), 'deployment')} ({', '.join(parts)}), each valid at one replica; "
            "`specplan plan` sizes them")


def counted(n: int, noun: str) -> str:
    """'1 sweep point', '12 sweep points'."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
