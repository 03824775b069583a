"""benchmarks/peer_aisimulate.py: its side-by-side table on a hand-made fixture, and its refusal without AISimulate.

AISimulate itself is not installed for the suite (a 1.5 GB wheel of its own); the script's predictions are a
committed record (benchmarks/published/results/peer_aisimulate.csv), made by running it by hand.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "peer_aisimulate.py"


def peer_module():
    spec = importlib.util.spec_from_file_location("peer_aisimulate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figure(source, metric, c, published, kind="balanced", gpu="B200"):
    return {"source": source, "workload": "w", "arm": "a", "metric": metric, "concurrency": c,
            "published": published, "kind": kind, "gpu": gpu}


def test_side_by_side_and_the_kind_table():
    """Figures both tools predicted are joined on the figure; a kind's row is the median |error| of its goal figures
    (TTFT in none), per GPU and over its GPUs; a figure AISimulate failed on is left out of both columns."""
    peer_module_ = peer_module()
    rows = [figure("x", "median_tpot", 64, 10.0), figure("x", "output_throughput_per_gpu", 64, 100.0),
            figure("x", "median_ttft", 64, 1000.0), figure("y", "median_tpot", 1, 2.0, "low-latency", "H200"),
            figure("y", "median_tpot", 16, 4.0, "low-latency", "H200")]
    peer = pd.DataFrame([{**r, "aisimulate_error": e, "status": s} for r, e, s in
                         zip(rows, [-0.5, 0.8, -0.9, 0.1, 0.0], ["ok", "ok", "ok", "ok", "aisimulate failed: x"], strict=True)])
    record = pd.DataFrame([{**r, "status": "ok", "predicted_value": 0.0, "predicted_error": e}
                           for r, e in zip(rows, [-0.2, 0.4, 0.5, -0.3, 0.2], strict=True)])
    both = peer_module_.side_by_side(peer, record)
    assert len(both) == 4 and set(both.columns) >= {"specplan_error", "aisimulate_error"}
    kinds = peer_module_.kind_table(both).set_index(["kind", "gpu"])
    assert kinds.loc[("balanced", "all"), "figures"] == 2  # the TTFT figure is in no statistic
    assert kinds.loc[("balanced", "B200"), "specplan_median"] == pytest.approx(0.3)
    assert kinds.loc[("balanced", "B200"), "aisimulate_median"] == pytest.approx(0.65)
    assert kinds.loc[("low-latency", "H200"), "figures"] == 1  # c = 16 failed in AISimulate: in neither column
    assert kinds.loc[("all", "all"), "specplan_max"] == pytest.approx(0.4)


@pytest.mark.slow("runs the script in a subprocess")
def test_without_aisimulate_it_says_so_and_exits_2(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--aisimulate", str(tmp_path / "no-aisimulate")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("aisimulate is not installed") and done.stderr.count("\n") == 1
