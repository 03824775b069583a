"""A capacity plan → its files: plan.json, probes.csv (one row per probe run) and plan.md.

`specplan plan --out DIR` writes these beside `DIR/probes/<key>.json` (each
probe run's summary, keep-up verdict and resolved scenario, stored by the
planner as it runs). plan.json is the JSON contract (specplan.simulator.study.plan_json);
plan.md is the terminal table plus, per variant, every cluster size simulated
with its statistic's interval and keep-up verdict. A deployment search's files:
specplan.cli.search_files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from specplan.cli.plan_tables import plan_table
from specplan.simulator.core.jsonsafe import dumps
from specplan.simulator.scenario.study import tps_column
from specplan.simulator.study.plan_json import capacity_json
from specplan.simulator.study.planner import CapacityPlan

PROBE_COLUMNS = ["label", "replicas", "replicas_simulated", "gpus", "seed", "tps_user",
                 "throughput_tokens_per_s_per_gpu", "ttft_p99_s", "requests_completed", "keep_up_verdict",
                 "keep_up_growth", "meets_sla", "chosen", "key"]


def probe_rows(plan: CapacityPlan) -> pd.DataFrame:
    """One row per (variant, cluster size, seed) run, in search order of sizes."""
    column = tps_column(plan.target.statistic)
    rows: list[dict[str, Any]] = []
    for variant in plan.variants:
        for probe in variant.probes:
            for run in probe.runs:
                rows.append({"label": variant.label, "replicas": probe.replicas,
                             "replicas_simulated": probe.simulated, "gpus": probe.gpus,
                             "seed": run.get("seed"), "tps_user": run.get(column),
                             "throughput_tokens_per_s_per_gpu": run.get("throughput_tokens_per_s_per_gpu"),
                             "ttft_p99_s": run.get("ttft_p99_s"), "requests_completed": run.get("requests_completed"),
                             "keep_up_verdict": run.get("keep_up_verdict"), "keep_up_growth": run.get("keep_up_growth"),
                             "meets_sla": probe.meets_sla, "chosen": probe.replicas == variant.replicas,
                             "key": run.get("key")})
    return pd.DataFrame(rows, columns=PROBE_COLUMNS)


def probe_lines(plan: CapacityPlan) -> list[str]:
    """Markdown bullets: every size simulated per variant, its interval and verdict."""
    lines = []
    for variant in plan.variants:
        lines.append(f"- **{variant.label}**")
        for probe in variant.probes:
            low, high = probe.interval()
            verdict = {"keeps up": "keeps up", "falls behind": "falls behind (its backlog grows)"}.get(
                probe.keep_up, "keep-up undecided at this horizon (the SLA statistic fails anyway)")
            mark = " ← answer" if probe.replicas == variant.replicas else ""
            simulated = f" ({probe.simulated} simulated)" if probe.simulated < probe.replicas else ""
            lines.append(f"  - {probe.replicas} replica(s){simulated}, {probe.gpus} GPU(s): tokens/s/user "
                         f"{plan.target.statistic} {probe.tps_user:.1f} (95% interval {low:.1f}–{high:.1f}), "
                         f"{verdict}; {'meets' if probe.meets_sla else 'misses'} the SLA{mark}")
    return lines


def write_plan_files(plan: CapacityPlan, out: Path) -> dict[str, Path]:
    """plan.json, probes.csv and plan.md in `out`; returns them by name."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"plan.json": out / "plan.json", "probes.csv": out / "probes.csv", "plan.md": out / "plan.md"}
    files["plan.json"].write_text(dumps(capacity_json(plan)))
    probe_rows(plan).to_csv(files["probes.csv"], index=False, float_format="%.9g")
    text = ["# specplan capacity plan", "", "```", plan_table(plan), "```", "",
            "## Every probe", "", *probe_lines(plan), "",
            "Each probe is the whole cluster simulated once per seed; the interval is Student-t 95% over "
            "seeds. A cluster keeps up when its backlog of outstanding requests does not grow over the second "
            "half of the measurement window. Files: probes.csv (one row per run), probes/<key>.json (each run's "
            "summary, verdict and resolved scenario; reused by a re-run), plan.json.", ""]
    files["plan.md"].write_text("\n".join(text))
    return files
