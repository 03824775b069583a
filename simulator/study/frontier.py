"""Sweep points → operating points → Pareto frontiers → SLA comparisons.

The frontier of a label is the set of its operating points (seed means at
one load) not dominated in (tokens/s/user statistic, throughput per GPU),
both to maximise. Along a frontier sorted by tokens/s/user, throughput per
GPU strictly decreases, so piecewise-linear interpolation between vertices
is monotone and never overshoots a simulated point:

    throughput_at(vertices, tps_user)   best throughput/GPU meeting tps_user ≥ SLA
    tps_user_at(vertices, throughput)   best tokens/s/user at a matched throughput

Beyond the fastest vertex an SLA is unreachable (NaN); below the slowest
vertex the frontier's highest throughput is returned (a slower SLA is met
by that point, and the sweep measured nothing better).

A reading clamped to an end vertex that is also the label's largest (or,
for matched tokens/s/user, smallest) simulated load is only a bound: more
(less) load was never simulated. `comparisons` says so in
`throughput_edge` / `tps_user_edge` ("max load 128", "min load 1"; empty
when the reading lies inside the simulated loads), and the tables and the
frontier figure show it.

A point is **thin** when a seed of it completed fewer than `MIN_COMPLETED`
(30) requests in the measurement window: the number under which a plan
refuses to judge a probe (specplan.simulator.study.keepup), so sweep and
plan share one rule. A reading rests on the label's points whose loads lie
between the vertices it interpolates (and, clamped or unreachable, on every
point beyond the end it stopped at: a thin or empty point there might have
reached further); `comparisons` names the thinnest of them in `thin` /
`tps_user_thin` ("load 64: 0 requests"; empty when every one is solid), and
the tables mark such a reading and its gain.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from specplan.simulator.study.keepup import MIN_COMPLETED

THROUGHPUT = "throughput_tokens_per_s_per_gpu"
GRID_POINTS = 24


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True for points not dominated in (x, y), both maximised; of exact ties, the first is kept.

    A point is dominated when another is at least as good in both and
    better in one. Points with a NaN coordinate are never on the frontier.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    mask = np.zeros(x.shape, dtype=bool)
    finite = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    if finite.size == 0:
        return mask
    order = finite[np.lexsort((-y[finite], -x[finite]))]
    ys = y[order]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(ys)[:-1]))
    mask[order[ys > best_before]] = True
    return mask


def ci95(values: pd.Series) -> float:
    """Half-width of the 95% Student-t confidence interval of the mean (NaN for one value)."""
    v = values.dropna().to_numpy(dtype=float)
    if v.size < 2:
        return math.nan
    # scipy.stats costs a command 0.5 s to import: only where an interval is computed
    from scipy import stats

    return float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))


def operating_points(points: pd.DataFrame, tps_column: str, ttft_s: float | None = None) -> pd.DataFrame:
    """Seed means per (label, load): tokens/s/user statistic, throughput/GPU, their 95% CIs."""
    rows = []
    for (label, load), group in points.groupby(["label", "load"], sort=False, dropna=False):
        ttft = float(group["ttft_p99_s"].mean())
        requests = float(group["requests_completed_in_window"].min()) if "requests_completed_in_window" in group \
            else math.nan
        rows.append({
            "label": label, "load": load,
            "tps_user": float(group[tps_column].mean()), "tps_user_ci95": ci95(group[tps_column]),
            "throughput_per_gpu": float(group[THROUGHPUT].mean()),
            "throughput_per_gpu_ci95": ci95(group[THROUGHPUT]),
            "ttft_p99_s": ttft, "mean_batch_requests": float(group["mean_batch_requests"].mean()),
            "mean_verify_tokens_per_request_step": float(group["mean_verify_tokens_per_request_step"].mean()),
            "seeds": len(group),
            "meets_ttft": bool(ttft_s is None or (np.isfinite(ttft) and ttft <= ttft_s)),
            "requests_in_window": requests, "thin": bool(requests < MIN_COMPLETED),
        })
    return pd.DataFrame(rows, columns=OPERATING_COLUMNS)


OPERATING_COLUMNS = ["label", "load", "tps_user", "tps_user_ci95", "throughput_per_gpu",
                     "throughput_per_gpu_ci95", "ttft_p99_s", "mean_batch_requests",
                     "mean_verify_tokens_per_request_step", "seeds", "meets_ttft", "requests_in_window", "thin"]
FRONTIER_COLUMNS = ["label", "kind", "load", "tps_user", "throughput_per_gpu", "seeds"]


def frontier_vertices(ops: pd.DataFrame) -> pd.DataFrame:
    """One label's non-dominated operating points (TTFT-feasible only), by tokens/s/user ascending."""
    feasible = ops[ops["meets_ttft"]]
    mask = pareto_mask(feasible["tps_user"].to_numpy(), feasible["throughput_per_gpu"].to_numpy())
    return feasible[mask].sort_values("tps_user", kind="stable").reset_index(drop=True)


