"""Pareto frontiers, SLA interpolation and comparisons on hand-made operating points."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.study.frontier import (
    comparisons,
    frontier_table,
    frontier_vertices,
    operating_points,
    pareto_mask,
    throughput_at,
    tps_user_at,
)


def test_dominated_points_are_removed():
    # (tps_user, throughput): (2, 5) is dominated by (3, 6); (1, 10) and (4, 2) are extremes.
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([10.0, 5.0, 6.0, 2.0])
    assert pareto_mask(x, y).tolist() == [True, False, True, True]


def test_exact_ties_keep_the_first_and_partial_ties_are_dominated():
    x = np.array([3.0, 3.0, 3.0, 1.0, 5.0])
    y = np.array([6.0, 6.0, 4.0, 6.0, 1.0])
    # (3, 6) twice: the first is kept; (3, 4) has equal x but lower y; (1, 6) equal y but lower x.
    assert pareto_mask(x, y).tolist() == [True, False, False, False, True]


def test_single_point_and_nan_points():
    assert pareto_mask(np.array([2.0]), np.array([7.0])).tolist() == [True]
    x = np.array([np.nan, 1.0, 2.0])
    y = np.array([100.0, 5.0, np.nan])
    assert pareto_mask(x, y).tolist() == [False, True, False]
    assert pareto_mask(np.array([]), np.array([])).tolist() == []


def test_frontier_is_monotone_on_random_clouds():
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, y = rng.random(40), rng.random(40)
        keep = pareto_mask(x, y)
        order = np.argsort(x[keep])
        assert np.all(np.diff(y[keep][order]) < 0)
        for i in np.flatnonzero(~keep):  # every removed point is dominated by a kept one
            assert np.any((x[keep] >= x[i]) & (y[keep] >= y[i]))


def vertices(points: list[tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame({"tps_user": [p[0] for p in points], "throughput_per_gpu": [p[1] for p in points]})


def test_sla_interpolation_between_vertices_and_beyond_the_ends():
    front = vertices([(50.0, 1000.0), (100.0, 600.0), (200.0, 100.0)])
    assert throughput_at(front, 75.0) == pytest.approx(800.0)
    assert throughput_at(front, 100.0) == pytest.approx(600.0)
    assert throughput_at(front, 150.0) == pytest.approx(350.0)
    assert throughput_at(front, 10.0) == pytest.approx(1000.0)  # slower SLA: the best point found
    assert math.isnan(throughput_at(front, 250.0))  # faster than any operating point
    assert tps_user_at(front, 800.0) == pytest.approx(75.0)
    assert tps_user_at(front, 50.0) == pytest.approx(200.0)
    assert math.isnan(tps_user_at(front, 1200.0))
    assert math.isnan(throughput_at(vertices([]), 10.0))


def ops_frame(rows: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    """(label, load, tps_user, throughput) rows as operating points from one seed each."""
    points = pd.DataFrame({
        "label": [r[0] for r in rows], "load": [r[1] for r in rows],
        "tps_user_p50": [r[2] for r in rows], "throughput_tokens_per_s_per_gpu": [r[3] for r in rows],
        "ttft_p99_s": 0.1, "mean_batch_requests": 1.0, "mean_verify_tokens_per_request_step": 2.0,
    })
    return operating_points(points, "tps_user_p50")


def test_seed_means_and_confidence_intervals():
    points = pd.DataFrame({
        "label": ["a"] * 4, "load": [1, 1, 2, 2], "tps_user_p50": [10.0, 12.0, 8.0, 8.0],
        "throughput_tokens_per_s_per_gpu": [100.0, 110.0, 200.0, 200.0], "ttft_p99_s": [0.5, 0.7, 3.0, 5.0],
        "mean_batch_requests": 1.0, "mean_verify_tokens_per_request_step": 2.0,
    })
    ops = operating_points(points, "tps_user_p50", ttft_s=1.0)
    assert ops["tps_user"].tolist() == [11.0, 8.0]
    assert ops["seeds"].tolist() == [2, 2]
    assert ops["tps_user_ci95"].iloc[0] == pytest.approx(12.706 * 1.4142 / math.sqrt(2), rel=1e-3)
    assert ops["tps_user_ci95"].iloc[1] == 0.0
    assert ops["meets_ttft"].tolist() == [True, False]
    assert frontier_vertices(ops)["load"].tolist() == [1]  # the TTFT-violating point is excluded


def test_comparisons_gain_over_first_label_and_matched_throughput():
    ops = ops_frame([
        ("base", 1, 100.0, 200.0), ("base", 4, 80.0, 600.0), ("base", 16, 40.0, 1000.0),
        ("fast", 1, 200.0, 300.0), ("fast", 4, 150.0, 900.0), ("fast", 16, 60.0, 1500.0),
    ])
    comp = comparisons(ops, ["base", "fast"], (80.0, 120.0), "p50")
    at80 = comp[comp["sla_tps_user"] == 80.0].set_index("label")
    assert at80.loc["base", "throughput_per_gpu"] == pytest.approx(600.0)
    # fast at 80 tok/s/user: between (60, 1500) and (150, 900): 1500 - 20 * 600 / 90
    assert at80.loc["fast", "throughput_per_gpu"] == pytest.approx(1500.0 - 20.0 * 600.0 / 90.0)
    assert at80.loc["fast", "gain_vs_baseline"] == pytest.approx((1500.0 - 20.0 * 600.0 / 90.0) / 600.0 - 1)
    # matched throughput 600: fast reaches 150 + (900 - 600) * 50 / 600 = 175 tok/s/user
    assert at80.loc["fast", "tps_user_at_matched"] == pytest.approx(175.0)
    assert at80.loc["fast", "tps_user_gain_vs_baseline"] == pytest.approx(175.0 / 80.0 - 1)
    at120 = comp[comp["sla_tps_user"] == 120.0].set_index("label")
    assert math.isnan(at120.loc["base", "throughput_per_gpu"])
    assert math.isnan(at120.loc["fast", "gain_vs_baseline"])
    assert at120.loc["fast", "throughput_per_gpu"] == pytest.approx(1100.0)  # 1500 - 60 * 600 / 90


def test_frontier_table_has_vertices_and_monotone_interpolation_per_label():
    ops = ops_frame([("a", 1, 100.0, 200.0), ("a", 4, 80.0, 600.0), ("a", 8, 70.0, 500.0),
                     ("b", 1, 50.0, 100.0)])
    table = frontier_table(ops, ["b", "a"])
    assert table["label"].iloc[0] == "b"
    a = table[table["label"] == "a"]
    assert a[a["kind"] == "vertex"]["load"].tolist() == [4, 1]  # (70, 500) is dominated by (80, 600)
    assert (a["kind"] == "interpolated").sum() > 10
    assert np.all(np.diff(a["throughput_per_gpu"].to_numpy()) <= 0)
    assert np.all(np.diff(a["tps_user"].to_numpy()) > 0)
    assert (table[table["label"] == "b"]["kind"] == "vertex").all()


def test_readings_from_the_edge_of_the_load_axis_say_so():
    ops = ops_frame([
        ("base", 1, 100.0, 200.0), ("base", 4, 80.0, 600.0), ("base", 16, 40.0, 1000.0),
        ("peaked", 1, 100.0, 200.0), ("peaked", 4, 60.0, 900.0), ("peaked", 16, 20.0, 700.0),
    ])
    comp = comparisons(ops, ["base", "peaked"], (30.0, 80.0), "p50").set_index(["sla_tps_user", "label"])
    # below the slowest vertex the reading is the largest load's throughput: a bound, marked
    assert comp.loc[(30.0, "base"), "throughput_per_gpu"] == pytest.approx(1000.0)
    assert comp.loc[(30.0, "base"), "throughput_edge"] == "max load 16"
    # a frontier whose best throughput is at an interior load is a real maximum: unmarked
    assert comp.loc[(30.0, "peaked"), "throughput_per_gpu"] == pytest.approx(900.0)
    assert comp.loc[(30.0, "peaked"), "throughput_edge"] == ""
    assert comp.loc[(80.0, "base"), "throughput_edge"] == ""
    # matched throughput 1000 is beyond peaked's frontier (unreachable); 600 reads inside it
    assert comp.loc[(30.0, "peaked"), "tps_user_edge"] == ""
    # at the baseline's lowest throughput (200, load 1) the matched reading is the smallest load's
    assert comp.loc[(80.0, "peaked"), "tps_user_edge"] == ""
    low = comparisons(ops, ["base", "peaked"], (100.0,), "p50").set_index("label")
    assert low.loc["peaked", "tps_user_at_matched"] == pytest.approx(100.0)
    assert low.loc["peaked", "tps_user_edge"] == "min load 1"
