"""Wall time of `specplan --help` and `specplan check`: this working tree against a reference revision.

Both trees run from the same interpreter, alternated run by run in this one
session (so load on the machine falls on both alike): the reference is
`git archive REV` unpacked in a temporary folder, each tree laid out as the
package installs it (specplan/ with its folders linked in, as `make lint`
builds it) and put first on PYTHONPATH. Prints the median, the quartiles and
the ratio current / reference per command; `--importtime` adds each tree's
slowest imports (`python -X importtime`, cumulative microseconds). Goal:
both under half a second.

    .venv/bin/python benchmarks/cli_startup.py [--reference main] [--repeats 15] [--importtime] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("simulator", "policies", "hwprofiles", "traces", "reports", "scenarios", "validation")
GOAL_S = 0.5


def package_tree(source: Path, into: Path) -> Path:
    """A folder whose `specplan/` is `source` laid out as installed: its specplan/ files, the folders linked in."""
    package = into / "specplan"
    package.mkdir(parents=True)
    for entry in (source / "specplan").iterdir():
        (package / entry.name).symlink_to(entry)
    for folder in FOLDERS:
        (package / folder).symlink_to(source / folder)
    return into


def reference_source(revision: str, into: Path) -> Path:
    """`git archive revision` unpacked in `into` (created)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", revision], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def timed(tree: Path, args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one `python -m specplan ARGS` run from `tree` (first on the
    path: the tree's code runs, not the installed one). On a loaded machine the wall time also holds the waits
    for a core; the CPU time does not."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "specplan", *args], cwd=tree, env=env, check=True,
                   capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def slowest_imports(tree: Path, args: list[str], top: int = 8) -> list[tuple[int, str]]:
    """The `top` imports with the largest cumulative time (µs) of one run."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "specplan", *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4)
    return q1, median, q3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default="main", help="git revision to compare with (default main)")
    parser.add_argument("--repeats", type=int, default=15, help="runs per command and tree, alternated")
    parser.add_argument("--scenario", default="scenarios/default.yaml", help="the scenario `check` reads")
    parser.add_argument("--importtime", action="store_true", help="also list each tree's slowest imports")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    commands = {"--help": ["--help"], "check": ["check", str(Path(args.scenario).resolve())]}
    with tempfile.TemporaryDirectory(prefix="specplan-startup-") as tmp:
        trees = {"reference": package_tree(reference_source(args.reference, Path(tmp) / "src"), Path(tmp) / "ref"),
                 "current": package_tree(REPO, Path(tmp) / "cur")}
        walls: dict[str, dict[str, list[float]]] = {c: {t: [] for t in trees} for c in commands}
        cpus: dict[str, dict[str, list[float]]] = {c: {t: [] for t in trees} for c in commands}
        for _ in range(args.repeats):
            for command, words in commands.items():
                for name, tree in trees.items():
                    wall, cpu = timed(tree, words)
                    walls[command][name].append(wall)
                    cpus[command][name].append(cpu)
        imports = ({c: {t: slowest_imports(tree, words) for t, tree in trees.items()} for c, words in commands.items()}
                   if args.importtime else {})
    record = {"benchmark": "cli_startup", "reference": args.reference, "repeats": args.repeats,
              "cores": os.cpu_count(), "goal_s": GOAL_S,
              "commands": {c: {t: {**dict(zip(("q1_s", "median_s", "q3_s"), quartiles(v), strict=True)),
                                   "median_cpu_s": statistics.median(cpus[c][t])}
                               for t, v in by_tree.items()} for c, by_tree in walls.items()},
              "load_average": os.getloadavg(),
              "imports": imports}
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    print(f"specplan start-up: {args.repeats} alternated runs per command and tree, {os.cpu_count()} cores, load "
          f"average {record['load_average'][0]:.1f}; reference {args.reference} vs this working tree (goal < {GOAL_S} s); "
          "median wall [quartiles], median CPU")
    for command, by_tree in record["commands"].items():
        ref, cur = by_tree["reference"], by_tree["current"]
        print(f"  {command:<7} reference {ref['median_s']:.3f} s [{ref['q1_s']:.3f}–{ref['q3_s']:.3f}] "
              f"cpu {ref['median_cpu_s']:.3f} s   current {cur['median_s']:.3f} s [{cur['q1_s']:.3f}–"
              f"{cur['q3_s']:.3f}] cpu {cur['median_cpu_s']:.3f} s   ratio {cur['median_s'] / ref['median_s']:.2f}")
    for command, by_tree in imports.items():
        for tree, rows in by_tree.items():
            print(f"  slowest imports, {command}, {tree}: "
                  + ", ".join(f"{name.strip()} {us / 1e6:.2f} s" for us, name in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
