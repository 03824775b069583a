"""Results pages read from committed records of slow studies: the replication suite and the fidelity check.

`specplan replicate benchmarks/published --calibrate` (about a quarter of
an hour) writes benchmarks/published/results/; `specplan fidelity
scenarios/fidelity.yaml --runs 3` (about half an hour, on a quiet machine)
writes validation/results/. These pages are regenerated from those records
in a second, so the test regenerates them and compares.
"""

from __future__ import annotations

import argparse
import json
import re

from docs.gen.results import REPO, Study, figure, table

REPLICATION = REPO / "benchmarks" / "published" / "results"
FIDELITY = REPO / "validation" / "results"


def replication_page(args: argparse.Namespace) -> str:
    record = json.loads((REPLICATION / "replication.json").read_text())
    report = (REPLICATION / "replication.md").read_text()
    counts = next(line for line in report.splitlines() if re.match(r"\d+ of \d+ figures predicted", line))
    return "\n".join([
        "Made by `specplan replicate benchmarks/published --calibrate --workers 2` (committed in "
        "`benchmarks/published/results/`: replication.csv, .md, .json, .png); this page is read from that "
        "record. What the suite is and how it runs: [Replication and fidelity](../guides/replication.md). "
        "Every DeepSeek-V4-Pro end-to-end serving figure is held out of it.", "",
        f"**{counts}.** Statistics are over the throughput, TPOT and speed-up figures (TTFT figures are "
        "predicted and tabled, in no statistic).", "",
        "## Goals", "", goals_table(record["goals"]),
        "## Median / max |error| per engine and GPU", "", groups_table(record),
        figure(REPLICATION / "replication.png", "replication.png"),
        "## Every figure, and the suite's own report", "",
        "As `specplan replicate` wrote it (replication.md):", "", demote(report)])


def goals_table(goals: list[dict]) -> str:
    rows = [[g["goal"], value_text(g["value"]), "met" if g["met"] else "**missed**"] for g in goals]
    return table(["goal", "value", ""], rows)


def value_text(value: object) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, float) else str(value)


def groups_table(record: dict) -> str:
    stats = record["statistics"]
    groups = list(stats["predicted"]["by_group"])
    rows = []
    for group in [*groups, None]:
        cells = [group or "**all**"]
        for fit in ("predicted", "calibrated", "split"):
            s = stats.get(fit, {}) if group is None else stats.get(fit, {}).get("by_group", {}).get(group, {})
            cells.append(error_text(s))
        cells.append(params_text(record.get("params", {}).get("calibrated", {}).get(group)) if group else "")
        cells.insert(1, str((stats["predicted"] if group is None else stats["predicted"]["by_group"][group])
                            ["figures"]))
        rows.append(cells)
    return table(["engine/GPU", "figures", "predicted", "calibrated", "split", "fitted (host ms, scale)"], rows)


def error_text(s: dict) -> str:
    if s.get("median_abs_error") is None:
        return "–"
    return f"{100 * s['median_abs_error']:.1f}% / {100 * s['max_abs_error']:.1f}%"


def params_text(params: dict | None) -> str:
    if not params or params.get("host_ms") is None:
        return "nothing fitted"
    return f"{params['host_ms']:g}, {params['verify_scale']:g}"


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
                         replication_page, reads_record=True),
    "fidelity": Study("Fidelity: the simulator against a real torch engine", "1 s (the check: ~30 min)",
                      fidelity_page, reads_record=True),
}
