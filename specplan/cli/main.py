"""The `specplan` command: a thin face over the Python API.

Every user error becomes one line on stderr and exit status 2, with no
traceback: the CLI catches the root's base `specplan.errors.SpecplanError`,
which the scenario layer's ScenarioError and the leaf packages' own errors
(ProfileError, TraceError, PolicyError) all derive from. Ctrl-C is one line
and exit status 130; SIGTERM and SIGHUP stop a command the same way
(143, 129: 128 + the signal; specplan.simulator.study.interrupts). Subcommands live in
`specplan.cli.commands`; a call imports only the module of the command it names, so
`specplan --help` imports none.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Collection

from specplan.cli.commands import COMMANDS
from specplan.errors import SpecplanError
from specplan.simulator.study.interrupts import say, stop_on_signals, stopping


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise SpecplanError(f"{self.prog}: {message}")


def parser(modules: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line, every command's parser in full; with `modules`, only those modules' commands in full and
    the others as their one-line help (so building it imports no other command's module)."""
    top = Parser(prog="specplan", description="Serving simulator and capacity planner for speculative decoding.")
    sub = top.add_subparsers(dest="command", required=True, parser_class=Parser)
    registered: set[str] = set()
    for name, (module, text) in COMMANDS.items():
        if modules is not None and module not in modules:
            sub.add_parser(name, help=text)
        elif module not in registered:
            registered.add(module)
            importlib.import_module(module).register(sub)
    return top


def named_modules(argv: list[str]) -> set[str]:
    """The module of the command `argv` names (its first word), none when it names no command."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return {COMMANDS[first][0]} if first in COMMANDS else set()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        stop_on_signals()
        args = parser(named_modules(argv)).parse_args(argv)
        return int(args.func(args) or 0)
    except SpecplanError as exc:
        print(f"specplan: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP; a batch says what it kept (Interrupted)
        stopping()
        say(f"specplan: interrupted{': ' + str(exc) if str(exc) else ''}")
        return 128 + int(getattr(exc, "signum", signal.SIGINT))
    except BrokenPipeError:  # `specplan ... | head`: the reader went away; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
