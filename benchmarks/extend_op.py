"""How the SGLang cookbook cells' TTFT and TPOT errors move with the host's cost per kernel of an extend step.

    .venv/bin/python benchmarks/extend_op.py [--cases NAME ...] [--values US ...] [--workers 2]

An eager (or piecewise) DeepSeek-V4 step that carries prompt tokens is priced by
its launches at t per kernel (engines/eager.py): today t is the launcher's
4.7 us (tritonbench PR #1017), while a decode step pays the family's 28.5 us
(sglang PR #24047's eager/graph pair). No public measurement gives an extend
step's own t. This runs every cookbook cell's published TTFT and TPOT figures
(the replication suite's own runner: the case's scenario at the figure's
concurrency, nothing fitted) with `engine.cuda_graph.extend_op_us` at each
value (default 4.7, today; 9.1, Inductor's launcher, the public bracket's high
end; 28.5, the decode pair's), and prints per figure the signed error at each
(predicted / published - 1), then the median signed error by kind of cell
(low-latency, balanced, high-throughput), by host (x86: B200, B300, H200;
Grace: GB200, GB300), and by host at concurrency 1 (one prompt on an idle
server: its TTFT is a pure prefill). It chooses no value and fits nothing.
One seed, the case's own.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from specplan.simulator.study.replication.case_runner import (
    CaseRunner,
    Params,
    availability,
    figure_status,
    kind,
    signed_error,
)
from specplan.simulator.study.replication.published import Case, read_case

PUBLISHED = Path(__file__).resolve().parent / "published"
VALUES = (4.7, 9.1, 28.5)   # us a kernel: today (the launcher), Inductor's launcher, V4's decode pair
LATENCIES = ("ttft", "tpot")
GRACE = ("GB200", "GB300")
KEY = "engine.cuda_graph.extend_op_us"


def cookbook_cells() -> list[str]:
    return sorted(path.name for path in PUBLISHED.glob("sglang-cookbook-*") if (path / "source.yaml").is_file())


def host(case: Case) -> str:
    gpu = str((case.source.get("gpus") or {}).get("type", "?"))
    return "Grace" if gpu in GRACE else "x86"


def case_rows(name: str, values: tuple[float, ...]) -> tuple[str, list[dict], str | None]:
    """Every TTFT and TPOT figure of one case, its signed error at each value (a worker's task)."""
    case = read_case(PUBLISHED / name)
    reason = availability(case)
    if reason:
        return name, [], reason
    rows = []
    with tempfile.TemporaryDirectory() as out:
        runner = CaseRunner(case, Path(out))
        for figure in case.figures:
            if not any(figure.metric.endswith(latency) for latency in LATENCIES):
                continue
            status = figure_status(runner, figure)
            if status:
                return name, [], status
            errors = [signed_error(figure, runner.predict(figure, Params(), (f"{KEY}={value}",))) for value in values]
            rows.append({"case": name, "kind": kind(case), "host": host(case), "gpu": case.source["gpus"]["type"],
                         "metric": figure.metric, "concurrency": figure.concurrency, "errors": errors})
    return name, rows, None


def label(name: str) -> str:
    return name.removeprefix("sglang-cookbook-v4-flash-")


def pct(value: float) -> str:
    return "     n/a" if math.isnan(value) else f"{value:+8.0%}"


def print_table(rows: list[dict], values: tuple[float, ...]) -> None:
    head = "".join(f"{f'{v:g} us':>9}" for v in values)
    print(f"{'cell':<36} {'metric':<12} {'c':>4} {head}")
    for row in rows:
        print(f"{label(row['case']):<36} {row['metric']:<12} {row['concurrency']:>4} "
              + " ".join(pct(e) for e in row["errors"]))


def print_medians(rows: list[dict], values: tuple[float, ...]) -> None:
    """Median signed error per group, per latency and value."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        latency = row["metric"].split("_", 1)[1]
        groups[("kind: " + row["kind"], latency)].append(row)
        groups[("host: " + row["host"], latency)].append(row)
        groups[("all cells", latency)].append(row)
        if row["concurrency"] == 1:   # one prompt on an idle server: TTFT is a pure prefill
            groups[("c = 1, host: " + row["host"], latency)].append(row)
    head = "".join(f"{f'{v:g} us':>9}" for v in values)
    print(f"\nmedian signed error (predicted / published - 1) by group\n{'group':<28} {'latency':<8} {'n':>3} {head}")
    for (group, latency), members in sorted(groups.items()):
        medians = [float(np.median([m["errors"][i] for m in members])) for i in range(len(values))]
        print(f"{group:<28} {latency:<8} {len(members):>3} " + " ".join(pct(m) for m in medians))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=None,
                        help="case folder names under benchmarks/published (default: every SGLang cookbook cell)")
    parser.add_argument("--values", nargs="*", type=float, default=list(VALUES),
                        help=f"{KEY} values in us (default: 4.7 9.1 28.5)")
    parser.add_argument("--workers", type=int, default=2, help="processes (one case each)")
    args = parser.parse_args()
    names = args.cases if args.cases else cookbook_cells()
    unknown = [name for name in names if not (PUBLISHED / name / "source.yaml").is_file()]
    if unknown:
        parser.error(f"no case folder under benchmarks/published: {', '.join(unknown)}")
    values = tuple(args.values)
    started = time.perf_counter()
    results: dict[str, tuple[list[dict], str | None]] = {}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for name, rows, reason in pool.map(case_rows, names, [values] * len(names)):
            results[name] = (rows, reason)
    rows = [row for name in names for row in results[name][0]]
    print(f"{KEY} at {', '.join(f'{v:g}' for v in values)} us: signed error per figure "
          "(predicted / published - 1; nothing fitted, one seed)\n")
    print_table(rows, values)
    for name in names:
        if results[name][1]:
            print(f"{label(name)}: not run: {results[name][1]}")
    if rows:
        print_medians(rows, values)
    print(f"\n{len(rows)} figures of {sum(1 for n in names if results[n][0])} cells in "
          f"{time.perf_counter() - started:.0f} s on {args.workers} workers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
