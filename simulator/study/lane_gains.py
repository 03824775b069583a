"""A sweep over agent lanes → each variant's gain over the first at equal lanes (lanes.csv, the report's table).

Agent sessions are a closed system: N lanes offer the same work whatever
the engine does with it, so variants (speculative decoding or none, one
drafter or another) are compared at equal lanes, not along a frontier.
Per lanes value and variant, over seeds:

    throughput_per_gpu                 throughput_tokens_per_s_per_gpu, mean (95% half-width)
    session_output_tokens_per_s        a session's output tokens per second of its wall time (its mean), mean
    throughput_gain, session_rate_gain the variant's figure ÷ the first variant's − 1, paired by seed: a
                                       seed gives every variant the same corpus (generated from it, or read),
                                       drawn in the same order from the same start turns, so each seed gives
                                       one gain; their mean and Student-t 95% half-width (NaN for one seed)
    session_wall_p50_s, ttft_p99_s, tps_user_p50, mean_accepted_per_step      means over seeds
    sessions_completed                 the fewest sessions a seed played whole inside its window (the
                                       session figures rest on them)

`lane_gains(points, labels)` builds the frame from a sweep's points (empty
unless its load axis is `lanes`); the sweep writes it as lanes.csv.
"""

from __future__ import annotations

import math

import pandas as pd

from specplan.simulator.study.frontier import THROUGHPUT, ci95

SESSION_RATE = "session_output_tokens_per_s_mean"
MEANS = {"session_wall_p50_s": "session_wall_p50_s", "ttft_p99_s": "ttft_p99_s", "tps_user_p50": "tps_user_p50",
         "mean_accepted_per_step": "mean_accepted_per_step"}
LANE_COLUMNS = ["lanes", "label", "baseline", "seeds", "throughput_per_gpu", "throughput_per_gpu_ci95",
                "throughput_gain", "throughput_gain_ci95", "session_output_tokens_per_s",
                "session_output_tokens_per_s_ci95", "session_rate_gain", "session_rate_gain_ci95", *MEANS,
                "sessions_completed"]


def lane_gains(points: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """One row per lanes value × variant (module docstring); empty when the sweep's axis is not lanes."""
    if points.empty or not labels or set(points["load_kind"].dropna()) != {"lanes"}:
        return pd.DataFrame(columns=LANE_COLUMNS)
    baseline = labels[0]
    rows = []
    for lanes in sorted(points["load"].dropna().unique()):
        here = points[points["load"] == lanes]
        base = here[here["label"] == baseline].set_index("seed")
        for label in labels:
            mine = here[here["label"] == label].set_index("seed")
            rows.append(lane_row(float(lanes), label, baseline, mine, base))
    return pd.DataFrame(rows, columns=LANE_COLUMNS)


def lane_row(lanes: float, label: str, baseline: str, mine: pd.DataFrame, base: pd.DataFrame) -> dict[str, object]:
    thr_gain, thr_half = paired_gain(mine, base, THROUGHPUT)
    rate_gain, rate_half = paired_gain(mine, base, SESSION_RATE)
    return {"lanes": lanes, "label": label, "baseline": baseline, "seeds": len(mine),
            "throughput_per_gpu": column_mean(mine, THROUGHPUT), "throughput_per_gpu_ci95": column_ci(mine, THROUGHPUT),
            "throughput_gain": thr_gain, "throughput_gain_ci95": thr_half,
            "session_output_tokens_per_s": column_mean(mine, SESSION_RATE),
            "session_output_tokens_per_s_ci95": column_ci(mine, SESSION_RATE),
            "session_rate_gain": rate_gain, "session_rate_gain_ci95": rate_half,
            **{name: column_mean(mine, key) for name, key in MEANS.items()},
            "sessions_completed": float(mine["sessions_completed"].min()) if "sessions_completed" in mine
            else math.nan}


def paired_gain(mine: pd.DataFrame, base: pd.DataFrame, key: str) -> tuple[float, float]:
    """The mean over seeds both ran of mine ÷ the baseline's − 1, and its Student-t 95% half-width."""
    if key not in mine or key not in base:
        return math.nan, math.nan
    seeds = mine.index.intersection(base.index)
    ratios = (mine.loc[seeds, key].astype(float) / base.loc[seeds, key].astype(float) - 1.0)
    ratios = ratios[ratios.notna() & ratios.abs().ne(math.inf)]
    return (float(ratios.mean()) if len(ratios) else math.nan), ci95(ratios)


def column_mean(frame: pd.DataFrame, key: str) -> float:
    return float(frame[key].astype(float).mean()) if key in frame else math.nan


def column_ci(frame: pd.DataFrame, key: str) -> float:
    return ci95(frame[key].astype(float)) if key in frame else math.nan
