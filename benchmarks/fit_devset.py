"""Issue 48's transfer goal on the development set: fit a deployment's terms on two concurrencies, predict the rest.

For every runnable serving case of benchmarks/published/ (DeepSeek-V4-Pro serving figures are held out and never
read: a case naming V4-Pro is skipped before its figures are read), its throughput and TPOT figures are grouped
into runs (case, workload, arm, concurrency), and the runs into deployments: one deployment is the scenario's
hardware, cluster, engine, drafter and policy after the workload's and arm's overrides, and the model the source
names, so cases that publish the same deployment at other concurrencies pool (the census prints each deployment
and its concurrencies).

The fold rule (FOLD_RULE, fixed before any result was read): a deployment with three or more concurrencies
is fitted on every pair of them in turn, and each fold predicts every other concurrency; the terms (host time
and verify scale: specplan.simulator.study.fit.fitting, the linear surrogate solved and re-centred once) are
fitted on the pair's runs only (`folds` and `split`: a held-out run never enters its fold's training runs). A
held-out figure is counted once per fold that holds it out (with four concurrencies, each is predicted by the
three pairs that leave it out). Where a deployment publishes two concurrencies only, there are no others: what
it can say is the leave-one-concurrency-out error (the scale fitted on one concurrency with host time kept at
the scenario's own, since one setting cannot tell it from the level; the other predicted). Prints each fold's
errors, each deployment's median |error| over its held-out figures, and the median of each reading over every
held-out figure, each beside the same figures predicted with nothing fitted.

    .venv/bin/python benchmarks/fit_devset.py [--cases benchmarks/published] [--only NAME ...] [--census]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.load import resolved_mapping
from specplan.simulator.study.fit import fitting
from specplan.simulator.study.fit.runs import MeasuredRun
from specplan.simulator.study.replication.case_runner import CaseRunner, Params, availability
from specplan.simulator.study.replication.published import Case, Figure, read_case

REPO = Path(__file__).resolve().parents[1]
FIT_NAME = {"output_throughput": "output_throughput", "output_throughput_per_gpu": "output_throughput",
            "total_throughput": "output_throughput", "total_throughput_per_gpu": "output_throughput",
            "mean_tpot": "mean_tpot_ms", "median_tpot": "mean_tpot_ms"}
SHORT = {"output_throughput": "throughput", "mean_tpot_ms": "TPOT"}
HELD_OUT = ("v4-pro", "deepseek-v4-pro")
DEPLOYMENT_KEYS = ("hardware", "cluster", "engine", "drafter", "policy")
Errors = list[tuple[float, float]]   # (predicted with nothing fitted, fitted elsewhere) relative errors
Fold = tuple[tuple[int, ...], tuple[int, ...]]   # (training concurrencies, held-out concurrencies)
FOLD_RULE = ("three or more concurrencies: every pair fitted in turn, every other concurrency predicted; "
             "two: each fitted in turn, the other predicted")


class DeploymentSimulator:
    """fitting.RunSimulator's interface over replication cases: a run is a (case, workload, arm, concurrency)
    group of figures, simulated by its own case's runner."""

    def __init__(self, cases: dict[str, Case], work: Path, groups: dict[str, list[Figure]]) -> None:
        self.runners = {name: CaseRunner(case, work / name) for name, case in cases.items()}
        self.groups, self.count = groups, 0
        name, first = next(iter(groups.items()))
        self.base = self.runners[name.split("|")[0]].scenario(first[0], first[0].arms[0], Params())
        self.cache: dict[tuple[str, fitting.Point], dict[str, float]] = {}

    def figures(self, run: MeasuredRun, point: fitting.Point) -> dict[str, float]:
        key = (run.name, point)
        if key not in self.cache:
            runner, params = self.runners[run.name.split("|")[0]], Params(point.host_ms, point.scale)
            self.cache[key] = {FIT_NAME[f.metric]: runner.predict(f, params) for f in self.groups[run.name]}
            self.count += 1
        return self.cache[key]


def groups_of(case: Case) -> dict[str, list[Figure]]:
    """The case's fit figures by run (case|workload|arm|concurrency), one per fit metric; ratio arms left out."""
    groups: dict[str, list[Figure]] = {}
    for figure in case.figures:
        if figure.metric in FIT_NAME and "/" not in figure.arm:
            group = groups.setdefault(f"{case.name}|{figure.workload}|{figure.arm}|{figure.concurrency}", [])
            if FIT_NAME[figure.metric] not in {FIT_NAME[f.metric] for f in group}:
                group.append(figure)
    return groups


def deployment_key(case: Case, figure: Figure) -> str:
    """What a run's deployment is: the resolved scenario's serving blocks under its overrides, and the model."""
    runner = CaseRunner(case, Path(tempfile.gettempdir()))
    scenario = load_scenario(case.folder / "scenario.yaml", runner.overrides(figure, figure.arm))
    plain = resolved_mapping(scenario)
    blocks = {key: plain.get(key) for key in DEPLOYMENT_KEYS}
    return json.dumps({"model": str(case.source.get("model", "")), **blocks}, sort_keys=True, default=str)


def runnable_cases(folder: Path, only: list[str]) -> list[Case]:
    cases = []
    for path in sorted(p for p in folder.iterdir() if (p / "source.yaml").is_file()):
        if any(word in path.name.lower() for word in HELD_OUT) or (only and path.name not in only):
            continue
        case = read_case(path)
        if any(word in str(case.source.get("model", "")).lower() for word in HELD_OUT):
            continue
        reason = availability(case)
        if reason or case.source.get("kind") == "step":
            print(f"  {case.name}: skipped ({reason or 'a step case: predicted by the step price, not simulated'})")
            continue
        cases.append(case)
    return cases


