"""benchmarks/fit_devset.py: the development set's runs pooled by deployment (issue 48's "fit on two concurrencies,
predict the others" needs a deployment with three)."""

from __future__ import annotations

import importlib.util
import shutil
import sys

import pandas as pd

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
