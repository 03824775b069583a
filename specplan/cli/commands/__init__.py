"""CLI subcommands: one module each, with `register(subparsers)` setting `func`."""

COMMANDS = (
    "specplan.cli.commands.run",
    "specplan.cli.commands.audit",
    "specplan.cli.commands.trace_stats",
    "specplan.cli.commands.profile",
    "specplan.cli.commands.calibrate",
    "specplan.cli.commands.sweep",
    "specplan.cli.commands.plan",
    "specplan.cli.commands.demo",
    "specplan.cli.commands.fidelity",
    "specplan.cli.commands.acceptance",
    "specplan.cli.commands.tune",
    "specplan.cli.commands.replicate",
)
