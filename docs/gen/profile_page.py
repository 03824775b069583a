"""docs/reference/profile-format.md: the profile file format, from `specplan.hwprofiles.fileformat` itself.

The module's docstring is the format's definition; its constants say
which header lines are required, reserved and read; a shipped built-in's
header is shown as it is on disk.
"""

from __future__ import annotations

import inspect

from specplan.hwprofiles import fileformat, load_profile
from specplan.hwprofiles.profile import StepProfile

EXAMPLE = "h200-llama3.1-8b-vllm"


def profile_format_page() -> str:
    doc = inspect.getdoc(fileformat) or ""
    title, _, body = doc.partition("\n\n")
    lines = ["# Profile file format", "", f"{title.rstrip('.')} (format `{fileformat.FORMAT}`).", "",
             "Generated from `specplan.hwprofiles.fileformat`, which reads every profile.", "", body, "",
             "## Header lines", "", "| line | required | what specplan does with it |", "|---|---|---|"]
    for key in fileformat.RESERVED_KEYS:
        lines.append(f"| `# {key}:` | no | {reserved(key)} |")
    for key in fileformat.REQUIRED_PROVENANCE:
        read = fileformat.READ_PROVENANCE.get(key, "provenance, shown in reports and summaries")
        lines.append(f"| `# {key}:` | yes | {read} |")
    for key, read in fileformat.READ_PROVENANCE.items():
        if key not in fileformat.REQUIRED_PROVENANCE:
            lines.append(f"| `# {key}:` | no | {read} |")
    lines += ["| any other `# key: value` | no | provenance for the reader (kept, never interpreted) |", "",
              "## A built-in's header", "",
              f"The first lines of `builtin:{EXAMPLE}` (`hwprofiles/data/{EXAMPLE}.csv`):", "", "```text"]
    text = (fileformat.DATA_DIR / f"{EXAMPLE}.csv").read_text().splitlines()
    lines += [line if len(line) <= 160 else line[:157] + "..." for line in text[:40]]
    lines += ["```", "", *builtins_table()]
    return "\n".join(lines) + "\n"


def builtins_table() -> list[str]:
    """Every built-in, read from its file: what it is, its source, its largest step and step ms at a few B."""
    names = fileformat.builtin_names()
    lines = ["## The built-ins", "", f"{len(names)} profiles ship with specplan (`builtin:NAME`). Step ms at "
             "B = 1 / 128 / 512 tokens with no KV context, and at B = 128 with 131,072 tokens of context where "
             "the profile has a context axis (a drafter's B is its forward's tokens; a prefill profile's "
             "columns are new tokens and attention pairs). `python -m specplan.hwprofiles.builtins` "
             "regenerates every derived one byte for byte; [Step-time profiles](../model/profiles.md) says "
             "how they are composed.", "",
             "| built-in | what | source | max B | ms at B = 1 / 128 / 512 | B = 128, C = 131,072 |",
             "|---|---|---|---|---|---|"]
    for name in names:
        profile = load_profile(f"builtin:{name}")
        lines.append(f"| `{name}` | {what(profile)} | {source(profile)} | {profile.max_tokens} | "
                     f"{at_tokens(profile)} | {with_context(profile)} |")
    return lines


def what(profile: StepProfile) -> str:
    text = str(profile.provenance.get("what", "step"))
    return text.split(":")[0].replace("of the target", "").strip()


def source(profile: StepProfile) -> str:
    text = str(profile.provenance.get("source", ""))
    for key, label in (("AIConfigurator", "AIConfigurator"), ("vidur", "vidur"), ("splitwise", "splitwise-sim"),
                       ("synthetic", "synthetic roofline"), ("harness", "specplan harness")):
        if key in text:
            return label
    return text.split(" ")[0]


def at_tokens(profile: StepProfile) -> str:
    return " / ".join(f"{float(profile.step_ms(b)):.2f}" if b <= profile.max_tokens else "–" for b in (1, 128, 512))


def with_context(profile: StepProfile) -> str:
    if profile.context_tokens is None or profile.context_tokens[-1] < 131_072 or profile.max_tokens < 128:
        return "–"
    return f"{float(profile.step_ms(128, 131_072)):.2f}"


def reserved(key: str) -> str:
    return {"format": f"must be `{fileformat.FORMAT}` where given",
            "name": "the profile's name (default: the file's stem)",
            "extrapolation": "`none` (a lookup beyond the last point is an error) or `linear`"}[key]
