"""The replication's statistics: |error| per mode, overall, per engine, GPU and layout, per basis, per kind of cell, the goals.

Place in the data flow: `replicate.py` fills one row per published figure
(its status and, per mode, the predicted value and signed error); this
module reduces the rows, and `reports/replication.py` writes what it returns.

Statistics are over the goal metrics (throughput and TPOT figures, and
speed-ups as ratios: `published.GOAL_METRICS`); TTFT figures are predicted
and tabled but in no statistic. The goals (issue 28, on the development
set): predicted median |error| <= 15%; calibrated median <= 10% and max
<= 25%; split median <= 15%; every speed-up right in sign (above or below
1); every sign case reproduced (vllm #49369: DSpark below no speculation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specplan.simulator.study.replication.published import GOAL_METRICS

MODES = ("predicted", "calibrated", "split")
GOALS = (  # (mode, statistic, bound)
    ("predicted", "median_abs_error", 0.15),
    ("calibrated", "median_abs_error", 0.10),
    ("calibrated", "max_abs_error", 0.25),
    ("split", "median_abs_error", 0.15),
)


def error_statistics(rows: pd.DataFrame, mode: str, on_basis: str | None = None,
                     group: str | None = None, only: dict[str, str] | None = None) -> dict[str, Any]:
    """Median and max |error| over the goal metrics, and the sign check, for one mode's columns
    (of the figures on one basis, `as run` or `nearest database version`, of one group, or whose
    columns hold the values of `only` (e.g. kind and gpu), when given)."""
    column = f"{mode}_error"
    if on_basis is not None and "basis" in rows:
        rows = rows[rows["basis"] == on_basis]
    if group is not None:
        rows = rows[rows["group"] == group]
    for name, value in (only or {}).items():
        rows = rows[rows[name] == value] if name in rows else rows.iloc[0:0]
    if column not in rows or rows.empty:
        return {"figures": 0}
    ok = rows[(rows["status"] == "ok") & rows[column].notna()]
    goal = ok[ok["metric"].isin(GOAL_METRICS)][column].abs()
    signs = rows[(rows["status"] == "ok") & (rows["metric"] == "speedup_sign")]
    return {"figures": int(goal.size),
            "median_abs_error": float(goal.median()) if goal.size else None,
            "max_abs_error": float(goal.max()) if goal.size else None,
            "sign_cases": len(signs),
            "sign_reproduced": int((signs.get(column, pd.Series(dtype=float)) == 0).sum()),
            "speedup_sign_agrees": speedup_signs(rows, mode)}


def speedup_signs(rows: pd.DataFrame, mode: str) -> str:
    """How many speed-up figures the prediction reproduces in sign (above or below 1)."""
    column = f"{mode}_value"
    ok = rows[(rows["status"] == "ok") & (rows["metric"] == "speedup_output_throughput")]
    if column not in ok or ok.empty:
        return "0 of 0"
    agree = np.sign(ok["published"] - 1.0) == np.sign(ok[column] - 1.0)
    return f"{int(agree.sum())} of {len(ok)}"


def statistics(rows: pd.DataFrame, bases: tuple[str, ...]) -> dict[str, Any]:
    """Per mode: over every figure, per basis (`by_basis`), per engine, GPU and layout (`by_group`) and per kind of
    cell, over its GPUs and per GPU (`by_kind`)."""
    out = {mode: error_statistics(rows, mode) for mode in MODES if f"{mode}_error" in rows}
    groups = sorted(rows.loc[rows["status"] == "ok", "group"].unique()) if "group" in rows else []
    for mode, stats in out.items():
        stats["by_basis"] = {b: error_statistics(rows, mode, b) for b in bases}
        stats["by_group"] = {g: error_statistics(rows, mode, group=g) for g in groups}
        stats["by_kind"] = kind_statistics(rows, mode)
    return out


def kind_statistics(rows: pd.DataFrame, mode: str) -> dict[str, Any]:
    """Per kind of cell (low-latency, balanced, high-throughput, PR case): over its GPUs, and per GPU."""
    if "kind" not in rows:
        return {}
    ok = rows[rows["status"] == "ok"]
    out = {}
    for kind in sorted(ok["kind"].unique()):
        gpus = sorted(ok.loc[ok["kind"] == kind, "gpu"].unique())
        out[kind] = {**error_statistics(rows, mode, only={"kind": kind}),
                     "by_gpu": {g: error_statistics(rows, mode, only={"kind": kind, "gpu": g}) for g in gpus}}
    return out


def goals(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal with the value reached and whether it is met (a mode not run: not evaluated)."""
    out = []
    for mode, statistic, bound in GOALS:
        value = stats.get(mode, {}).get(statistic)
        out.append({"goal": f"{mode} {statistic.replace('_abs_error', '')} |error| <= {bound:.0%}",
                     "value": value, "met": None if value is None else bool(value <= bound)})
    predicted = stats.get("predicted", {})
    if predicted:
        agree, total = (int(x) for x in predicted["speedup_sign_agrees"].split(" of "))
        out.append({"goal": "every speed-up right in sign (predicted)", "value": f"{agree} of {total}",
                    "met": agree == total})
        out.append({"goal": "every sign case reproduced (predicted)",
                    "value": f"{predicted.get('sign_reproduced', 0)} of {predicted.get('sign_cases', 0)}",
                    "met": predicted.get("sign_reproduced", 0) == predicted.get("sign_cases", 0)})
    return out
