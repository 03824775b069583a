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

Step cases (`kind: step`: one static batch per figure, priced by the step price with no scheduler, step_cases.py)
join as deployments of their own level (never pooled with a serving case, and read apart from them) where they
publish three or more batch sizes; one with fewer is skipped, said so. Their runs are (case, workload, arm, batch)
and their fit figures the case's time figures, mapped onto the fit's names (fitting.time_like and linearise take
each as a time, like TPOT):

    step_itl        -> mean_tpot_ms       (the decode steps over the output tokens: the TPOT-like figure)
    batch_latency   -> batch_latency_ms   (the batch's prefill and every decode step)
    batch_ttft      -> batch_ttft_ms      (the batch's prefill, to the last first token)

(the other step metrics, a median TTFT, an offline throughput or a log line's gen throughput, are not fit figures).
The params reach a step's price as they reach a serving run (case_runner.calibrated_scenario: host time added to
every prefill and decode step, the scale on the step's kernels), under the same FOLD_RULE, the batch size standing
for the concurrency: with three batch sizes, every pair is fitted and the third predicted.

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

from specplan.simulator.scenario.load import resolved_mapping
from specplan.simulator.study.fit import fitting
from specplan.simulator.study.fit.runs import MeasuredRun
from specplan.simulator.study.replication.case_runner import Params, availability
from specplan.simulator.study.replication.published import Case, Figure, read_case
from specplan.simulator.study.replication.replicate import runner_for
from specplan.simulator.study.replication.step_cases import is_step

REPO = Path(__file__).resolve().parents[1]
FIT_NAME = {"output_throughput": "output_throughput", "output_throughput_per_gpu": "output_throughput",
            "total_throughput": "output_throughput", "total_throughput_per_gpu": "output_throughput",
            "mean_tpot": "mean_tpot_ms", "median_tpot": "mean_tpot_ms"}
STEP_FIT_NAME = {"step_itl": "mean_tpot_ms", "batch_latency": "batch_latency_ms", "batch_ttft": "batch_ttft_ms"}
SHORT = {"output_throughput": "throughput", "output_throughput_per_gpu": "throughput",
         "total_throughput": "throughput", "total_throughput_per_gpu": "throughput", "mean_tpot": "TPOT",
         "median_tpot": "TPOT", "step_itl": "ITL", "batch_latency": "latency", "batch_ttft": "TTFT"}
STEP_LEVELS = 3   # a step case joins with this many batch sizes or more (FOLD_RULE's pairs need a third)
HELD_OUT = ("v4-pro", "deepseek-v4-pro")
DEPLOYMENT_KEYS = ("hardware", "cluster", "engine", "drafter", "policy")
Errors = list[tuple[float, float]]   # (predicted with nothing fitted, fitted elsewhere) relative errors
Fold = tuple[tuple[int, ...], tuple[int, ...]]   # (training concurrencies, held-out concurrencies)
FOLD_RULE = ("three or more concurrencies: every pair fitted in turn, every other concurrency predicted; "
             "two: each fitted in turn, the other predicted")


class DeploymentSimulator:
    """fitting.RunSimulator's interface over replication cases: a run is a (case, workload, arm, concurrency)
    group of figures, simulated by its own case's runner (a step case's: priced by its step price)."""

    def __init__(self, cases: dict[str, Case], work: Path, groups: dict[str, list[Figure]]) -> None:
        self.runners = {name: runner_for(case, work / name) for name, case in cases.items()}
        self.fit_name = {name: fit_names(case) for name, case in cases.items()}
        self.groups, self.count = groups, 0
        name, first = next(iter(groups.items()))
        self.base = self.runners[name.split("|")[0]].scenario(first[0], first[0].arms[0], Params())
        self.cache: dict[tuple[str, fitting.Point], dict[str, float]] = {}

    def figures(self, run: MeasuredRun, point: fitting.Point) -> dict[str, float]:
        key = (run.name, point)
        if key not in self.cache:
            case = run.name.split("|")[0]
            runner, params, names = self.runners[case], Params(point.host_ms, point.scale), self.fit_name[case]
            self.cache[key] = {names[f.metric]: runner.predict(f, params) for f in self.groups[run.name]}
            self.count += 1
        return self.cache[key]


def fit_names(case: Case) -> dict[str, str]:
    """The case's metrics as the fit names them: a serving case's FIT_NAME, a step case's STEP_FIT_NAME."""
    return STEP_FIT_NAME if is_step(case) else FIT_NAME


def groups_of(case: Case) -> dict[str, list[Figure]]:
    """The case's fit figures by run (case|workload|arm|concurrency), one per fit metric; ratio arms left out."""
    names = fit_names(case)
    groups: dict[str, list[Figure]] = {}
    for figure in case.figures:
        if figure.metric in names and "/" not in figure.arm:
            group = groups.setdefault(f"{case.name}|{figure.workload}|{figure.arm}|{figure.concurrency}", [])
            if names[figure.metric] not in {names[f.metric] for f in group}:
                group.append(figure)
    return groups


def deployment_key(case: Case, figure: Figure) -> str:
    """What a run's deployment is: the resolved scenario's serving blocks under its overrides, the model, and the
    level (a step case's static batches never pool with a serving case's runs)."""
    runner = runner_for(case, Path(tempfile.gettempdir()))
    plain = resolved_mapping(runner.scenario(figure, figure.arm, Params()))
    blocks = {key: plain.get(key) for key in DEPLOYMENT_KEYS}
    return json.dumps({"model": str(case.source.get("model", "")), "level": case.kind, **blocks}, sort_keys=True,
                      default=str)


def runnable_cases(folder: Path, only: list[str]) -> list[Case]:
    cases = []
    for path in sorted(p for p in folder.iterdir() if (p / "source.yaml").is_file()):
        if any(word in path.name.lower() for word in HELD_OUT) or (only and path.name not in only):
            continue
        case = read_case(path)
        if any(word in str(case.source.get("model", "")).lower() for word in HELD_OUT):
            continue
        reason = availability(case) or (step_reason(case) if is_step(case) else None)
        if reason:
            print(f"  {case.name}: skipped ({reason})")
            continue
        cases.append(case)
    return cases


def step_reason(case: Case) -> str | None:
    """Why a step case does not join (None: it publishes STEP_LEVELS batch sizes or more of its fit figures)."""
    sizes = sorted({f.concurrency for f in case.figures if f.metric in STEP_FIT_NAME and "/" not in f.arm})
    if len(sizes) >= STEP_LEVELS:
        return None
    return f"a step case with batch sizes {sizes} of {', '.join(STEP_FIT_NAME)}: the fold rule needs {STEP_LEVELS}"


def deployments(cases: list[Case]) -> list[tuple[dict[str, Case], dict[str, list[Figure]]]]:
    """The runs of every case grouped by deployment: (its cases by name, its runs' figures by run name)."""
    pooled: dict[str, tuple[dict[str, Case], dict[str, list[Figure]]]] = {}
    for case in cases:
        for name, figures in groups_of(case).items():
            owned, groups = pooled.setdefault(deployment_key(case, figures[0]), ({}, {}))
            owned[case.name] = case
            groups[name] = figures
    return list(pooled.values())


def measured(groups: dict[str, list[Figure]], level: str = "serving") -> list[MeasuredRun]:
    names = STEP_FIT_NAME if level == "step" else FIT_NAME
    return [MeasuredRun(name, "case", int(name.split("|")[3]), 1, 1, 1, {names[f.metric]: f.value for f in figs})
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


def level_of(cases: dict[str, Case]) -> str:
    """A deployment's level of evidence: "step" (static batches) or "serving" (its cases share one: the key)."""
    return next(iter(cases.values())).kind


def deployment(cases: dict[str, Case], groups: dict[str, list[Figure]], work: Path) -> tuple[Errors, Errors]:
    """(fit-on-two errors, leave-one-concurrency-out errors) of every held-out figure of one deployment."""
    runs, label = measured(groups, level_of(cases)), "+".join(cases)
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
        names = [SHORT[f.metric] for r in held for f in groups[r.name]]
        out += errors
        host = "fitted" if len(fold[0]) > 1 else "the scenario's, kept"
        print(f"  {label}: fitted on {setting(cases)} {list(fold[0])} -> host {point.host_ms:.3f} ms ({host}), scale "
              f"{point.scale:.3f}; predicting {list(fold[1])}: "
              + ", ".join(f"{name} {e:+.1%}" for name, (_, e) in zip(names, errors, strict=True)), flush=True)
    print(median_line(out, f"  {label}, held-out figures"), flush=True)
    return (out, []) if len(levels) >= 3 else ([], out)


def setting(cases: dict[str, Case]) -> str:
    """What a run's level is called: a serving run's concurrency, a step case's batch size."""
    return "batch" if level_of(cases) == "step" else "concurrency"


def census(pooled: list[tuple[dict[str, Case], dict[str, list[Figure]]]]) -> int:
    """Print each deployment's cases and concurrencies (a step deployment's batch sizes); the most concurrencies any
    serving deployment publishes."""
    most = 0
    for cases, groups in pooled:
        levels = sorted({int(name.split("|")[3]) for name in groups})
        if level_of(cases) == "step":
            print(f"  step deployment of {' + '.join(cases)}: batch {levels}")
            continue
        most = max(most, len(levels))
        print(f"  deployment of {' + '.join(cases)}: concurrency {levels}")
    steps = sum(level_of(cases) == "step" for cases, _ in pooled)
    print(f"{len(pooled) - steps} deployments; the most concurrencies one publishes: {most}"
          + (f"; step deployments: {steps}" if steps else ""))
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
        print("no serving deployment publishes three concurrencies: 'fit on two, predict the others' has no others here; "
              "the leave-one-concurrency-out reading follows")
    print(f"fold rule: {FOLD_RULE}")
    two: Errors = []
    one: Errors = []
    step: Errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (cases, groups) in enumerate(pooled):
            a, b = deployment(cases, groups, Path(tmp) / str(i))
            if level_of(cases) == "step":
                step += a
            else:
                two, one = two + a, one + b
    for errors, reading in ((two, "fitted on two concurrencies, the others predicted"),
                            (one, "fitted on one concurrency, the other predicted"),
                            (step, "step cases: fitted on two batch sizes, the others predicted")):
        print(median_line(errors, reading) if errors else f"{reading}: no deployment to read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
