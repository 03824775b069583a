"""The version spread: an older published run of a cell beside its newest, reported apart from every error.

Place in the data flow: published.py reads a case's spread.csv (the figures
of an older run of the same cell: another engine version, cache state or
statistic, named in source.yaml's `spread`); `spread_rows` pairs each with
the newest figure of the same quantity (workload, arm, concurrency and TTFT,
TPOT or throughput, whatever the statistic) and `spread_statistics` reduces
the pairs; replicate.py carries them and reports/replication.py writes them
(version_spread.csv and a section of their own). They are in no goal and no
error statistic: they show how far two published runs of "the same" cell
differ, a floor under what any prediction of it can claim.

    ratio = newest / stale   (a mean against a P50 is said in the row)

A throughput published as total (input + output) on one side and output on
the other is compared as output, the total scaled by output / (input +
output) of the cell's nominal lengths (`length_rule`), and the row says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.study.published import Case, Figure

QUANTITIES = {"mean_ttft": "TTFT", "median_ttft": "TTFT", "mean_tpot": "TPOT", "median_tpot": "TPOT",
              "mean_itl": "ITL", "median_itl": "ITL", "output_throughput": "output tok/s",
              "total_throughput": "output tok/s", "output_throughput_per_gpu": "output tok/s/GPU",
              "total_throughput_per_gpu": "output tok/s/GPU"}
COLUMNS = ("source", "workload", "arm", "concurrency", "quantity", "stale_version", "stale_statistic", "stale",
           "newest_version", "newest_statistic", "newest", "unit", "ratio", "note")


def spread_rows(cases: list[Case]) -> pd.DataFrame:
    """One row per cell figure present in both a case's spread.csv and its published.csv."""
    rows = [row for case in cases for row in case_rows(case)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def case_rows(case: Case) -> list[dict[str, Any]]:
    newest = {key(f): f for f in case.figures if f.metric in QUANTITIES}
    rows = []
    for stale in case.spread:
        match = newest.get(key(stale)) if stale.metric in QUANTITIES else None
        if match is not None:
            rows.append(pair_row(case, stale, match))
    return rows


def key(figure: Figure) -> tuple[str, str, int, str]:
    return figure.workload, figure.arm, figure.concurrency, QUANTITIES[figure.metric]


def pair_row(case: Case, stale: Figure, newest: Figure) -> dict[str, Any]:
    """The pair in the newest figure's unit (a total turned into output where the two sides differ)."""
    old, new, note = stale.value, newest.value, ""
    if stale.metric.startswith("total") != newest.metric.startswith("total"):
        share = output_share(case)
        old, new = (old * share, new) if stale.metric.startswith("total") else (old, new * share)
        note = f"total compared as output (x {share:.4g}, the nominal output / (input + output))"
    scale = newest.value / newest.published if newest.published else 1.0  # the summary unit -> as published
    return {"source": case.name, "workload": newest.workload, "arm": newest.arm, "concurrency": newest.concurrency,
            "quantity": QUANTITIES[newest.metric], "stale_version": case.source["spread"]["engine_version"],
            "stale_statistic": stale.statistic or "-", "stale": old / scale,
            "newest_version": str((case.source.get("engine") or {}).get("version", "?")),
            "newest_statistic": newest.statistic or "-", "newest": new / scale, "unit": newest.unit,
            "ratio": new / old if old else np.nan, "note": note}


def output_share(case: Case) -> float:
    rule = case.source.get("length_rule") or {}
    if not rule:
        raise SpecplanError(f"{case.folder}: a total and an output throughput are paired in spread.csv, and "
                            "comparing them needs source.yaml's length_rule (the nominal lengths)")
    return rule["output_tokens"] / (rule["input_tokens"] + rule["output_tokens"])


def spread_statistics(rows: pd.DataFrame) -> dict[str, Any]:
    """Per quantity and over all pairs: how many, and the median and largest |ratio − 1|."""
    def reduce(part: pd.DataFrame) -> dict[str, Any]:
        moved = (part["ratio"] - 1.0).abs()
        return {"pairs": len(part), "median_abs_change": float(moved.median()) if len(part) else None,
                "max_abs_change": float(moved.max()) if len(part) else None}
    return {"all": reduce(rows), **{q: reduce(part) for q, part in rows.groupby("quantity", sort=True)}}
