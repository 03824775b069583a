"""A deployment search on Ray tasks (a local 2-CPU Ray started and stopped by the run) gives exactly the
local answer, its probes stored by the driver under the same keys, and a re-run on either backend resumes."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan import probe
from specplan.simulator.study.plan.plan_json import deployment_rows
from specplan.simulator.study.plan.run import plan_search
from tests.test_search_plan import space_scenario, target

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="ray is not installed (the 'ray' extra)")


@pytest.mark.slow("starts a local Ray")
def test_a_search_on_ray_matches_the_local_search(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    raw = space_scenario()
    raw["search"]["serving"] = raw["search"]["serving"][:1]  # aggregated only: two points
    local = plan_search(raw, target(), RunOptions(workers=1, out_dir=tmp_path / "local"), PlanOptions(max_replicas=2))
    on_ray = plan_search(raw, target(), RunOptions(workers=2, backend="ray", out_dir=tmp_path / "ray"), PlanOptions(max_replicas=2))
    pd.testing.assert_frame_equal(deployment_rows(local), deployment_rows(on_ray))
    keys = {p.name for p in (tmp_path / "local" / "probes").glob("*.json")}
    assert keys and keys == {p.name for p in (tmp_path / "ray" / "probes").glob("*.json")}
    import ray

    assert not ray.is_initialized()  # the Ray started for the run is shut down

    def refuse(_scenario):
        raise AssertionError("a stored probe was simulated again")

    monkeypatch.setattr(probe, "simulate", refuse)
    again = plan_search(raw, target(), RunOptions(workers=1, out_dir=tmp_path / "ray"), PlanOptions(max_replicas=2))
    pd.testing.assert_frame_equal(deployment_rows(again), deployment_rows(local))
