"""Issue 48's transfer goal on the development set: fit a cell's terms on one concurrency, predict its other.

For every runnable case of benchmarks/published/ (DeepSeek-V4-Pro serving figures are held out and never read:
a case naming V4-Pro is skipped before its figures are read), its throughput and TPOT figures are grouped into
runs (workload, arm, concurrency). The development set publishes each cell at two concurrencies at most, so
"fit on two, predict the others" has no others; what it can say is the leave-one-concurrency-out error: the
terms fitted (specplan.simulator.study.fit.fitting: a linear surrogate solved, re-centred once) on the runs at
one concurrency, with host time kept at the scenario's own (one setting cannot tell it from the level), and the
runs at the other concurrency simulated at them. Prints each cell's errors and the median |error| over every
predicted figure, beside the same figures predicted with nothing fitted.

    .venv/bin/python benchmarks/fit_devset.py [--cases benchmarks/published] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from specplan.simulator.study.fit import fitting
from specplan.simulator.study.fit.runs import MeasuredRun
from specplan.simulator.study.replication.case_runner import CaseRunner, Params, availability
from specplan.simulator.study.replication.published import Case, Figure, read_case

REPO = Path(__file__).resolve().parents[1]
FIT_NAME = {"output_throughput": "output_throughput", "output_throughput_per_gpu": "output_throughput",
            "total_throughput": "output_throughput", "total_throughput_per_gpu": "output_throughput",
            "mean_tpot": "mean_tpot_ms", "median_tpot": "mean_tpot_ms"}
HELD_OUT = ("v4-pro", "deepseek-v4-pro")


class CaseSimulator:
    """fitting.RunSimulator's interface over a replication case: a run is a (workload, arm, concurrency) group."""

    def __init__(self, case: Case, work: Path, groups: dict[str, list[Figure]]) -> None:
        self.runner, self.groups, self.count = CaseRunner(case, work), groups, 0
        first = next(iter(groups.values()))[0]
        self.base = self.runner.scenario(first, first.arms[0], Params())
        self.cache: dict[tuple[str, fitting.Point], dict[str, float]] = {}

    def figures(self, run: MeasuredRun, point: fitting.Point) -> dict[str, float]:
        key = (run.name, point)
        if key not in self.cache:
            params = Params(point.host_ms, point.scale)
            self.cache[key] = {FIT_NAME[f.metric]: self.runner.predict(f, params) for f in self.groups[run.name]}
            self.count += 1
        return self.cache[key]


def runs_of(case: Case) -> tuple[list[MeasuredRun], dict[str, list[Figure]]]:
    groups: dict[str, list[Figure]] = {}
    for figure in case.figures:
        if figure.metric in FIT_NAME and "/" not in figure.arm:
            group = groups.setdefault(f"{figure.workload}|{figure.arm}|{figure.concurrency}", [])
            if FIT_NAME[figure.metric] not in {FIT_NAME[f.metric] for f in group}:
                group.append(figure)
    runs = [MeasuredRun(name, "case", int(name.split("|")[2]), 1, 1, 1,
                        {FIT_NAME[f.metric]: f.value for f in figures}) for name, figures in groups.items()]
    return runs, groups


def cell(case: Case, work: Path) -> list[tuple[float, float]]:
    """(predicted-with-nothing-fitted error, fitted-on-the-other-concurrency error) of every held-out figure."""
    runs, groups = runs_of(case)
    if len({r.concurrency for r in runs}) < 2:
        return []
    sim = CaseSimulator(case, work, groups)
    host0 = sim.base.engine.host_overhead_ms
    out = []
    for held in sorted({r.concurrency for r in runs}):
        train = [r for r in runs if r.concurrency != held]
        point = fitting.Point(host0, 1.0)
        for _ in range(2):
            sur = fitting.linearise(sim, train, point)  # type: ignore[arg-type]
            point = fitting.solve(sur, np.arange(len(sur.runs)), fitting.constrains_host(train), host0)
        for run in (r for r in runs if r.concurrency == held):
            plain, fitted = sim.figures(run, fitting.Point(host0, 1.0)), sim.figures(run, point)
            out += [(plain[m] / v - 1.0, fitted[m] / v - 1.0) for m, v in run.figures.items()]
        print(f"  {case.name}: fitted on concurrency {sorted({r.concurrency for r in train})} -> scale "
              f"{point.scale:.3f}; predicting {held}: "
              + ", ".join(f"{e:+.1%}" for _, e in out[-sum(len(r.figures) for r in runs if r.concurrency == held):]),
              flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="fit_devset.py", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=str(REPO / "benchmarks" / "published"), help="the replication suite")
    ap.add_argument("--only", nargs="*", default=[], help="case names to run (default: every runnable case)")
    args = ap.parse_args()
    errors: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in sorted(p for p in Path(args.cases).iterdir() if (p / "source.yaml").is_file()):
            if any(word in folder.name.lower() for word in HELD_OUT) or (args.only and folder.name not in args.only):
                continue
            case = read_case(folder)
            if any(word in str(case.source.get("model", "")).lower() for word in HELD_OUT):
                continue
            reason = availability(case)
            if reason:
                print(f"  {case.name}: skipped ({reason})")
                continue
            errors += cell(case, Path(tmp))
    if not errors:
        print("no cell with figures at two concurrencies ran")
        return 0
    plain, fitted = np.abs(np.array(errors)).T
    print(f"{len(errors)} figures predicted at a concurrency the fit did not see: median |error| "
          f"{np.median(fitted):.1%} fitted on the other concurrency (transferred), {np.median(plain):.1%} with "
          "nothing fitted (predicted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