def throughput_at(vertices: pd.DataFrame, tps_user: float) -> float:
    """Highest throughput/GPU on the frontier with tokens/s/user ≥ `tps_user` (NaN if none)."""
    x = vertices["tps_user"].to_numpy(dtype=float)
    y = vertices["throughput_per_gpu"].to_numpy(dtype=float)
    if x.size == 0 or tps_user > x[-1]:
        return math.nan
    return float(np.interp(tps_user, x, y))


def tps_user_at(vertices: pd.DataFrame, throughput_per_gpu: float) -> float:
    """Highest tokens/s/user on the frontier at throughput/GPU ≥ the given one (NaN if none)."""
    x = vertices["tps_user"].to_numpy(dtype=float)[::-1]
    y = vertices["throughput_per_gpu"].to_numpy(dtype=float)[::-1]
    if y.size == 0 or not np.isfinite(throughput_per_gpu) or throughput_per_gpu > y[-1]:
        return math.nan
    return float(np.interp(throughput_per_gpu, y, x))


def frontier_table(ops: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Every label's vertices plus a monotone (piecewise-linear) interpolation grid between them."""
    parts = []
    for label in labels:
        vertices = frontier_vertices(ops[ops["label"] == label])
        if vertices.empty:
            continue
        part = vertices[["label", "load", "tps_user", "throughput_per_gpu", "seeds"]].assign(kind="vertex")
        parts.append(part)
        if len(vertices) > 1:
            grid = np.linspace(vertices["tps_user"].iloc[0], vertices["tps_user"].iloc[-1], GRID_POINTS)
            between = grid[~np.isin(grid, vertices["tps_user"].to_numpy())]
            parts.append(pd.DataFrame({
                "label": label, "kind": "interpolated", "load": math.nan, "tps_user": between,
                "throughput_per_gpu": [throughput_at(vertices, t) for t in between], "seeds": 0}))
    if not parts:
        return pd.DataFrame(columns=FRONTIER_COLUMNS)
    table = pd.concat(parts, ignore_index=True)[FRONTIER_COLUMNS]
    order = {label: i for i, label in enumerate(labels)}
    table["_label_order"] = table["label"].map(order)
    table = table.sort_values(["_label_order", "tps_user"], kind="stable").drop(columns="_label_order")
    return table.reset_index(drop=True)


COMPARISON_COLUMNS = ["sla_tps_user", "statistic", "label", "baseline", "throughput_per_gpu",
                      "gain_vs_baseline", "matched_throughput_per_gpu", "tps_user_at_matched",
                      "tps_user_gain_vs_baseline", "throughput_edge", "tps_user_edge", "thin", "tps_user_thin"]


def throughput_edge(vertices: pd.DataFrame, loads: pd.Series, tps_user: float) -> str:
    """"max load L" when throughput_at(tps_user) is the first vertex's and that vertex is the largest load."""
    x = vertices["tps_user"].to_numpy(dtype=float)
    if x.size == 0 or not tps_user <= x[0]:
        return ""
    return edge_name(vertices["load"].iloc[0], loads, "max")


def tps_user_edge(vertices: pd.DataFrame, loads: pd.Series, throughput_per_gpu: float) -> str:
    """"min load L" when tps_user_at(throughput) is the last vertex's and that vertex is the smallest load."""
    y = vertices["throughput_per_gpu"].to_numpy(dtype=float)
    if y.size == 0 or not throughput_per_gpu <= y[-1]:
        return ""
    return edge_name(vertices["load"].iloc[-1], loads, "min")


def edge_name(load: float, loads: pd.Series, side: str) -> str:
    """"max load L" / "min load L" when `load` is that end of the simulated loads, else ""."""
    values = pd.to_numeric(loads, errors="coerce").dropna()
    if values.empty or not np.isfinite(load):
        return ""
    end = values.max() if side == "max" else values.min()
    return f"{side} load {load:g}" if load == end else ""


def comparisons(ops: pd.DataFrame, labels: list[str], sla_values: tuple[float, ...],
                statistic: str) -> pd.DataFrame:
    """At each SLA: throughput/GPU per label and its gain over the first label; tokens/s/user
    of every label at the first label's throughput (matched throughput) and its gain."""
    if not labels or not sla_values:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    vertices = {label: frontier_vertices(ops[ops["label"] == label]) for label in labels}
    loads = {label: ops.loc[ops["label"] == label, "load"] for label in labels}
    own = {label: ops[ops["label"] == label] for label in labels}
    baseline = labels[0]
    rows = []
    for sla in sla_values:
        base_thr = throughput_at(vertices[baseline], sla)
        base_tps = tps_user_at(vertices[baseline], base_thr)
        for label in labels:
            thr = throughput_at(vertices[label], sla)
            tps = tps_user_at(vertices[label], base_thr)
            rows.append({
                "sla_tps_user": float(sla), "statistic": statistic, "label": label, "baseline": baseline,
                "throughput_per_gpu": thr, "gain_vs_baseline": relative_gain(thr, base_thr),
                "matched_throughput_per_gpu": base_thr, "tps_user_at_matched": tps,
                "tps_user_gain_vs_baseline": relative_gain(tps, base_tps),
                "throughput_edge": throughput_edge(vertices[label], loads[label], sla) if math.isfinite(thr) else "",
                "tps_user_edge": tps_user_edge(vertices[label], loads[label], base_thr) if math.isfinite(tps) else "",
                "thin": thin_text(own[label], throughput_span(vertices[label], sla)),
                "tps_user_thin": thin_text(own[label], tps_user_span(vertices[label], base_thr))
                or thin_text(own[baseline], throughput_span(vertices[baseline], sla)),
            })
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def relative_gain(value: float, baseline: float) -> float:
    """value / baseline − 1, NaN when either is missing or the baseline is zero."""
    if not (np.isfinite(value) and np.isfinite(baseline)) or baseline == 0:
        return math.nan
    return float(value / baseline - 1.0)


def thin_text(ops: pd.DataFrame, span: tuple[float, float]) -> str:
    """'load 64: 0 requests': the thinnest thin operating point of a label with its load in `span`, else ''."""
    if "thin" not in ops:
        return ""
    low, high = span
    inside = ops[ops["thin"] & (ops["load"] >= low) & (ops["load"] <= high)]
    if inside.empty:
        return ""
    row = inside.sort_values("requests_in_window", kind="stable").iloc[0]
    return f"load {row['load']:g}: {row['requests_in_window']:.0f} requests"


def throughput_span(vertices: pd.DataFrame, tps_user: float) -> tuple[float, float]:
    """The loads `throughput_at(vertices, tps_user)` rests on: those between its two vertices; clamped at the
    slowest vertex, it and every heavier load; unreachable, every load up to the fastest vertex's."""
    x = vertices["tps_user"].to_numpy(dtype=float)
    loads = vertices["load"].to_numpy(dtype=float)
    if x.size == 0 or not math.isfinite(tps_user):
        return -math.inf, math.inf
    if tps_user > x[-1]:
        return -math.inf, float(loads[-1])
    if tps_user <= x[0]:
        return float(loads[0]), math.inf
    i = int(np.searchsorted(x, tps_user))
    return float(min(loads[i - 1], loads[i])), float(max(loads[i - 1], loads[i]))


def tps_user_span(vertices: pd.DataFrame, throughput_per_gpu: float) -> tuple[float, float]:
    """The loads `tps_user_at(vertices, throughput_per_gpu)` rests on: those between its two vertices; clamped
    at the fastest vertex, it and every lighter load; above every throughput, every load from the busiest's."""
    y = vertices["throughput_per_gpu"].to_numpy(dtype=float)  # decreasing along the vertices
    loads = vertices["load"].to_numpy(dtype=float)
    if y.size == 0 or not math.isfinite(throughput_per_gpu):
        return -math.inf, math.inf
    if throughput_per_gpu > y[0]:
        return float(loads[0]), math.inf
    if throughput_per_gpu <= y[-1]:
        return -math.inf, float(loads[-1])
    i = max(int(np.searchsorted(-y, -throughput_per_gpu)), 1)
    return float(min(loads[i - 1], loads[i])), float(max(loads[i - 1], loads[i]))