def deployments(cases: list[Case]) -> list[tuple[dict[str, Case], dict[str, list[Figure]]]]:
    """The runs of every case grouped by deployment: (its cases by name, its runs' figures by run name)."""
    pooled: dict[str, tuple[dict[str, Case], dict[str, list[Figure]]]] = {}
    for case in cases:
        for name, figures in groups_of(case).items():
            owned, groups = pooled.setdefault(deployment_key(case, figures[0]), ({}, {}))
            owned[case.name] = case
            groups[name] = figures
    return list(pooled.values())


def measured(groups: dict[str, list[Figure]]) -> list[MeasuredRun]:
    return [MeasuredRun(name, "case", int(name.split("|")[3]), 1, 1, 1, {FIT_NAME[f.metric]: f.value for f in figs})
            for name, figs in groups.items()]


def fitted(sim: DeploymentSimulator, train: list[MeasuredRun], host0: float) -> fitting.Point:
    point = fitting.Point(host0, 1.0)
    for _ in range(2):
        sur = fitting.linearise(sim, train, point)  # type: ignore[arg-type]
        point = fitting.solve(sur, np.arange(len(sur.runs)), fitting.constrains_host(train), host0)
    return point


def predicted(sim: DeploymentSimulator, runs: list[MeasuredRun], point: fitting.Point, host0: float) -> Errors:
    out = []
    for run in runs:
        plain, at = sim.figures(run, fitting.Point(host0, 1.0)), sim.figures(run, point)
        out += [(plain[m] / v - 1.0, at[m] / v - 1.0) for m, v in run.figures.items()]
    return out


def folds(levels: list[int]) -> list[Fold]:
    """The folds of a deployment publishing these concurrencies, by FOLD_RULE: with three or more, every pair is a
    training fold and the rest are held out; with two, each one trains and the other is held out; with one, none."""
    levels = sorted(set(levels))
    size = 2 if len(levels) >= 3 else 1
    if len(levels) < 2:
        return []
    return [(train, tuple(c for c in levels if c not in train)) for train in itertools.combinations(levels, size)]


def split(runs: list[MeasuredRun], fold: Fold) -> tuple[list[MeasuredRun], list[MeasuredRun]]:
    """A fold's (training runs, held-out runs): a run trains only at a training concurrency, and is held out only
    at a held-out one, so no held-out figure is ever fitted on."""
    train_at, held_at = fold
    return [r for r in runs if r.concurrency in train_at], [r for r in runs if r.concurrency in held_at]


def deployment(cases: dict[str, Case], groups: dict[str, list[Figure]], work: Path) -> tuple[Errors, Errors]:
    """(fit-on-two errors, leave-one-concurrency-out errors) of every held-out figure of one deployment."""
    runs, label = measured(groups), "+".join(cases)
    levels = sorted({r.concurrency for r in runs})
    if len(levels) < 2:
        return [], []
    sim = DeploymentSimulator(cases, work, groups)
    host0 = sim.base.engine.host_overhead_ms
    out: Errors = []
    for fold in folds(levels):
        train, held = split(runs, fold)
        point = fitted(sim, train, host0)
        errors = predicted(sim, held, point, host0)
        names = [SHORT[m] for r in held for m in r.figures]
        out += errors
        host = "fitted" if len(fold[0]) > 1 else "the scenario's, kept"
        print(f"  {label}: fitted on concurrency {list(fold[0])} -> host {point.host_ms:.3f} ms ({host}), scale "
              f"{point.scale:.3f}; predicting {list(fold[1])}: "
              + ", ".join(f"{name} {e:+.1%}" for name, (_, e) in zip(names, errors, strict=True)), flush=True)
    print(median_line(out, f"  {label}, held-out figures"), flush=True)
    return (out, []) if len(levels) >= 3 else ([], out)


def census(pooled: list[tuple[dict[str, Case], dict[str, list[Figure]]]]) -> int:
    """Print each deployment's cases and concurrencies; the most concurrencies any deployment publishes."""
    most = 0
    for cases, groups in pooled:
        levels = sorted({int(name.split("|")[3]) for name in groups})
        most = max(most, len(levels))
        print(f"  deployment of {' + '.join(cases)}: concurrency {levels}")
    print(f"{len(pooled)} deployments; the most concurrencies one publishes: {most}")
    return most


def median_line(errors: Errors, reading: str) -> str:
    plain, fit = np.abs(np.array(errors)).T
    return (f"{reading}: {len(errors)} figures, median |error| {np.median(fit):.1%} with the fitted terms "
            f"(transferred), {np.median(plain):.1%} with nothing fitted (predicted)")


def main() -> int:
    ap = argparse.ArgumentParser(prog="fit_devset.py", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=str(REPO / "benchmarks" / "published"), help="the replication suite")
    ap.add_argument("--only", nargs="*", default=[], help="case names to run (default: every runnable case)")
    ap.add_argument("--census", action="store_true", help="print the deployments and their concurrencies only")
    args = ap.parse_args()
    pooled = deployments(runnable_cases(Path(args.cases), args.only))
    most = census(pooled)
    if args.census:
        return 0
    if most < 3:
        print("no deployment publishes three concurrencies: 'fit on two, predict the others' has no others here; "
              "the leave-one-concurrency-out reading follows")
    print(f"fold rule: {FOLD_RULE}")
    two: Errors = []
    one: Errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (cases, groups) in enumerate(pooled):
            a, b = deployment(cases, groups, Path(tmp) / str(i))
            two, one = two + a, one + b
    for errors, reading in ((two, "fitted on two concurrencies, the others predicted"),
                            (one, "fitted on one concurrency, the other predicted")):
        print(median_line(errors, reading) if errors else f"{reading}: no deployment to read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
