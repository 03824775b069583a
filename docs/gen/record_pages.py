"""Results pages read from committed records of slow studies: the replication suite and the fidelity check.

`specplan replicate benchmarks/published --calibrate --allow-missing` (about a quarter of
an hour) writes benchmarks/published/results/; `specplan fidelity
scenarios/fidelity.yaml --runs 3` (about half an hour, on a quiet machine)
writes validation/results/. These pages are regenerated from those records
in a second, so the test regenerates them and compares.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

from docs.gen.results import REPO, Study, figure, table
from specplan.simulator.study.replication.calibrate import EXTEND_GRID_US, HOST_GRID_MS, SCALE_GRID
from specplan.simulator.study.replication.published import GOAL_METRICS

REPLICATION = REPO / "benchmarks" / "published" / "results"
FIDELITY = REPO / "validation" / "results"


def replication_page(args: argparse.Namespace) -> str:
    report = (REPLICATION / "replication.md").read_text()
    return "\n".join([
        "Made by `specplan replicate benchmarks/published --calibrate --workers 2 --allow-missing --write-table "
        "hwprofiles/public/calibration.yaml` (committed in "
        "`benchmarks/published/results/`: replication.csv, .md, .json, .png); this page is read from that "
        "record. What the suite is, how it runs and what is responsible for its misses: "
        "[Replication and fidelity](../guides/replication.md). Every DeepSeek-V4-Pro end-to-end serving "
        "figure is held out of it.", "",
        standing(2),
        figure(REPLICATION / "replication.png", "replication.png"),
        "## Every figure, and the suite's own report", "",
        "As `specplan replicate` wrote it (replication.md):", "", demote(report)])


def standing(level: int) -> str:
    """The suite's figures as they stand: the count, the goals, the errors per engine, GPU and layout and per kind of
    cell (the results page, and the block of docs/guides/replication.md between its markers)."""
    record = json.loads((REPLICATION / "replication.json").read_text())
    report = (REPLICATION / "replication.md").read_text()
    rows = pd.read_csv(REPLICATION / "replication.csv")
    counts = next(line for line in report.splitlines() if re.match(r"\d+ of \d+ figures predicted", line))
    head = "#" * level
    return "\n".join([
        f"**{counts}.** Statistics are over the throughput, TPOT and speed-up figures; TTFT figures are "
        f"predicted and tabled, in no statistic ({ttft_text(rows)}).", "",
        f"{head} Goals", "", goals_table(record["goals"]),
        f"{head} Median / max |error| per engine, GPU and layout", "",
        "Predicted (nothing fitted), calibrated in sample (host time and step scale fitted per engine version, "
        "layout and model on these figures: the shipped calibration table's rows) and transferred (cross-validated: "
        "fitted with the figure's GPU left out, or its layout left out), side by side; – where a fold has nothing "
        "to fit on (the only GPU, or the only layout, of its engine version and model).", "",
        groups_table(record),
        f"{head} Predicted, calibrated and transferred by kind of cell", "", fits_by_kind_table(record),
        f"{head} What each fit chose", "",
        "A fitted parameter at the edge of the calibration grid (host up to "
        f"{HOST_GRID_MS[-1]:g} ms, scale {SCALE_GRID[0]:g}–{SCALE_GRID[-1]:g}, an extend step's host cost up to "
        f"{EXTEND_GRID_US[-1]:g} µs a kernel) is marked: the fit would have gone further. The extend cost is fitted "
        "only where the row's engine prices a step carrying prompt tokens by its kernel launches; \"the engine's "
        "own\" is the launcher's figure.", "",
        params_table(record),
        f"{head} By kind of cell (predicted)", "", kinds_table(rows),
        f"{head} What the assumed acceptance moves", "",
        "Where a case assumes its acceptance, every figure is predicted again with the accepted length 10% "
        "lower and 10% higher (`al_minus_10_change`, `al_plus_10_change`: the change against the prediction).",
        "", acceptance_table(rows), *step_blocks(record, head)])


def step_blocks(record: dict, head: str) -> list[str]:
    """The step cases' errors and each serving cell beside its nearest step case (records written since step cases
    exist; none before)."""
    steps = record.get("step_statistics") or {}
    if not steps.get("published"):
        return []
    rows = [[key, str(part["figures"]), error_text(part)]
            for key, part in [*steps.get("by_engine_gpu", {}).items(), *steps.get("by_metric", {}).items()]]
    cells = [[c["source"], c["group"], pct_or_dash(c["serving_median_abs_error"]), step_case_text(c),
              pct_or_dash(c["step_median_abs_error"]), c.get("step_vs_schedule", "–"), c["responsible"]]
             for c in record.get("responsibility", [])]
    return [f"{head} Step cases (predicted, no scheduler)", "",
            f"{steps['figures']} of {steps['published']} step figures predicted over {steps['cases']} cases"
            + (f", median |error| {pct(steps['median_abs_error'])}." if steps["figures"] else "."), "",
            table(["engine/GPU or metric", "figures", "median / max |error|"], rows),
            f"{head} Each serving cell beside its nearest step case", "",
            "The rule (stats.verdict): a step case within 15% at the batch nearest the cell's concurrency beside a "
            "serving cell off by more than 30%: the schedule; a step case off by more than 15% and a serving miss no "
            "larger than the step's + 15 points: the step price; a larger serving miss: both; a serving cell within "
            "30%: neither; no predicted step case of the model, engine, GPU, layout and GPU count: unknown.", "",
            table(["serving cell", "engine/GPU/layout", "serving median |error|", "nearest step case (batch)",
                   "step median |error|", "step_vs_schedule", "why"], cells)]


def step_case_text(cell: dict) -> str:
    """The nearest step case and the batch its error is read at (records before the batch was kept: the case)."""
    name = cell["step_case"] or "–"
    return name if cell.get("step_batch") is None else f"{name} (batch {cell['step_batch']})"


def pct_or_dash(value: float | None) -> str:
    return "–" if value is None else pct(value)


def acceptance_table(rows: pd.DataFrame) -> str:
    """The range of the AL −10% and +10% changes, per kind of figure, over the figures that assume an AL."""
    ok = rows[(rows["status"] == "ok") & rows["al_minus_10_change"].notna()]
    kinds = (("TPOT", "tpot"), ("throughput", "^(?!speedup).*throughput"), ("speed-up", "^speedup"),
             ("TTFT", "ttft"))
    out = []
    for label, pattern in kinds:
        part = ok[ok["metric"].str.contains(pattern)]
        if part.empty:
            continue
        out.append([label, str(len(part)), span(part["al_minus_10_change"]), span(part["al_plus_10_change"])])
    return table(["figures", "count", "AL −10%", "AL +10%"], out)


def span(changes: pd.Series) -> str:
    low, high = 100 * changes.min(), 100 * changes.max()
    return f"{low:+.1f}% to {high:+.1f}%"


def guide_blocks() -> list[tuple[Path, str, str]]:
    """What `python -m docs.gen.results replication` also writes: the guide's figures, from the same record."""
    return [(REPO / "docs" / "guides" / "replication.md", "replication", standing(3))]


