"""CLI subcommands: one module each, with `register(subparsers)` adding its commands' parsers and `func`.

`COMMANDS` maps each command to the module that registers it and its one-line
help, so that `specplan --help` lists every command without importing any of
them, and a command imports its own module alone (specplan.cli.main): what a
module imports at its top is what its commands need, and heavy libraries
(pandas, matplotlib, scipy, torch, Ray) are imported only by the functions
of the commands that use them.
"""

COMMANDS: dict[str, tuple[str, str]] = {  # command → (its module, its one-line help)
    "run": ("specplan.cli.commands.run", "simulate a scenario and write its results"),
    "check": ("specplan.cli.commands.run", "validate a scenario and every point of its sweep without running them"),
    "audit": ("specplan.cli.commands.audit", "check at token level that a policy keeps the target's output distribution"),
    "trace-stats": ("specplan.cli.commands.trace_stats", "summarise a request trace (rate, burstiness, lengths)"),
    "profile": ("specplan.cli.commands.profile", "a step-time curve: torch harness (default) or AIConfigurator's database"),
    "profile-plot": ("specplan.cli.commands.profile", "plot step time and steps/s vs tokens"),
    "calibrate": ("specplan.cli.commands.calibrate", "score a scenario's confidence head before/after STS"),
    "sweep": ("specplan.cli.commands.sweep", "run a scenario's sweep: points, Pareto frontiers, SLA comparisons, report"),
    "plan": ("specplan.cli.commands.plan", "capacity plan: fewest replicas per variant meeting an SLA at a demand"),
    "demo": ("specplan.cli.commands.demo", "sweep the embedded default scenario and write its report"),
    "fidelity": ("specplan.cli.commands.fidelity", "measure the simulator's error against a real torch engine"),
    "acceptance": ("specplan.cli.commands.acceptance", "fit acceptance curves from a serving engine's metrics"),
    "tune": ("specplan.cli.commands.tune", "tune a per-batch-size speculation-length schedule and export it for engines"),
    "fit": ("specplan.cli.commands.fit", "fit a deployment's host time and verify scale to its own benchmark runs"),
    "replicate": ("specplan.cli.commands.replicate", "predict published measurements and report the errors"),
}


def help_of(name: str) -> str:
    """A command's one-line help (its module's add_parser and the lazy listing read the same text)."""
    return COMMANDS[name][1]
