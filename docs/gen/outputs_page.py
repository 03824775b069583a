"""docs/reference/outputs.md: every file specplan writes, each key or column with its unit and definition.

Read from the one registry (`specplan.simulator.core.outputs`) that the
tests hold every engine path, sweep, plan, search and replication file
against.
"""

from __future__ import annotations

from specplan.simulator.core.outputs import EVERY_RUN, OUTPUT_FILES, OutputFile

INTRO = """# Outputs

Every key of `summary.json` and every column of the CSV files specplan
writes, with its unit and definition, generated from the registry in
`specplan.simulator.core.outputs`. A test runs every engine path (a prefill
pool with a prefix cache, chunked prefill with a cache, data-parallel
attention under truncation, a tight KV cache, both benchmark clients,
sampled and split fleets) plus a sweep, a plan and a search, and fails on a
key written and not registered here, or registered and never written.

Conventions: the measurement window is `(warmup_s, end]`; per-request
statistics use requests that arrived after the warm-up (tokens/s/user: the
completed ones); counts of requests cover the whole run so that they add
up. A key written only in some runs says in which ("Written only with a
prefill pool"); every other key is in every run, NaN where a figure does
not apply (no ITL log, no context axis). Keys marked **contract** are the
ones every run writes (the results contract).
writes.

Besides these, `specplan run` writes `metrics.prom` (vLLM's four
speculative-decoding counters as a vLLM server would export them: see
[Engines in the loop](../guides/engines.md)) and `scenario.resolved.yaml`
(the scenario as run, every default filled in).
"""


def outputs_page() -> str:
    parts = [INTRO]
    for file in OUTPUT_FILES:
        parts.append(file_text(file))
    return "\n".join(parts)


def file_text(file: OutputFile) -> str:
    lines = [f"## `{file.name}`", "", f"Written by {file.written_by}: {file.doc}.", ""]
    if file.extends:
        lines += [f"Every key of [`{file.extends}`](#{anchor(file.extends)}) and:", ""]
    lines += ["| key | unit | definition |", "|---|---|---|"]
    for column in file.columns:
        mark = " **contract**" if column.contract else ""
        only = "" if column.present == EVERY_RUN else f" *Written only {column.present}.*"
        lines.append(f"| `{column.name}`{mark} | {column.unit} | {cell(column.doc)}{cell(only)} |")
    return "\n".join(lines) + "\n"


def anchor(name: str) -> str:
    return name.replace(".", "").replace("/", "").lower()


def cell(text: str) -> str:
    return text.replace("|", "\\|")
