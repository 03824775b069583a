"""Transfer rules for the calibration table, judged on held-out folds of the committed grid (issue 47, item 5).

    .venv/bin/python benchmarks/transfer_rules.py [--cases benchmarks/published]
                                                  [--grid benchmarks/published/results/calibration_grid.csv]

A rule says what a table row is keyed on (read from the cell's scenario: engine, engine version as run, layout
kind, and for the load-regime keys the client's concurrency against the engine's `max_batch_requests`) and how
its grid point is chosen (which goal figures, which statistic). Every rule is a re-selection over the grid the
record already simulated (calibration_grid.csv), so nothing is simulated here. Each is judged on the held-out
folds only: leave one GPU out (the figures of the held-out GPU never enter the fit) and leave one layout out,
with the median |error| over every goal figure and per kind of cell. A key that splits a row backs off to the
plain row where its finer row has no training figure, so every rule predicts the same figures.

Choosing the best of many rules on one cross-validation is itself a fit: the last lines re-run the choice inside
each leave-one-GPU-out fold (a nested cross-validation: the rule is picked on the other GPUs alone), once among
every rule listed and once between today's rule and the shipped one.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specplan.simulator.study.replication.calibrate import read_grid
from specplan.simulator.study.replication.case_runner import Params, kind, signed_error
from specplan.simulator.study.replication.replicate import gpu_of, read_cases, row_key, statuses
from specplan.simulator.study.replication.step_cases import is_step
from specplan.simulator.study.replication.transfer import FIT_METRICS

REPO = Path(__file__).resolve().parents[1]
KINDS = ("low-latency", "balanced", "high-throughput")
LAYOUTS = ("tp", "dp-attention")
TPOT, THROUGHPUT = FIT_METRICS, ("output_throughput", "total_throughput", "output_throughput_per_gpu",
                                 "total_throughput_per_gpu")


@dataclass(frozen=True)
class Fig:
    """A goal figure as the rules see it: its row, GPU, kind of cell, load, metric and error at every grid point."""

    key: tuple[str, int]
    row: tuple[str, str, str]
    gpu: str
    kind: str
    load: float          # the client's concurrency / the engine's max_batch_requests
    metric: str
    err: dict[Params, float]


@dataclass(frozen=True)
class Rule:
    name: str
    key: Callable[[Fig], tuple]                      # the finer row (backs off to Fig.row where it has no figure)
    score: Callable[[np.ndarray], float]             # errors at one point -> the statistic minimised
    metrics: tuple[str, ...] | None = None           # the figures the fit reads (None: every goal figure)


def median_abs(e: np.ndarray) -> float:
    return float(np.median(np.abs(e)))


def median_log(e: np.ndarray) -> float:
    return float(np.median(np.abs(np.log1p(e))))


def rms_log(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.log1p(e) ** 2)))


def mean_abs(e: np.ndarray) -> float:
    return float(np.mean(np.abs(e)))


def regime(f: Fig, light: float = 1 / 8) -> str:
    return "queued" if f.load > 1 else ("light" if f.load <= light else "loaded")


def rules() -> list[Rule]:
    row = lambda f: f.row   # noqa: E731
    out = [Rule("row (today): median |error|, every goal figure", row, median_abs),
           Rule("row: median |error|, TPOT figures (shipped)", row, median_abs, TPOT)]
    for name, score in (("median |log|", median_log), ("rms log", rms_log), ("mean |error|", mean_abs)):
        for what, metrics in (("every goal figure", None), ("TPOT figures", TPOT), ("throughput figures", THROUGHPUT)):
            out.append(Rule(f"row: {name}, {what}", row, score, metrics))
    out.append(Rule("row: median |error|, throughput figures", row, median_abs, THROUGHPUT))
    for light in (1 / 8, 1 / 4, 1 / 2):
        out.append(Rule(f"row + load regime (light <= {light:g} x cap, loaded <= cap, queued)",
                        lambda f, lt=light: (*f.row, regime(f, lt)), median_abs))
        out.append(Rule(f"row + load regime (light <= {light:g}), TPOT", lambda f, lt=light: (*f.row, regime(f, lt)),
                        median_abs, TPOT))
    out.append(Rule("row + queued or not (c > cap)", lambda f: (*f.row, f.load > 1), median_abs))
    out.append(Rule("engine version + load regime (no layout)", lambda f: (*f.row[:2], regime(f)), median_abs))
    out.append(Rule("engine version alone", lambda f: f.row[:2], median_abs))
    return out


def figures(cases_dir: Path, grid_file: Path) -> list[Fig]:
    """Every runnable serving goal figure, with its error at every point of the committed grid."""
    from specplan.simulator.study.replication.published import GOAL_METRICS

    _rows, runnable = statuses(read_cases(cases_dir), Path("/tmp/specplan-transfer-rules"), lambda _m: None)
    serving = [(c, f, r) for c, f, r in runnable if not is_step(c) and f.metric in GOAL_METRICS]
    grid = read_grid(grid_file, [(c, f) for c, f, _r in serving])
    out = []
    for case, figure, runner in serving:
        key = (case.name, figure.line)
        engine = runner.scenario(figure, figure.arms[0], Params()).engine
        out.append(Fig(key, row_key(case), gpu_of(case), kind(case), figure.concurrency / engine.max_batch_requests,
                       figure.metric, {p: signed_error(figure, values[key]) for p, values in grid.items()}))
    return out


def choose(rule: Rule, train: list[Fig]) -> Params:
    fit = [f for f in train if rule.metrics is None or f.metric in rule.metrics] or train
    points = sorted(set.intersection(*(set(f.err) for f in fit)), key=lambda p: (p.host_ms or 0, p.verify_scale, p.extend_op_us or 0))
    return min(points, key=lambda p: (rule.score(np.array([f.err[p] for f in fit])),
                                      float(np.max(np.abs([f.err[p] for f in fit])))))


def predict(rule: Rule, f: Fig, pool: list[Fig], keys: Callable[[Fig], tuple]) -> float | None:
    """f's error at the rule's fit on the figures of `pool` that share f's finest key with a figure (None: none)."""
    for key in keys(f):
        train = [t for t in pool if key in keys(t)]
        if train:
            return f.err[choose(rule, train)]
    return None