def goals_table(goals: list[dict]) -> str:
    rows = [[g["goal"], value_text(g["value"]), "met" if g["met"] else "**missed**"] for g in goals]
    return table(["goal", "value", ""], rows)


def value_text(value: object) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, float) else str(value)


FITS = ("predicted", "calibrated", "transferred", "transferred_layout")
FIT_HEADS = ("predicted", "calibrated (in sample)", "transferred (GPU out)", "transferred (layout out)")


def groups_table(record: dict) -> str:
    """Per engine, GPU and layout: median / max |error| predicted, calibrated in sample and transferred."""
    stats = record["statistics"]
    groups = list(stats["predicted"]["by_group"])
    rows = []
    for group in [*groups, None]:
        predicted = stats["predicted"] if group is None else stats["predicted"]["by_group"][group]
        cells = [group or "**all**", str(predicted["figures"])]
        for fit in FITS:
            s = stats.get(fit, {}) if group is None else stats.get(fit, {}).get("by_group", {}).get(group, {})
            cells.append(error_text(s))
        cells.append(signs_text(predicted))
        rows.append(cells)
    return table(["engine/GPU/layout", "figures", *FIT_HEADS, "speed-ups / signs right"], rows)


def fits_by_kind_table(record: dict) -> str:
    """Per kind of cell: median / max |error| predicted, calibrated in sample and transferred, side by side."""
    stats = record["statistics"]
    kinds = list(stats["predicted"].get("by_kind", {}))
    rows = [[kind, str(stats["predicted"]["by_kind"][kind]["figures"]),
             *[error_text(stats.get(fit, {}).get("by_kind", {}).get(kind, {})) for fit in FITS]] for kind in kinds]
    return table(["kind of cell", "figures", *FIT_HEADS], rows)


