"""`specplan demo`: run the embedded default scenario's sweep and write its report."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from specplan.cli.commands import help_of
from specplan.cli.commands.sweep import add_runner_args, sweep_and_report


def default_scenario() -> Path:
    """Path of the packaged scenarios/default.yaml."""
    return Path(str(resources.files("specplan.scenarios") / "default.yaml"))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help=help_of("demo"))
    p.add_argument("--out", default="specplan-demo", help="results folder (default: ./specplan-demo)")
    add_runner_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    sweep_and_report(default_scenario(), args)
    return 0
