"""CLI subcommands: one module each, with `register(subparsers)` setting `func`."""

COMMANDS = (
    "simulator.commands.run",
    "simulator.commands.audit",
    "simulator.commands.trace_stats",
    "simulator.commands.profile",
    "simulator.commands.calibrate",
    "simulator.commands.sweep",
    "simulator.commands.plan",
    "simulator.commands.demo",
    "simulator.commands.fidelity",
)