def params_table(record: dict) -> str:
    """Each fit's choice: in sample per engine version, layout and model, each leave-one-GPU-out and -layout-out fold."""
    rows = [[fit, fold, params_text(p)] for fit in FITS[1:] for fold, p in record.get("params", {}).get(fit, {}).items()]
    return table(["fit", "engine version layout (held out)", "host ms, scale, extend us a kernel"], rows)


def signs_text(s: dict) -> str:
    """'4 of 4' speed-ups right in sign, and a sign case's 'sign 0 of 1'; '–' where the group has neither."""
    parts = [] if s.get("speedup_sign_agrees", "0 of 0") == "0 of 0" else [s["speedup_sign_agrees"]]
    if s.get("sign_cases"):
        parts.append(f"sign {s['sign_reproduced']} of {s['sign_cases']}")
    return ", ".join(parts) or "–"


def error_text(s: dict) -> str:
    if s.get("median_abs_error") is None:
        return "–"
    return f"{100 * s['median_abs_error']:.1f}% / {100 * s['max_abs_error']:.1f}%"


def params_text(params: dict | None) -> str:
    if not params or params.get("host_ms") is None:
        return "nothing fitted"
    host, scale = params["host_ms"], params["verify_scale"]
    edges = [name for name, value, ends in (("host", host, HOST_GRID_MS[-1:]), ("scale", scale, (SCALE_GRID[0], SCALE_GRID[-1])))
             if value in ends]
    extend = params.get("extend_op_us")
    if extend is not None and extend == EXTEND_GRID_US[-1]:
        edges.append("extend")
    mark = f" ({' and '.join(edges)} at the grid's edge)" if edges else ""
    own = "the engine's own" if extend is None else f"{extend:g}"
    return f"{host:g}, {scale:g}, {own}{mark}"


KINDS = (  # (label, which rows): the cookbook's cells by their recipe's strategy (the `kind` column), the rest PR cases
    ("low-latency (TP, MTP 3-1-4 or DSpark)", lambda r: r["kind"] == "low-latency"),
    ("balanced (DP attention + DeepEP; MTP 1-1-2, or none)", lambda r: r["kind"] == "balanced"),
    ("high-throughput (DP attention or TP, no speculation)", lambda r: r["kind"] == "high-throughput"),
    ("the PR cases", lambda r: r["kind"] == "PR case"),
    ("balanced + high-throughput on Blackwell (FP4 experts)",
     lambda r: r["kind"].isin(["balanced", "high-throughput"]) & (r["gpu"] != "H200")),
    ("balanced + high-throughput on H200", lambda r: r["kind"].isin(["balanced", "high-throughput"]) & (r["gpu"] == "H200")),
)


