"""A comparison read from a point that holds almost no requests is marked, or refused (issue 39, item 4).

The rule is the plan's: a point where a seed completed fewer than 30
requests in the measurement window is thin (a plan stops rather than judge
such a probe). A sweep reads each SLA off a label's frontier; the reading
rests on the points between its two vertices (and, at an end, on every
point beyond it), so it is thin when one of those is.
"""

from __future__ import annotations

import pandas as pd
import pytest

from specplan.simulator.study.frontier import comparisons, operating_points
from specplan.simulator.study.keepup import MIN_COMPLETED
from tests.conftest import REPO


def ops_frame(rows: list[tuple[str, float, float, float, float]]) -> pd.DataFrame:
    """(label, load, tps_user, throughput, requests completed in the window) rows, one seed each."""
    points = pd.DataFrame({
        "label": [r[0] for r in rows], "load": [r[1] for r in rows],
        "tps_user_p50": [r[2] for r in rows], "throughput_tokens_per_s_per_gpu": [r[3] for r in rows],
        "requests_completed_in_window": [r[4] for r in rows],
        "ttft_p99_s": 0.1, "mean_batch_requests": 1.0, "mean_verify_tokens_per_request_step": 2.0,
    })
    return operating_points(points, "tps_user_p50")


def test_the_sweep_counts_requests_as_the_plan_does():
    ops = ops_frame([("a", 1, 300.0, 100.0, MIN_COMPLETED - 1), ("a", 4, 250.0, 400.0, MIN_COMPLETED)])
    assert ops["thin"].tolist() == [True, False]


def test_a_reading_is_thin_when_a_point_it_rests_on_is():
    ops = ops_frame([
        ("base", 1, 300.0, 100.0, 12), ("base", 4, 250.0, 400.0, 80), ("base", 16, 150.0, 1200.0, 300),
        ("base", 64, 80.0, 2000.0, 900),
        ("fast", 1, 400.0, 150.0, 40), ("fast", 4, 330.0, 600.0, 90), ("fast", 16, float("nan"), 900.0, 0),
        ("fast", 64, 100.0, 2600.0, 1000),
    ])
    comp = comparisons(ops, ["base", "fast"], (100.0, 200.0, 280.0, 350.0), "p50").set_index(["sla_tps_user", "label"])
    # between base's loads 16 and 64: both solid
    assert comp.loc[(100.0, "base"), "thin"] == ""
    # fast at 200 tok/s/user lies between loads 4 and 64, where load 16 completed nothing; at 100 it is load
    # 64's own vertex, and nothing heavier was simulated
    assert comp.loc[(200.0, "fast"), "thin"] == "load 16: 0 requests"
    assert comp.loc[(100.0, "fast"), "thin"] == ""
    # base at 280 lies between loads 1 (12 requests) and 4
    assert comp.loc[(280.0, "base"), "thin"] == "load 1: 12 requests"
    # base cannot reach 350: an unreachable reading rests on every load up to its fastest vertex
    assert comp.loc[(350.0, "base"), "thin"] == "load 1: 12 requests"
    # the matched reading at base's throughput carries base's thinness when fast's own is solid
    assert comp.loc[(280.0, "fast"), "tps_user_thin"] == "load 1: 12 requests"


@pytest.mark.slow("a sweep of the default scenario's 36 points at 1.5 s (about 10 s)")
def test_a_sweep_of_points_holding_no_requests_compares_nothing(cli, tmp_path):
    status, out, err = cli("sweep", REPO / "scenarios" / "default.yaml", "--set", "horizon.duration_s=1.5",
                           "--set", "horizon.warmup_s=1", "--out", tmp_path / "s", "--no-report", "--workers", 1)
    assert status == 0, err
    # before: "MTP-1 unreachable", "DFlash-7 fixed 7,966 (-51%)", "DSpark-7 greedy 4,686 (-71%)"
    assert "unreachable" not in out and "%)" not in out
    # the answer follows the points line (after the calibration line: no shipped row for vLLM 0.24)
    lines = out.splitlines()
    points = next(i for i, line in enumerate(lines) if " points (" in line)
    assert lines[points + 1].startswith("no comparison: every reading would be thin")
    assert f"fewer than {MIN_COMPLETED} requests in the window" in out and "raise horizon.duration_s" in out
    comp = pd.read_csv(tmp_path / "s" / "comparisons.csv", keep_default_na=False)
    assert (comp["thin"] != "").all()
