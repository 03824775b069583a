"""Cached points cannot go stale: a key covers every file a point reads and specplan's code.

Stories: a profile CSV edited in place (same path, same scenario) is a new
key and the point is simulated again, with the new step times; restoring
the bytes finds the old point again. The same for a replayed trace. The
built-in profiles are files too, and another specplan is another key.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import specplan.simulator.study.inputs as inputs
from specplan.hwprofiles.fileformat import DATA_DIR
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.points import design_sweep, point_key
from specplan.simulator.study.sweep.run import run_sweep
from tests.test_load_axes import TRACE_ROWS, write_trace
from tests.test_sweep import BASE, REPO

PROFILE = """# format: specplan-profile/1
# name: keys-test
# device: test
# model: test
# source: written by tests/test_point_keys.py
# statistic: median
tokens,step_ms
1,{base}
64,12.0
512,30.0
"""


def one_point(**workload: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["sweep"] = {"load": {"users": [4]}, "variants": [{"label": "MTP-1", "policy": {"name": "mtp-1"}}]}
    raw["horizon"] = {"duration_s": 4, "warmup_s": 1}
    raw["workload"].update(workload)
    return raw


def sweep_once(raw: dict[str, Any], out: Path) -> tuple[int, float]:
    """(points simulated in this run, throughput) of a one-point sweep stored in `out`."""
    result = run_sweep(raw, None, RunOptions(out_dir=out, workers=1, progress=False))
    return result.computed, float(result.points["throughput_tokens_per_s"].iloc[0])


def test_a_profile_edited_in_place_is_simulated_again(tmp_path):
    csv = tmp_path / "profile.csv"
    csv.write_text(PROFILE.format(base="10.0"))
    raw = one_point()
    raw["hardware"]["profile"] = str(csv)
    computed, before = sweep_once(raw, tmp_path / "out")
    assert computed == 1 and sweep_once(raw, tmp_path / "out") == (0, before)
    csv.write_text(PROFILE.format(base="20.05"))  # slower steps, same path, same scenario mapping
    computed, after = sweep_once(raw, tmp_path / "out")
    assert computed == 1 and after < 0.8 * before
    csv.write_text(PROFILE.format(base="10.0"))  # the old bytes: the old point again
    assert sweep_once(raw, tmp_path / "out") == (0, before)
    assert len(list((tmp_path / "out" / "points").glob("*.json"))) == 2


def test_a_trace_edited_in_place_is_simulated_again(tmp_path):
    trace = write_trace(tmp_path / "t.csv")
    raw = one_point(arrivals={"kind": "trace", "path": str(trace), "format": "csv"})
    raw["sweep"]["load"] = {"rate_scale": [1]}
    assert sweep_once(raw, tmp_path / "out")[0] == 1
    assert sweep_once(raw, tmp_path / "out")[0] == 0
    (t, p, o), rest = TRACE_ROWS[0], TRACE_ROWS[1:]
    rows = [(t, p, 10 * o), *rest]  # the first request asks for ten times the tokens
    trace.write_text("timestamp,prompt_tokens,output_tokens\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    assert sweep_once(raw, tmp_path / "out")[0] == 1


def test_builtin_profiles_are_files_the_key_covers():
    point = design_sweep(REPO / "scenarios" / "default.yaml").points[0]
    files = inputs.input_files(point.scenario)
    assert DATA_DIR / "h200-llama3.1-8b-vllm.csv" in files
    assert any(f.parent == DATA_DIR and "drafter" in f.name for f in files)  # the drafter's latency profile
    record = inputs.key_inputs(point.scenario)
    assert set(record["files"]) == {str(f) for f in files} and set(record["specplan"]) == {"version", "source"}


def test_another_specplan_is_another_key(monkeypatch):
    point = design_sweep(one_point()).points[0]
    key = point_key(point.scenario)
    monkeypatch.setattr(inputs, "code_version", lambda: {"version": "9.9", "source": "other"})
    assert point_key(point.scenario) != key
