"""CLI subcommands: one module each, with `register(subparsers)` setting `func`."""

COMMANDS = (
    "specplan.simulator.app.commands.run",
    "specplan.simulator.app.commands.audit",
    "specplan.simulator.app.commands.trace_stats",
    "specplan.simulator.app.commands.profile",
    "specplan.simulator.app.commands.calibrate",
    "specplan.simulator.app.commands.sweep",
    "specplan.simulator.app.commands.plan",
    "specplan.simulator.app.commands.demo",
    "specplan.simulator.app.commands.fidelity",
    "specplan.simulator.app.commands.acceptance",
    "specplan.simulator.app.commands.tune",
    "specplan.simulator.app.commands.replicate",
)
