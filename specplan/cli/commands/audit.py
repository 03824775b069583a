"""`specplan audit POLICY`: the token-level losslessness audit of a verification policy.

A thin face over `specplan.validation.audit.audit_policy`: decode many short sequences
with real rejection sampling, the policy choosing every verification
length, and test the output distribution against the target (chi-square).
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from specplan.cli.args import whole_number
from specplan.cli.commands import help_of
from specplan.simulator.core.errors import SpecplanError
from specplan.validation.audit import CASES, DEFAULT_DETECT_TV, AuditResult, audit_policy


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help=help_of("audit"))
    p.add_argument("policy", help="policy name (e.g. dspark-greedy, dspark-global, dspark-async)")
    p.add_argument("--trials", type=whole_number, default=20000, help="sequences to decode (default 20000)")
    p.add_argument("--case", choices=sorted(CASES), default="appendix-a",
                   help="set-up: appendix-a (the DSpark paper's counterexample) or markov (4 tokens, 2 sequences per step)")
    p.add_argument("--param", dest="params", action="append", default=[], metavar="KEY=VALUE",
                   help="a policy parameter (value parsed as YAML); repeatable")
    p.add_argument("--seed", type=whole_number, default=0, help="seed of the audit's random draws")
    p.add_argument("--alpha", type=float, default=1e-3, help="significance level of the chi-square test")
    p.add_argument("--power", type=float, default=None,
                   help="the power the audit must have to find a change of --detect in total variation; too few "
                        "--trials for it are refused (without it, the verdict says what the trials find at power 0.8)")
    p.add_argument("--detect", type=float, default=DEFAULT_DETECT_TV, metavar="TV",
                   help="with --power: the change of the output distribution (total variation) the audit must find")
    p.add_argument("--json", action="store_true",
                   help='print {"policy", "target", "observed", "p_value", "rejected", "verdict", '
                        '"detectable_total_variation", "policy_claims_lossless", ...} as JSON')
    p.set_defaults(func=run)


def parse_params(items: list[str]) -> dict:
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SpecplanError(f"--param {item!r}: expected KEY=VALUE")
        try:
            params[key.strip()] = yaml.safe_load(text)
        except yaml.YAMLError:
            raise SpecplanError(f"--param {key}: value {text!r} is not valid YAML") from None
    return params


def run(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1:
        raise SpecplanError(f"--alpha must be between 0 and 1, got {args.alpha}")
    result = audit_policy(args.policy, parse_params(args.params), args.case, args.trials, args.seed, args.alpha,
                          args.power, args.detect)
    if args.json:
        sys.stdout.write(json.dumps(result.plain(), indent=2) + "\n")
    else:
        print(report(result))
    return 0


def report(result: AuditResult) -> str:
    lines = [f"audit {result.label}, case {result.case}: {result.trials} sequences",
             f"  {'output':<8}{'target':>9}{'observed':>10}"]
    rows = list(zip(result.categories, result.target, result.observed, strict=True))
    for name, want, got in rows[:16]:
        lines.append(f"  {name:<8}{want:>9.4f}{got:>10.4f}")
    if len(rows) > 16:
        lines.append(f"  ... {len(rows) - 16} more outputs (--json lists them all)")
    outcome = "rejected" if result.rejected else f"not rejected at {result.trials} trials"
    lines.append(f"  chi-square {result.chi_square:.1f}, p = {result.p_value:.3g} (alpha {result.alpha:g}): {outcome}")
    lines.append(f"  {reading(result)}")
    return "\n".join(lines)


def reading(result: AuditResult) -> str:
    """The outcome read against the policy's own claim; "not rejected" never reads as "lossless"."""
    observed = f"observed total variation {result.observed_tv:.3f}"
    if result.rejected:
        if result.claims_lossless:
            return f"the output distribution differs from the target ({observed}), though the policy claims to be lossless"
        return f"the output distribution differs from the target ({observed}), as the policy's lossy label says"
    reach = (f"{result.trials} trials find a change of total variation >= {result.detectable_tv:.3f} with power "
             f"{result.power:g} ({observed})")
    if result.claims_lossless:
        return f"no change found; {reach}"
    return f"the policy is lossy by design, and too few trials to see it: {reach}"
