"""Wall time of `specplan demo`: the embedded default sweep, from nothing to report.html.

Runs the demo as a user would (a fresh process, an empty output folder, so
no cached point is reused) and prints the wall time, the number of points
and the machine's core count. Goal: under 60 s on the 2-core
development machine; hard limit 3 minutes.

    .venv/bin/python benchmarks/demo_time.py [--workers N] [--repeats 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reference import bracketed

GOAL_S = 60.0
LIMIT_S = 180.0


def time_demo(workers: int | None) -> tuple[float, dict]:
    """(wall seconds, the demo's JSON summary) of one cold `specplan demo` run."""
    with tempfile.TemporaryDirectory(prefix="specplan-demo-") as tmp:
        command = [sys.executable, "-m", "specplan.cli.main", "demo", "--out", str(Path(tmp) / "demo"), "--json"]
        if workers is not None:
            command += ["--workers", str(workers)]
        start = time.perf_counter()
        done = subprocess.run(command, check=True, capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1])
        wall_s = time.perf_counter() - start
        summary = json.loads(done.stdout)
        if not Path(summary["report"]).is_file():
            raise RuntimeError("the demo wrote no report")
        return wall_s, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, help="passed to specplan demo (default: all cores)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    timed = [bracketed(lambda: time_demo(args.workers)) for _ in range(args.repeats)]
    runs = [run for run, _ in timed]
    walls = [w for w, _ in runs]
    reference = statistics.median(r for _, r in timed)
    record = {"benchmark": "demo_time", "cores": os.cpu_count(), "workers": args.workers or os.cpu_count(),
              "points": runs[0][1]["points"], "wall_s": walls, "median_wall_s": statistics.median(walls),
              "goal_s": GOAL_S, "limit_s": LIMIT_S, "reference_steps_per_s": reference,
              "reference_steps": statistics.median(w * r for (w, _), r in timed)}
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        print(f"specplan demo: {record['points']} points, median wall {record['median_wall_s']:.1f} s "
              f"over {len(walls)} run(s) on {record['cores']} cores ({record['reference_steps'] / 1e6:.2f} M "
              f"reference steps; reference {reference:,.0f} steps/s); goal < {GOAL_S:.0f} s, limit {LIMIT_S:.0f} s")
    return 0 if record["median_wall_s"] < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