def held_out(rule: Rule, figs: list[Fig], split: Callable[[Fig], str], keys: Callable[[Fig], tuple]) -> dict:
    """Each figure predicted by the rule fitted on the figures `split` puts in other folds."""
    got = {f.key: predict(rule, f, [t for t in figs if split(t) != split(f)], keys) for f in figs}
    return {k: v for k, v in got.items() if v is not None}


def logo(rule: Rule, figs: list[Fig]) -> dict:
    return held_out(rule, figs, lambda f: f.gpu, lambda f: (rule.key(f), f.row))


def lolo(rule: Rule, figs: list[Fig]) -> dict:
    """Leave one layout out: the rule's key with the layout left out, fitted on the other layouts."""
    def keys(f: Fig) -> tuple:
        return tuple(x for x in rule.key(f) if x not in LAYOUTS), f.row[:2]
    return held_out(rule, figs, lambda f: f.row[2], keys)


def median_of(errors: dict, figs: list[Fig], kind_: str | None = None) -> str:
    got = [abs(errors[f.key]) for f in figs if f.key in errors and (kind_ is None or f.kind == kind_)]
    return f"{100 * np.median(got):5.1f}%" if got else "    -"


def nested(candidates: list[Rule], figs: list[Fig]) -> tuple[dict, dict[str, str]]:
    """The rule picked on the other GPUs' leave-one-GPU-out error, then fitted there and scored on the held-out GPU."""
    out, picks = {}, {}
    for gpu in sorted({f.gpu for f in figs}):
        inner = [f for f in figs if f.gpu != gpu]
        pick = min(candidates, key=lambda r: np.median(np.abs(list(logo(r, inner).values()))))
        picks[gpu] = pick.name
        for f in (f for f in figs if f.gpu == gpu):
            got = predict(pick, f, inner, lambda t, r=pick: (r.key(t), t.row))
            if got is not None:
                out[f.key] = got
    return out, picks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=str(REPO / "benchmarks" / "published"))
    parser.add_argument("--grid", default=str(REPO / "benchmarks" / "published" / "results" / "calibration_grid.csv"))
    args = parser.parse_args()
    figs = figures(Path(args.cases), Path(args.grid))
    listed = rules()
    print(f"{len(figs)} goal figures; {len(listed)} rules")
    print("| rule | leave one GPU out | low-latency | balanced | high-throughput | leave one layout out |")
    print("|---|---|---|---|---|---|")
    for rule in listed:
        e = logo(rule, figs)
        print(f"| {rule.name} | {median_of(e, figs)} ({len(e)}) | " +
              " | ".join(median_of(e, figs, k) for k in KINDS) + f" | {median_of(lolo(rule, figs), figs)} |")
    for label, candidates in (("every rule listed", listed), ("today's and the shipped", listed[:2])):
        e, picks = nested(candidates, figs)
        print(f"nested (the rule picked inside each fold among {label}): {median_of(e, figs)}; " +
              ", ".join(f"{k}" for k in KINDS) + ": " + " / ".join(median_of(e, figs, k) for k in KINDS))
        for gpu, name in picks.items():
            print(f"  without {gpu}: {name}")


if __name__ == "__main__":
    main()