def kinds_table(rows: pd.DataFrame) -> str:
    """Predicted |error| by kind of cell, and the signed medians of its TPOT and throughput figures."""
    ok = rows[(rows["status"] == "ok") & rows["metric"].isin(GOAL_METRICS)]
    out = []
    for label, pick in KINDS:
        part = ok[pick(ok)]
        errors = part["predicted_error"]
        tpot = errors[part["metric"].str.contains("tpot")]
        throughput = errors[part["metric"].str.contains("throughput") & ~part["metric"].str.startswith("speedup")]
        out.append([label, str(len(part)), f"{pct(errors.abs().median())} / {pct(errors.abs().max())}",
                    signed(tpot), signed(throughput)])
    return table(["cells", "figures", "median / max |error|", "TPOT, signed median",
                  "throughput, signed median"], out)


def signed(errors: pd.Series) -> str:
    return f"{100 * errors.median():+.0f}%" if errors.size else "–"


def ttft_text(rows: pd.DataFrame) -> str:
    rows = rows[rows["level"] != "step"] if "level" in rows else rows  # a step case's TTFT is in its own statistic
    ttft = rows[(rows["status"] == "ok") & rows["metric"].str.contains("ttft")]["predicted_error"]
    return f"{ttft.size} TTFT figures, median |error| {pct(ttft.abs().median())}"


def demote(markdown: str) -> str:
    """A report's headings one level down, so it sits under this page's section."""
    return re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", markdown, flags=re.M)


def fidelity_page(args: argparse.Namespace) -> str:
    record = json.loads((FIDELITY / "fidelity.json").read_text())
    runs = json.loads((FIDELITY / "fidelity-runs.json").read_text())
    return "\n".join([
        "Made by `specplan fidelity scenarios/fidelity.yaml --out results/fidelity --runs "
        f"{runs['runs']}` (committed in `validation/results/`: fidelity.json is the median run, "
        "fidelity-runs.json the spread); this page is read from that record. What the check is: "
        "[Replication and fidelity](../guides/replication.md#sim-to-real-fidelity). The result is "
        "**calibrated, not predicted**: step times are measured on the same machine around each run and host "
        "time is fitted on the same engine.", "",
        f"**Median |error| {pct(runs['median_abs_error'])} ({pct(runs['median_abs_error_range'][0])}–"
        f"{pct(runs['median_abs_error_range'][1])} over {runs['runs']} runs), maximum "
        f"{pct(runs['max_abs_error'])} ({pct(runs['max_abs_error_range'][0])}–{pct(runs['max_abs_error_range'][1])})"
        f"**, over {record['errors_counted']} figures of the median run (throughput and tokens/s/user p50).", "",
        table(["", ""], [["device", record["device"]], ["model", record["model"]], ["torch", record["torch"]],
                         ["run", f"{record['date']}, {record['wall_s'] / 60:.0f} min, load average "
                          + ", ".join(f"{x:.1f}" for x in record["load_average"])],
                         ["machine drift over a point", f"{min(record['profile_drift']['per_point']):.2f}–"
                          f"{max(record['profile_drift']['per_point']):.2f}"]]),
        "## Every point of the median run", "", points_table(record["points"]),
        figure(FIDELITY / "fidelity.png", "fidelity.png")])


def points_table(points: list[dict]) -> str:
    rows = [[p["policy"], f"{p['load']:g}", f"{p['measured_throughput']:.1f}", f"{p['predicted_throughput']:.1f}",
             f"{100 * p['throughput_error']:+.1f}%", f"{p['measured_tps_p50']:.1f}", f"{p['predicted_tps_p50']:.1f}",
             f"{100 * p['tps_p50_error']:+.1f}%", f"{p['measured_mean_step_ms']:.1f}",
             f"{p['predicted_mean_step_ms']:.1f}"] for p in points]
    return table(["policy", "users", "throughput measured", "predicted", "error", "tok/s/user p50 measured",
                  "predicted", "error", "step ms measured", "predicted"], rows)


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


STUDIES = {
    "replication": Study("Replication: predictions against published serving figures", "1 s (the suite: ~15 min)",
                         replication_page, reads_record=True, blocks=guide_blocks),
    "fidelity": Study("Fidelity: the simulator against a real torch engine", "1 s (the check: ~30 min)",
                      fidelity_page, reads_record=True),
}
