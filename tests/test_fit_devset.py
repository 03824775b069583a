"""benchmarks/fit_devset.py: the development set's runs pooled by deployment (issue 48's "fit on two concurrencies,
predict the others" needs a deployment with three)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "fit_devset.py"
CELL = REPO / "benchmarks" / "published" / "sglang-cookbook-v4-flash-gb300-fp4-low-latency"
SAME_SCENARIO_OTHER_MODEL = REPO / "benchmarks" / "published" / "sglang-cookbook-v4-flash-gb300-nvfp4-low-latency"


def devset_module():
    spec = importlib.util.spec_from_file_location("fit_devset", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_devset"] = module
    spec.loader.exec_module(module)
    return module


def test_a_deployment_pools_its_cases_and_another_model_stays_apart(tmp_path, capsys):
    """A second case of the same deployment at another concurrency pools with the first (three concurrencies: the
    goal's reading runs); a case of the same scenario on another checkpoint is its own deployment."""
    devset = devset_module()
    for folder in (CELL, SAME_SCENARIO_OTHER_MODEL):
        shutil.copytree(folder, tmp_path / folder.name)
    again = tmp_path / f"{CELL.name}-at-4"
    shutil.copytree(CELL, again)
    figures = pd.read_csv(again / "published.csv")
    figures = figures[figures["concurrency"] == 16].assign(concurrency=4)
    figures.to_csv(again / "published.csv", index=False)
    pooled = devset.deployments(devset.runnable_cases(tmp_path, []))
    assert sorted(sorted(cases) for cases, _ in pooled) == [[CELL.name, again.name], [SAME_SCENARIO_OTHER_MODEL.name]]
    assert devset.census(pooled) == 3
    assert f"deployment of {CELL.name} + {again.name}: concurrency [1, 4, 16]" in capsys.readouterr().out


def hand_made_runs(devset, levels, cases=("a", "b")):
    """A small deployment: two cases, each with a throughput and a TPOT figure at every concurrency."""
    return [devset.MeasuredRun(f"{case}|w|arm|{c}", "case", c, 1, 1, 1,
                               {"output_throughput": 100.0 * c, "mean_tpot_ms": 10.0 + c})
            for case in cases for c in levels]


def test_the_fold_rule_never_trains_on_a_held_out_figure():
    """Four concurrencies: every pair trains once (six folds), its runs are exactly the pair's, and every other
    concurrency's runs, of both cases, are held out; two concurrencies: each trains once; one: no fold."""
    devset = devset_module()
    levels = [1, 4, 16, 64]
    runs = hand_made_runs(devset, levels)
    folds = devset.folds([r.concurrency for r in runs])
    assert [train for train, _ in folds] == [(1, 4), (1, 16), (1, 64), (4, 16), (4, 64), (16, 64)]
    for fold in folds:
        train, held = devset.split(runs, fold)
        assert {r.concurrency for r in train} == set(fold[0]) and len(train) == 4
        assert {r.concurrency for r in held} == set(levels) - set(fold[0]) and len(held) == 4
        assert not {r.name for r in train} & {r.name for r in held}
    held_counts = {c: sum(c in held for _, held in folds) for c in levels}
    assert held_counts == {1: 3, 4: 3, 16: 3, 64: 3}
    assert devset.folds([16, 1, 16]) == [((1,), (16,)), ((16,), (1,))]
    assert devset.folds([8, 8]) == []


def test_a_deployment_fits_each_fold_on_its_training_runs_only(monkeypatch, capsys):
    """deployment() hands the fit a fold's training runs and the prediction its held-out runs, never one run to
    both, and prints the deployment's median beside the nothing-fitted one."""
    devset = devset_module()
    seen: list[tuple[set[str], set[str]]] = []

    class Stub:
        def __init__(self, *args):
            self.base = types.SimpleNamespace(engine=types.SimpleNamespace(host_overhead_ms=0.5))

    def fitted(sim, train, host0):
        seen.append(({r.name for r in train}, set()))
        return devset.fitting.Point(host0, 1.0)

    def predicted(sim, held, point, host0):
        seen[-1][1].update(r.name for r in held)
        return [(0.2, 0.1) for r in held for _ in r.figures]

    monkeypatch.setattr(devset, "DeploymentSimulator", Stub)
    monkeypatch.setattr(devset, "fitted", fitted)
    monkeypatch.setattr(devset, "predicted", predicted)
    figure = types.SimpleNamespace
    groups = {f"a|w|arm|{c}": [figure(metric="output_throughput", value=1.0), figure(metric="mean_tpot", value=2.0)]
              for c in (1, 4, 16)}
    two, one = devset.deployment({"a": types.SimpleNamespace(kind="serving")}, groups, Path("unused"))
    assert len(seen) == 3 and one == [] and len(two) == 3 * 2
    for train, held in seen:
        assert len(train) == 2 and len(held) == 1 and not train & held
    assert "a, held-out figures: 6 figures, median |error| 10.0% with the fitted terms" in capsys.readouterr().out


STEP_TINY = REPO / "tests" / "data" / "replication-step-tiny"
HOST_MS, SCALE = 1.5, 1.2   # the terms the three-batch step case below is written at


def step_case_at_three_batches(folder: Path) -> Path:
    """replication-step-tiny's engine (every step 10 + 0.05 ms per token, prompts in 1,000-token chunks) published
    at batch 2, 4 and 8 as if it ran with host time 1.5 ms and its kernels x 1.2. Worked out here: batch R of
    500-token prompts takes R / 2 prefill steps of 1,000 tokens (1.5 + 1.2 x 60 = 73.5 ms each) and 4 decode steps
    of R rows (1.5 + 1.2 x (10 + 0.05 R) ms each); ITL is the decode steps over the 5 output tokens."""
    case = folder / "step-tiny-at-three-batches"
    shutil.copytree(STEP_TINY, case)
    rows = []
    for batch in (2, 4, 8):
        prefill, decode = batch / 2 * (HOST_MS + SCALE * 60.0), 4 * (HOST_MS + SCALE * (10.0 + 0.05 * batch))
        for metric, value in (("step_itl", decode / 5), ("batch_ttft", prefill), ("batch_latency", prefill + decode)):
            rows.append({"workload": "in500-out5", "arm": "base", "metric": metric, "value": value, "unit": "ms",
                         "concurrency": batch, "context_tokens": None, "note": ""})
    pd.DataFrame(rows).to_csv(case / "published.csv", index=False)
    return case


def test_a_step_case_with_three_batch_sizes_is_a_deployment_its_folds_never_train_on_a_held_out_batch(
        tmp_path, monkeypatch, capsys):
    """The step case at batch 2, 4, 8 joins (the two-batch original is skipped, said so); FOLD_RULE's three folds
    each fit on one pair's runs only and predict the third batch; its figures are exactly affine in the terms, so
    the fitted terms carry to the held-out batch (every error under 0.5%) where nothing fitted misses by 5% or more."""
    devset = devset_module()
    shutil.copytree(STEP_TINY, tmp_path / STEP_TINY.name)
    case = step_case_at_three_batches(tmp_path)
    pooled = devset.deployments(devset.runnable_cases(tmp_path, []))
    out = capsys.readouterr().out
    assert f"{STEP_TINY.name}: skipped (a step case with batch sizes [4, 8]" in out
    assert len(pooled) == 1 and list(pooled[0][0]) == [case.name]
    devset.census(pooled)
    assert f"step deployment of {case.name}: batch [2, 4, 8]" in capsys.readouterr().out
    folds: list[tuple[set[int], set[int]]] = []
    fit, predict = devset.fitted, devset.predicted

    def fitted(sim, train, host0):
        folds.append(({r.concurrency for r in train}, set()))
        return fit(sim, train, host0)

    def predicted(sim, held, point, host0):
        folds[-1][1].update(r.concurrency for r in held)
        assert point.host_ms == pytest.approx(HOST_MS, abs=0.01) and point.scale == pytest.approx(SCALE, abs=0.001)
        return predict(sim, held, point, host0)

    monkeypatch.setattr(devset, "fitted", fitted)
    monkeypatch.setattr(devset, "predicted", predicted)
    two, one = devset.deployment(*pooled[0], tmp_path / "work")
    assert folds == [({2, 4}, {8}), ({2, 8}, {4}), ({4, 8}, {2})]
    assert one == [] and len(two) == 3 * 3
    plain, transferred = np.abs(np.array(two)).T
    assert transferred.max() < 0.005 and plain.min() > 0.05
    runs = devset.measured(pooled[0][1], "step")
    assert runs[0].figures.keys() == {"mean_tpot_ms", "batch_ttft_ms", "batch_latency_ms"}
    sim = devset.DeploymentSimulator(pooled[0][0], tmp_path / "again", pooled[0][1])
    surrogate = devset.fitting.linearise(sim, runs, devset.fitting.Point(0.0, 1.0))
    assert len(surrogate.runs) == 9                                     # every figure fitted, none dropped
    assert sorted(surrogate.published) == sorted(v for r in runs for v in r.figures.values())   # each as a time
