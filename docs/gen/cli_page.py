"""docs/reference/cli.md: every command and flag, read from the argparse parser the `specplan` command runs.

`specplan.cli.main.parser()` builds the same parser `specplan` parses
with, so a flag added to a command appears here at the next build. Each
command links to the guide that uses it (`GUIDES`, also the README's table
of commands).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from specplan.cli.main import parser

REPO = Path(__file__).resolve().parents[2]

# command → the guide page (under docs/) that shows it in use
GUIDES = {
    "run": "guides/scenarios.md", "check": "guides/scenarios.md", "demo": "guides/first-run.md",
    "sweep": "guides/planning.md", "plan": "guides/planning.md", "tune": "guides/engines.md",
    "acceptance": "guides/engines.md", "trace-stats": "guides/deployments.md", "profile": "model/profiles.md",
    "profile-plot": "model/profiles.md", "calibrate": "model/drafters.md", "audit": "model/policies.md",
    "replicate": "guides/replication.md", "fidelity": "guides/replication.md", "fit": "guides/own-runs.md",
}

INTRO = """# Command line

Every `specplan` command and flag, generated from the argument parser the
command itself runs (`specplan.cli.main.parser`). Rules every command
keeps: bad input is one line on stderr and exit status 2 (no traceback);
Ctrl-C is one line and exit status 130; `--out` never overwrites earlier
results without `--force`, except the folders of `sweep`, `demo`, `tune`
and `plan`, which are caches of their points and resume; every command
that takes a scenario takes `--set dotted.key=value` and `--merge FILE`
(see [Scenarios](../guides/scenarios.md)). `python -m specplan` is the same
command.
"""


def cli_page() -> str:
    top = parser()
    parts = [INTRO, "| command | what it does | guide |", "|---|---|---|"]
    commands = subcommands(top)
    for name, (_, text) in commands.items():
        guide = GUIDES.get(name)
        parts.append(f"| [`{name}`](#specplan-{name}) | {text} | "
                     + (f"[{guide.split('/')[-1][:-3]}](../{guide})" if guide else "") + " |")
    parts.append("")
    for name, (sub, text) in commands.items():
        parts.append(command_text(f"specplan {name}", sub, text))
    return "\n".join(parts)


def subcommands(p: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """name → (parser, one-line help) for every subcommand of `p`, in registration order."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (sub, helps.get(name, "")) for name, sub in action.choices.items()}
    return {}


def command_text(title: str, p: argparse.ArgumentParser, text: str) -> str:
    lines = [f"## `{title}`", "", text[0].upper() + text[1:] + "." if text else "", "",
             "```text", usage(p), "```", ""]
    if p.description:
        lines += [p.description, ""]
    formatter = p._get_formatter()
    rows = [argument_row(a, formatter) for a in p._actions if not isinstance(a, (argparse._HelpAction,
                                                                    argparse._SubParsersAction))]
    if rows:
        lines += ["| argument | default | meaning |", "|---|---|---|", *rows, ""]
    for name, (sub, sub_text) in subcommands(p).items():
        lines.append(command_text(f"{title} {name}", sub, sub_text).replace("## ", "### ", 1))
    return "\n".join(lines)


def usage(p: argparse.ArgumentParser) -> str:
    return re.sub(r"\s+", " ", p.format_usage().removeprefix("usage: ").strip())


def argument_row(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    name = ", ".join(action.option_strings) if action.option_strings else action.dest
    if action.metavar and action.option_strings:
        name += f" {action.metavar}"
    elif action.choices and action.option_strings:
        name += " {" + ",".join(map(str, action.choices)) + "}"
    default = shown_default(action)
    meaning = formatter._expand_help(action) if action.help else ""
    if action.required and action.option_strings:
        meaning = "required: " + meaning
    return f"| `{name}` | {f'`{default}`' if default != '' else ''} | {cell(meaning)} |"


def shown_default(action: argparse.Action) -> object:
    """The default a reader needs: none for a switch (`--no-report` is not "default True") or a required flag; a
    path inside the repository relative to it (not the building machine's absolute path)."""
    switch = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction))
    if switch or action.required or action.default in (None, False, argparse.SUPPRESS, []):
        return ""
    default = action.default
    if isinstance(default, str) and Path(default).is_absolute() and Path(default).is_relative_to(REPO):
        return Path(default).relative_to(REPO).as_posix()
    return default


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
