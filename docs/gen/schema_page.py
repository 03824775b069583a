"""docs/reference/scenario.md: every scenario key, from the dataclasses the loader validates with.

Reads `specplan.simulator.scenario.keys.schema_sections()`: one table per
section (a dataclass at every path a scenario may write it), each key with
its type, default, bounds, unit, meaning and the `--set` override that
sets it.
"""

from __future__ import annotations

import re

from specplan.simulator.scenario.keys import Key, Section, schema_sections

INTRO = """# Scenario schema

Every key a scenario may hold, generated from the frozen dataclasses that
validate it (`specplan.simulator.scenario.spec` and the sections it
imports), so this page lists exactly what the loader accepts. Rules that
hold everywhere:

- An unknown key is an error naming its path and the closest valid key;
  a missing required key names its path. `specplan check` reports either
  in one line with exit status 2.
- Numbers may be written `1e12`, `1.0e12` or `40_000`.
- Relative paths resolve against the scenario file's folder;
  `builtin:NAME` names a profile shipped with specplan.
- A section marked *by `kind`* (or *by `mode`*) is a tagged union: the
  value of that key picks the form, and each form has its own keys.
- Cross-key rules (a trace's csv-only options, a mixture's domains, a
  drafter's block against its preset's fitted range) are checked at load
  too; their messages name the key.

Each key's **value** cell gives its type, default, bounds and unit; its
**meaning** ends with the command-line override that sets it (`--set` on
any command that takes a scenario, after "e.g."). Units come from the key's
metadata or its name (`_s`, `_ms`, `_tokens`, `_per_s`). The guide
[Scenarios](../guides/scenarios.md) shows whole files.
"""


def scenario_page() -> str:
    parts = [INTRO]
    for section in schema_sections():
        parts.append(section_text(section))
    return "\n".join(parts)


def section_text(section: Section) -> str:
    title = ", ".join(f"`{p}`" for p in section.paths if p) or "Top level"
    if section.kind is not None:
        title += f" · `{section.tag}: {section.kind}`"
    if section.policies:
        title += " · for " + ", ".join(f"`{p}`" for p in section.policies)
    lines = [f"## {title}", ""]
    if section.doc:
        lines += [section.doc, ""]
    lines += ["| key | value | meaning |", "|---|---|---|"]
    lines += [row(section, key) for key in section.keys]
    return "\n".join(lines) + "\n"


def row(section: Section, key: Key) -> str:
    """Three columns, so no cell is clipped: the key; its type, default, bounds and unit stacked; its meaning
    with the override that sets it."""
    default = code(key.default) if key.default not in ("required", "(section defaults)") else f"*{key.default}*"
    value = [key.type, f"default {default}" if default else "", key.bounds, f"unit: {key.unit}" if key.unit else ""]
    shown = example(section, key)
    meaning = cell(key.doc) + (f"<br>e.g. {cell(shown)}" if shown else "")
    return f"| `{key.name}` | {'<br>'.join(cell(v) for v in value if v)} | {meaning} |"


def example(section: Section, key: Key) -> str:
    """The override that sets the key (its example, else its default); inside a tagged form, the value alone
    (the form's other required keys come with it)."""
    value = key.example or (key.default if key.default not in ("required", "none", "(section defaults)", "''")
                            else "")
    if not value or section.kind is not None or section.listed:
        return code(value)
    dotted = f"{section.paths[0]}.{key.name}" if section.paths[0] else key.name
    text = f"{dotted}={value}"
    if not any(ch in value for ch in " {}[]:,'\""):
        return code(f"--set {text}")
    return code(f'--set "{text}"' if "'" in value else f"--set '{text}'")


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def cell(text: str) -> str:
    """A table cell: pipes outside code spans escaped (inside one, the table keeps them)."""
    parts = re.split(r"(`[^`]*`)", text.replace("\n", " "))
    return "".join(p if p.startswith("`") else p.replace("|", "\\|") for p in parts)
