"""Wall and CPU time of `specplan replicate --calibrate` (issue 46's goal: the development set under 5 minutes on 2 workers).

Runs the replication of the cases given (default: a quick subset, one case per kind of cell and layout) with
the calibration's search, and with `--full-grid` also every grid point (the exhaustive run the search replaces),
each in this process with `--workers` processes, and prints per run: wall seconds, CPU seconds (this process and
its workers), the (case, grid point) pairs simulated out of the full grid's, and each fold's choice; with
`--full-grid` whether the two runs chose the same point (or one within one grid step) for every fold. The full
development set, as the goal reads (pin it to two cores; `nice` on a shared machine):

    taskset -c 0,1 .venv/bin/python benchmarks/calibrate_speed.py --all --workers 2

which is `specplan replicate benchmarks/published --calibrate --workers 2 --allow-missing` timed.
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import tempfile
import time
from pathlib import Path

from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.calibrate import (
    EXTEND_GRID_US,
    GRID_FILE,
    HOST_GRID_MS,
    SCALE_GRID,
)
from specplan.simulator.study.replication.published import Case
from specplan.simulator.study.replication.replicate import (
    Replication,
    ReplicationAsk,
    read_cases,
    replicate,
)
from specplan.simulator.study.replication.transfer import describe_params

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "benchmarks" / "published"
QUICK = ("sglang-cookbook-v4-flash-b200-fp4-balanced", "sglang-cookbook-v4-flash-gb300-fp4-balanced",
         "sglang-cookbook-v4-flash-b200-fp4-low-latency", "sglang-cookbook-v4-flash-h200-fp4-low-latency",
         "sglang-cookbook-v4-flash-gb300-fp4-low-latency", "vllm-41044-v4-flash-mtp-b200")


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished workers so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def simulated_pairs(out: Path) -> int:
    """The (case, grid point) pairs the run's grid file holds."""
    with (out / GRID_FILE).open(newline="") as handle:
        return len({(r["source"], r["host_ms"], r["verify_scale"], r["extend_op_us"]) for r in csv.DictReader(handle)})


def timed(cases: list[Case], full: bool, workers: int, out: Path) -> tuple[Replication, float, float]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = replicate(cases, ReplicationAsk(calibrate=True, full_grid=full), RunOptions(out_dir=out, workers=workers))
    return result, time.perf_counter() - wall, cpu_seconds() - cpu


def step_apart(a, b) -> int:
    """Grid steps between two choices (the largest of the host, scale and extend index differences)."""
    return max(abs(HOST_GRID_MS.index(a.host_ms) - HOST_GRID_MS.index(b.host_ms)),
               abs(SCALE_GRID.index(a.verify_scale) - SCALE_GRID.index(b.verify_scale)),
               abs(EXTEND_GRID_US.index(a.extend_op_us) - EXTEND_GRID_US.index(b.extend_op_us)))


def main() -> int:
    ap = argparse.ArgumentParser(prog="calibrate_speed.py", description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="every case of benchmarks/published (the goal's run)")
    ap.add_argument("--cases", nargs="*", default=list(QUICK), help="case folder names (default: a quick subset)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full-grid", action="store_true", help="also run every grid point and compare the choices")
    args = ap.parse_args()
    cases = [c for c in read_cases(PUBLISHED) if c.kind != "step" and (args.all or c.name in args.cases)]
    if not cases:
        print("no case selected", file=sys.stderr)
        return 2
    runs: dict[str, Replication] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, full in (("search", False), ("full grid", True))[: 2 if args.full_grid else 1]:
            out = Path(tmp) / label.replace(" ", "-")
            result, wall, cpu = timed(cases, full, args.workers, out)
            runs[label] = result
            pairs, every = simulated_pairs(out), len(cases) * len(HOST_GRID_MS) * len(SCALE_GRID) * len(EXTEND_GRID_US)
            print(f"{label}: {len(cases)} cases, {args.workers} workers: wall {wall:.1f} s, CPU {cpu:.1f} s, "
                  f"{pairs} of {every} (case, grid point) pairs simulated")
            for mode, folds in result.params.items():
                for fold, p in folds.items():
                    print(f"  {mode}: {fold}: {describe_params(p)}")
    if args.full_grid:
        worst = max((step_apart(p, runs["full grid"].params[mode][fold]) for mode, folds in runs["search"].params.items()
                     for fold, p in folds.items()), default=0)
        print(f"search against full grid: every fold within {worst} grid step(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
