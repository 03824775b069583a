"""A replication's outputs: the table (text and Markdown), replication.csv, and the figure.

`write_replication(result, out_dir)` writes replication.csv (one row per
published figure: its source, group, workload, arm, metric, concurrency, the
value and unit as published, status, per mode the predicted value and signed
error, and where the case assumes its acceptance the prediction at AL -10%
and +10%), replication.md (the table; the goals, met or missed and by how
much; the error statistics per mode, overall, per basis, per engine and
GPU and per kind of cell and GPU; a line per case on its AL sensitivity; the
fitted parameters; and, apart and in no statistic, the version spread: each
stale published figure beside its newest), version_spread.csv (those pairs),
replication.json (the same statistics) and replication.png (predicted against
published on log axes, a point per figure, coloured by source; figures out of
the error are not drawn), and returns the text the command prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from specplan.simulator.study.replication.attribution import ATTRIBUTE_AT, MIN_MOVE
from specplan.simulator.study.replication.case_runner import AS_RUN, NEAREST, Params
from specplan.simulator.study.replication.replicate import SENSITIVITIES, Replication, missing_lines
from specplan.simulator.study.replication.stats import (
    MODES,
    SERVING_MISS,
    STEP_WITHIN,
    goals,
    responsibility,
    serving_rows,
    statistics,
    step_coverage_goal,
    step_goal,
    step_rows,
    step_statistics,
)
from specplan.simulator.study.replication.version_spread import spread_statistics

MODE_WORDS = {"predicted": "predicted (no parameter fitted)",
              "calibrated": "calibrated (fitted per engine version, layout and model on these figures)",
              "transferred": "transferred (leave one GPU out: fitted on the other GPUs of the engine version, layout and model)",
              "transferred_layout": "transferred across layouts (leave one layout out: fitted on the other layout)"}


def table_lines(rows: pd.DataFrame) -> list[str]:
    """One line per figure: source, figure, published, then each mode's prediction and error, and how the
    predicted run's steps ran (eager share of steps / of time, the main reason)."""
    modes = [m for m in MODES if f"{m}_error" in rows]
    head = ["source", "workload", "arm", "metric", "c", "published", *[f"{m} (error)" for m in modes],
            "eager steps / time (main reason)", "status", "basis"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in rows.iterrows():
        cells = [row["source"], row["workload"], row["arm"], row["metric"], str(row["concurrency"]),
                 f"{row['published']:g} {row['unit']}"]
        cells += [prediction_cell(row, m) for m in modes]
        cells.append(mode_cell(row))
        lines.append("| " + " | ".join([*cells, str(row["status"]), str(row.get("basis", AS_RUN))]) + " |")
    return lines


def mode_cell(row: pd.Series) -> str:
    """'12% / 41% (rank_prefilling 9%)', or '—' where the run modelled no mode."""
    reason = row.get("main_mode_reason")
    if not isinstance(reason, str) or not reason:
        return "—"
    return f"{row['eager_step_share']:.0%} / {row['eager_time_share']:.0%} ({reason})"


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


def group_lines(stats: dict[str, Any]) -> list[str]:
    """A table: per engine, GPU and layout, figures and median / max |error| of each mode."""
    modes = list(stats)
    groups = list(stats[modes[0]].get("by_group", {})) if modes else []
    if not groups:
        return []
    head = ["engine/GPU/layout", "figures", *[f"{m} median / max" for m in modes], "speed-ups in sign", "sign cases"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group in [*groups, "all"]:
        parts = [stats[m] if group == "all" else stats[m]["by_group"][group] for m in modes]
        cells = [group, str(parts[0].get("figures", 0)), *[pair(p) for p in parts],
                 parts[0].get("speedup_sign_agrees", "0 of 0"),
                 f"{parts[0].get('sign_reproduced', 0)} of {parts[0].get('sign_cases', 0)}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def kind_lines(stats: dict[str, Any]) -> list[str]:
    """A table: per kind of cell, over its GPUs and then per GPU, figures and median / max |error| of each mode."""
    modes = [m for m in stats if stats[m].get("by_kind")]
    if not modes:
        return []
    head = ["kind of cell", "GPU", "figures", *[f"{m} median / max" for m in modes]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind, part in stats[modes[0]]["by_kind"].items():
        for gpu in ["all", *part["by_gpu"]]:
            parts = [stats[m]["by_kind"][kind] if gpu == "all" else stats[m]["by_kind"][kind]["by_gpu"][gpu]
                     for m in modes]
            lines.append("| " + " | ".join([kind if gpu == "all" else "", gpu, str(parts[0].get("figures", 0)),
                                            *[pair(p) for p in parts]]) + " |")
    return lines


def spread_lines(spread: pd.DataFrame) -> list[str]:
    """The version spread, apart: each stale figure beside its newest, and how far they moved per quantity."""
    if spread.empty:
        return []
    head = ["source", "c", "quantity", "stale (version, statistic)", "newest (version, statistic)", "newest / stale"]
    lines = ["## Version spread (in no goal or error statistic)", "",
             "Two published runs of the same cell: the stale figure (spread.csv) beside the newest (published.csv).",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in spread.iterrows():
        lines.append("| " + " | ".join([
            str(r["source"]), str(r["concurrency"]), str(r["quantity"]),
            f"{figure_text(r['stale'])} {r['unit']} ({r['stale_version']}, {r['stale_statistic']})",
            f"{figure_text(r['newest'])} {r['unit']} ({r['newest_version']}, {r['newest_statistic']})",
            f"{r['ratio']:.3f}" + (f" ({r['note']})" if r["note"] else "")]) + " |")
    lines.append("")
    for quantity, s in spread_statistics(spread).items():
        lines.append(f"version spread, {quantity}: {s['pairs']} pairs, median |newest / stale - 1| "
                     f"{s['median_abs_change']:.1%}, max {s['max_abs_change']:.1%}")
    return lines


def figure_text(value: float) -> str:
    """Four significant digits, a large figure in full with thousands separators (no exponent)."""
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def pair(s: dict[str, Any]) -> str:
    return "—" if not s.get("figures") else f"{s['median_abs_error']:.1%} / {s['max_abs_error']:.1%}"


def goal_lines(stats: dict[str, Any], rows: pd.DataFrame | None = None) -> list[str]:
    out = []
    steps = step_statistics(rows) if rows is not None and not step_rows(rows).empty else None
    extra = [] if steps is None else [step_goal(steps), step_coverage_goal(steps)]
    for g in [*goals(stats), *extra]:
        value = g["value"] if isinstance(g["value"], str) or g["value"] is None else f"{g['value']:.1%}"
        verdict = "not evaluated" if g["met"] is None else ("met" if g["met"] else "MISSED")
        out.append(f"goal {g['goal']}: {value} ({verdict})")
    return out


def sensitivity_lines(rows: pd.DataFrame, sources: dict[str, str]) -> list[str]:
    """One line per case whose acceptance is assumed: how far AL -/+10% moves each of its figures."""
    column = f"{SENSITIVITIES[0]}_change"
    if column not in rows:
        return []
    out = []
    for source, part in rows[rows[column].notna()].groupby("source", sort=False):
        moves = [f"{r['metric']} c={r['concurrency']} {r[column]:+.1%} / {r[f'{SENSITIVITIES[1]}_change']:+.1%}"
                 for _, r in part.iterrows()]
        largest = part[[column, f"{SENSITIVITIES[1]}_change"]].abs().to_numpy().max()
        out.append(f"AL -10% / +10%, case {source} ({sources.get(str(source), '')}): {'; '.join(moves)}; "
                   f"largest |change| {largest:.1%}")
    return out


def status_lines(rows: pd.DataFrame) -> list[str]:
    """How many serving figures, then step figures, are in the error, and why the others are not (by the status's
    kind)."""
    if rows.empty:
        return ["no published figure"]
    out = []
    for words, part in (("figures", serving_rows(rows)), ("step figures", step_rows(rows))):
        if part.empty:
            continue
        kinds = part["status"].astype(str).str.split(":").str[0]
        counts = kinds[kinds != "ok"].value_counts()
        out.append(f"{int((kinds == 'ok').sum())} of {len(part)} {words} predicted")
        out += [f"  left out ({n}): {kind}" for kind, n in counts.items()]
    return out


def step_lines(rows: pd.DataFrame) -> list[str]:
    """The step cases' predicted |error| (no scheduler: each figure priced by the step model alone), overall, per
    engine and GPU, per metric."""
    steps = step_statistics(rows)
    if not steps.get("published"):
        return []
    lines = ["## Step cases (a static batch priced by the step model, no scheduler; in no serving statistic)", "",
             f"step cases: {steps['cases']} cases, {steps['figures']} of {steps['published']} figures predicted"
             + (f", median |error| {steps['median_abs_error']:.1%}, max {steps['max_abs_error']:.1%}"
                if steps["figures"] else ""), ""]
    head = ["engine/GPU or metric", "figures", "median / max |error|"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, part in [*steps["by_engine_gpu"].items(), *steps["by_metric"].items()]:
        lines.append(f"| {key} | {part['figures']} | {pair(part)} |")
    return lines


def responsibility_lines(rows: pd.DataFrame) -> list[str]:
    """Per serving cell, its error beside its nearest step case's at the nearest batch, and which one is
    responsible (`step_vs_schedule`, stats.verdict's rule)."""
    cells = responsibility(rows)
    if not cells or step_rows(rows).empty:
        return []
    head = ["serving cell", "model, engine/GPU/layout", "serving median |error|", "nearest step case (batch)",
            "step median |error|", "step_vs_schedule", "why"]
    lines = ["## Each serving cell beside its nearest step case", "",
             f"Rule: a step case within {STEP_WITHIN:.0%} beside a serving cell off by more than {SERVING_MISS:.0%}: "
             f"the schedule; a step case off by more than {STEP_WITHIN:.0%} and a serving miss no larger than the "
             f"step's + {STEP_WITHIN:.0%}: the step price; a larger serving miss: both; a serving cell within "
             f"{SERVING_MISS:.0%}: neither; no predicted step case of the model, engine, GPU, layout and GPU count: "
             "unknown. The step case's error is read at the batch nearest the cell's concurrency.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        case = c["step_case"] or "—"
        if c.get("step_batch") is not None:
            case += f" (batch {c['step_batch']})"
        lines.append("| " + " | ".join([
            c["source"], f"{c['model']}, {c['group']}", percent(c["serving_median_abs_error"]), case,
            percent(c["step_median_abs_error"]) + (f" ({c['step_figures']} figures)" if c["step_figures"] else ""),
            c["step_vs_schedule"], c["responsible"]]) + " |")
    counts = pd.Series([c["step_vs_schedule"] for c in cells]).value_counts()
    lines += ["", "step_vs_schedule: " + ", ".join(f"{k} {int(n)}" for k, n in counts.items())]
    return lines


def attribution_lines(rows: pd.DataFrame) -> list[str]:
    """Per serving figure off by more than 30% with nothing fitted: the mode, cap or rule responsible, and why
    (`replicate --attribute`; none where it was not asked)."""
    if "responsible" not in rows:
        return []
    off = rows[rows["responsible"].notna()]
    head = ["source", "metric", "c", "predicted error", "responsible", "reason"]
    lines = [f"## Responsible mode, cap or rule (predicted |error| > {ATTRIBUTE_AT:.0%})", "",
             f"Each figure predicted again with one mode, cap or rule removed or at its alternative; the one that "
             f"brings |error| down most, by {100 * MIN_MOVE:.0f} points at least, is named, else the step price "
             "(specplan.simulator.study.replication.attribution).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in off.iterrows():
        lines.append(f"| {r['source']} | {r['metric']} | {r['concurrency']} | {r['predicted_error']:+.1%} | "
                     f"{r['responsible']} | {r['responsible_reason']} |")
    return lines


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def params_lines(result: Replication) -> list[str]:
    """Each fold's choice: in sample per engine version and layout, then each held-out GPU and layout."""
    lines = []
    for mode, groups in result.params.items():
        for group, p in groups.items():
            host = "the scenario's own" if p.host_ms is None else f"{p.host_ms:g}"
            extend = "" if p.extend_op_us is None else f", extend_op_us {p.extend_op_us:g}"
            lines.append(f"{mode} {group}: host_ms {host}, verify_scale {p.verify_scale:g}{extend}"
                         + (" (no throughput or TPOT figure to fit: nothing fitted)" if p == Params() else ""))
    return lines


def write_replication(result: Replication, out_dir: str | Path) -> str:
    """The replication's report beside its records (`replicate` writes those): replication.md and .png;
    returns the report's text."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = result.rows
    stats = statistics(rows, (AS_RUN, NEAREST))
    cases = [f"case {name}: {status}" for name, status in result.cases.items()]
    text = "\n".join([*missing_lines(result), "", *table_lines(rows), "", *cases, *status_lines(rows), "",
                      *goal_lines(stats, rows), "", *statistics_lines(stats), "", *group_lines(stats), "",
                      *kind_lines(stats), "", *sensitivity_lines(rows, result.assumed_al), "", *params_lines(result), "",
                      *step_lines(rows), "", *responsibility_lines(rows), "", *attribution_lines(rows), "", *spread_lines(result.spread)])
    (out / "replication.md").write_text("# Predictions against published measurements\n\n" + text + "\n")
    plot_replication(rows, out / "replication.png")
    return text


def plot_replication(rows: pd.DataFrame, path: Path) -> Path:
    """Predicted against published, log axes, a point per figure coloured by source (best mode shown)."""
    fig = Figure(figsize=(5.5, 5))
    ax = fig.subplots()
    mode = next((m for m in ("transferred", "calibrated", "predicted") if f"{m}_value" in rows), None)
    value = f"{mode}_value"
    drawn = rows[(rows["status"] == "ok") & (rows["metric"] != "speedup_sign")] if mode \
        else pd.DataFrame(columns=["source", "published", value])  # nothing predicted: no column to group by
    for source, part in drawn.groupby("source"):
        ax.scatter(part["published"], part[value], label=str(source), s=24)
    values = np.concatenate([drawn["published"].to_numpy(float), drawn[value].to_numpy(float)]) \
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
