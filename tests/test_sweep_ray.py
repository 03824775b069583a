"""Distributed sweeps: Ray tasks on a local 2-CPU Ray give exactly the local backend's results."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.sweep.run import run_sweep
from tests.test_sweep import tiny, without_wall

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="ray is not installed (the 'ray' extra)")


@pytest.mark.slow("starts a local Ray")
def test_ray_backend_matches_the_local_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    raw = tiny()
    raw["sweep"]["seeds"] = [1]
    local = run_sweep(raw, None, RunOptions(out_dir=tmp_path / "local", workers=1))
    on_ray = run_sweep(raw, None, RunOptions(out_dir=tmp_path / "ray", workers=2, backend="ray"))
    assert on_ray.computed == len(on_ray.points) == 6
    assert len(list((tmp_path / "ray" / "points").glob("*.json"))) == 6  # stored by the driver
    pd.testing.assert_frame_equal(without_wall(local.points), without_wall(on_ray.points))
    pd.testing.assert_frame_equal(local.frontier, on_ray.frontier)
    pd.testing.assert_frame_equal(local.comparisons, on_ray.comparisons)
    import ray

    assert not ray.is_initialized()  # the Ray started for the run is shut down
