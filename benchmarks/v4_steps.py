"""Every DeepSeek-V4 built-in's step at B = 1 / 4 / 128 / 512 (no context), against a git revision's file.

    .venv/bin/python benchmarks/v4_steps.py [--before REV]   # default REV: main

Prints, per built-in verify step (drafters left out), the committed step at
four token counts, the same file's step at REV (where REV has a file of
that name; a built-in renamed since shows the file it came from), the three
largest parts at the reference point with their sources, and the parts the
public-microbenchmark rule set. Reads only committed files.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.fileformat import builtin_names, parse_profile

POINTS = (1, 4, 128, 512)
RENAMED = {  # a name here -> the file it replaced at REV (the same target, the FP8 checkpoint now named -fp8)
    "h200-deepseek-v4-flash-tp8ep8-vllm-fp8": "h200-deepseek-v4-flash-tp8ep8-vllm",
    "h200-deepseek-v4-flash-dp8ep8-vllm-fp8": "h200-deepseek-v4-flash-dp8ep8-vllm",
    "h200-deepseek-v4-flash-tp8ep8-sglang-fp8": "h200-deepseek-v4-flash-tp8ep8-sglang",
    "h200-deepseek-v4-flash-dp8ep8-sglang-fp8": "h200-deepseek-v4-flash-dp8ep8-sglang",
    "h200-deepseek-v4-flash-tp4ep4-sglang-fp8": "h200-deepseek-v4-flash-tp4ep4-sglang",
}
REPO = Path(__file__).resolve().parents[1]


def at_revision(rev: str, name: str):
    path = f"hwprofiles/data/{name}.csv"
    shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True)
    return parse_profile(shown.stdout, f"{rev}:{path}") if shown.returncode == 0 else None


def steps(profile) -> str:
    return " / ".join(f"{float(profile.step_ms(b, 0)):.2f}" for b in POINTS)


def top_parts(meta: dict[str, str]) -> str:
    parts = []
    for key, line in meta.items():
        if key.startswith("part."):
            _, share, source = re.match(r"([\d.]+) ms, ([\d.]+)% of the step, ([^;]+);", line).groups()
            parts.append((float(share), f"{key.removeprefix('part.')} {share}% {source}"))
    return ", ".join(text for _, text in sorted(parts, reverse=True)[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git revision to compare with (default main)")
    before = parser.parse_args().before
    print(f"| built-in | step ms at B = {' / '.join(map(str, POINTS))} | at {before} | largest parts at the "
          "reference point (share of the step, source) | set by the public rule |")
    print("|---|---|---|---|---|")
    for name in builtin_names():
        if "deepseek-v4" not in name or name.endswith(("-mtp", "-dspark")):
            continue
        profile = load_profile(f"builtin:{name}")
        if "legacy_name" in profile.provenance:
            continue
        old = at_revision(before, RENAMED.get(name, name))
        was = "new" if old is None else steps(old) + (f" ({RENAMED[name]})" if name in RENAMED else "")
        rule = profile.provenance["public_rule"].rsplit("set here: ", 1)[1]
        print(f"| `{name}` | {steps(profile)} | {was} | {top_parts(profile.provenance)} | {rule} |")


if __name__ == "__main__":
    main()
