"""Docs that run: the code blocks of the manual and README marked runnable, executed as a reader would.

A block is runnable when the line before its fence is

    <!-- runnable -->                          run it as written
    <!-- runnable: --set horizon.duration_s=3 -->   append these arguments to each `specplan` command in
                                                    it that takes every flag they name

so a guide shows the command a reader types, and the test runs it at tiny
size. `sh` blocks run in `sh -e` with `specplan` on PATH; `python` blocks
run with the interpreter. Both run in a workspace whose `scenarios`,
`benchmarks` and `tests` are the repository's and whose `../shared` is the
shared data, so paths read as in the guides (`out/...` lands in the
workspace). tests/test_docs.py runs every block under a time limit.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^<!-- runnable(?::\s*(.*?))?\s*-->$")
FENCE = re.compile(r"^```(\w+)\s*$")
LINKED = ("scenarios", "benchmarks", "tests")


@dataclass(frozen=True)
class Block:
    """One runnable block: where it is, its language, its text and the arguments its marker appends."""

    page: str
    line: int
    language: str
    text: str
    extra: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    def script(self) -> str:
        """The block as it runs: continuation lines joined, the marker's arguments after each command."""
        if self.language == "python" or not self.extra:
            return self.text
        joined = re.sub(r"\\\n\s*", " ", self.text)
        tail = " ".join(shlex.quote(arg) for arg in self.extra)
        flags = {arg for arg in self.extra if arg.startswith("--")}
        return "\n".join(f"{line} {tail}" if takes(line, flags) else line for line in joined.splitlines())


def takes(line: str, flags: set[str]) -> bool:
    """Whether a line is a `specplan COMMAND` whose parser takes every one of `flags`."""
    words = line.split()
    return len(words) > 1 and words[0] == "specplan" and flags <= command_flags().get(words[1], set())


@functools.cache
def command_flags() -> dict[str, set[str]]:
    """command → the option strings its parser takes, read from the parser `specplan` runs."""
    from docs.gen.cli_page import subcommands
    from specplan.cli.main import parser

    return {name: {flag for action in sub._actions for flag in action.option_strings}
            for name, (sub, _) in subcommands(parser()).items()}


def runnable_blocks(path: Path, root: Path) -> list[Block]:
    """Every block of a markdown file whose fence follows a runnable marker."""
    lines = path.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines[:-1]):
        marker, fence = MARKER.match(line.strip()), FENCE.match(lines[i + 1].strip())
        if marker is None:
            continue
        if fence is None:
            raise ValueError(f"{path}:{i + 1}: a runnable marker must be followed by a ``` fence")
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        extra = tuple(shlex.split(marker.group(1) or ""))
        blocks.append(Block(str(path.relative_to(root)), i + 1, fence.group(1), "\n".join(lines[i + 2:end]), extra))
    return blocks


def workspace(folder: Path, repo: Path, shared: Path) -> Path:
    """folder/work with the repository's example folders linked in, and folder/shared: ../shared from it."""
    work = folder / "work"
    work.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if not (work / name).exists():
            (work / name).symlink_to(repo / name)
    if shared.exists() and not (folder / "shared").exists():
        (folder / "shared").symlink_to(shared)
    return work


def run_block(block: Block, work: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """Run the block in the workspace: sh -e with specplan on PATH, or the interpreter for python."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [sys.executable, "-c", block.script()] if block.language == "python" else ["sh", "-e", "-c",
                                                                                        block.script()]
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
