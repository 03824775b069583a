"""CLI subcommands: one module each, with `register(subparsers)` setting `func`."""

COMMANDS = (
    "simulator.app.commands.run",
    "simulator.app.commands.audit",
    "simulator.app.commands.trace_stats",
    "simulator.app.commands.profile",
    "simulator.app.commands.calibrate",
    "simulator.app.commands.sweep",
    "simulator.app.commands.plan",
    "simulator.app.commands.demo",
    "simulator.app.commands.fidelity",
    "simulator.app.commands.acceptance",
    "simulator.app.commands.tune",
)
