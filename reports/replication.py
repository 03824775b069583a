"""A replication's outputs: the table (text and Markdown), replication.csv, and the figure.

`write_replication(result, out_dir)` writes replication.csv (one row per
published figure: its source, workload, arm, metric, concurrency, the value
and unit as published, status, and per mode the predicted value and signed
error), replication.md (the table and the error statistics per mode) and
replication.png (predicted against published on log axes, a point per
figure, coloured by source; figures out of the error are not drawn), and
returns the text table the command prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from specplan.simulator.study.replicate import (
    AS_RUN,
    NEAREST,
    Params,
    Replication,
    error_statistics,
)

MODES = ("predicted", "calibrated", "split")
MODE_WORDS = {"predicted": "predicted (no parameter fitted)",
              "calibrated": "calibrated (parameters fitted on these figures)",
              "split": "predicted out of sample (fitted on the other half)"}


def statistics(rows: pd.DataFrame) -> dict[str, Any]:
    """Per mode: the statistics over every figure, and (`by_basis`) over each basis separately."""
    out = {mode: error_statistics(rows, mode) for mode in MODES if f"{mode}_error" in rows}
    for mode, stats in out.items():
        stats["speedup_sign_agrees"] = speedup_signs(rows, mode)
        stats["by_basis"] = {b: {**error_statistics(rows, mode, b), "speedup_sign_agrees": speedup_signs(rows, mode, b)}
                             for b in (AS_RUN, NEAREST)}
    return out


def speedup_signs(rows: pd.DataFrame, mode: str, on_basis: str | None = None) -> str:
    """How many speed-up figures the prediction reproduces in sign (above or below 1)."""
    column = f"{mode}_value"
    if on_basis is not None and "basis" in rows:
        rows = rows[rows["basis"] == on_basis]
    ok = rows[(rows["status"] == "ok") & (rows["metric"] == "speedup_output_throughput")]
    if column not in ok or ok.empty:
        return "0 of 0"
    agree = np.sign(ok["published"] - 1.0) == np.sign(ok[column] - 1.0)
    return f"{int(agree.sum())} of {len(ok)}"


def table_lines(rows: pd.DataFrame) -> list[str]:
    """One line per figure: source, figure, published, then each mode's prediction and error."""
    modes = [m for m in MODES if f"{m}_error" in rows]
    head = ["source", "workload", "arm", "metric", "c", "published", *[f"{m} (error)" for m in modes], "status",
            "basis"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in rows.iterrows():
        cells = [row["source"], row["workload"], row["arm"], row["metric"], str(row["concurrency"]),
                 f"{row['published']:g} {row['unit']}"]
        cells += [prediction_cell(row, m) for m in modes]
        lines.append("| " + " | ".join([*cells, str(row["status"]), str(row.get("basis", AS_RUN))]) + " |")
    return lines


def prediction_cell(row: pd.Series, mode: str) -> str:
    value, error = row.get(f"{mode}_value"), row.get(f"{mode}_error")
    if value is None or pd.isna(value):
        return "—"
    error_text = "sign wrong" if pd.isna(error) else f"{error:+.1%}"
    return f"{value:.4g} ({error_text})"


def statistics_lines(stats: dict[str, Any]) -> list[str]:
    lines = []
    for mode, s in stats.items():
        lines.append(statistics_line(MODE_WORDS[mode], s))
        for on_basis, part in s.get("by_basis", {}).items():
            lines.append(statistics_line(f"  of which on the {on_basis}" if on_basis == NEAREST
                                         else f"  of which {on_basis}", part))
    return lines


def statistics_line(words: str, s: dict[str, Any]) -> str:
    if not s.get("figures") and not s.get("sign_cases"):
        return f"{words}: no figure could be predicted"
    if not s.get("figures"):
        return f"{words}: no throughput or TPOT figure; sign cases {s['sign_reproduced']} of {s['sign_cases']}"
    return (f"{words}: {s['figures']} figures, median |error| {s['median_abs_error']:.1%}, "
            f"max {s['max_abs_error']:.1%}; speed-ups right in sign {s['speedup_sign_agrees']}; "
            f"sign cases {s['sign_reproduced']} of {s['sign_cases']}")


def status_lines(rows: pd.DataFrame) -> list[str]:
    """How many figures are in the error, and why the others are not (by the status's kind)."""
    if rows.empty:
        return ["no published figure"]
    kinds = rows["status"].astype(str).str.split(":").str[0]
    counts = kinds[kinds != "ok"].value_counts()
    out = [f"{int((kinds == 'ok').sum())} of {len(rows)} figures predicted"]
    out += [f"  left out ({n}): {kind}" for kind, n in counts.items()]
    return out


def params_lines(result: Replication) -> list[str]:
    lines = []
    for mode, groups in result.params.items():
        for group, p in groups.items():
            host = "the scenario's own" if p.host_ms is None else f"{p.host_ms:g}"
            lines.append(f"{mode} {group}: host_ms {host}, verify_scale {p.verify_scale:g}"
                         + (" (no throughput or TPOT figure to fit: nothing fitted)" if p == Params() else ""))
    return lines


def write_replication(result: Replication, out_dir: str | Path) -> str:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = result.rows
    rows.to_csv(out / "replication.csv", index=False)
    stats = statistics(rows)
    cases = [f"case {name}: {status}" for name, status in result.cases.items()]
    text = "\n".join([*table_lines(rows), "", *cases, *status_lines(rows), *statistics_lines(stats), *params_lines(result)])
    (out / "replication.md").write_text("# Predictions against published measurements\n\n" + text + "\n")
    params = {mode: {g: vars(p) for g, p in groups.items()} for mode, groups in result.params.items()}
    doc = {"cases": result.cases, "statistics": stats, "params": params}
    (out / "replication.json").write_text(json.dumps(doc, indent=1) + "\n")
    plot_replication(rows, out / "replication.png")
    return text


def plot_replication(rows: pd.DataFrame, path: Path) -> Path:
    """Predicted against published, log axes, a point per figure coloured by source (best mode shown)."""
    fig = Figure(figsize=(5.5, 5))
    ax = fig.subplots()
    mode = next((m for m in ("split", "calibrated", "predicted") if f"{m}_value" in rows), None)
    drawn = rows[(rows["status"] == "ok") & (rows["metric"] != "speedup_sign")] if mode else rows.iloc[0:0]
    for source, part in drawn.groupby("source"):
        ax.scatter(part["published"], part[f"{mode}_value"], label=str(source), s=24)
    values = np.concatenate([drawn["published"].to_numpy(float), drawn[f"{mode}_value"].to_numpy(float)]) \
        if len(drawn) else np.array([1.0, 10.0])
    lo, hi = float(np.nanmin(values)) / 1.5, float(np.nanmax(values)) * 1.5
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("published (as published: tok/s, ms, x)")
    ax.set_ylabel(f"specplan, {mode or 'none'}")
    if len(drawn):
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no figure could be predicted\n(see replication.md)", ha="center",
                transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
