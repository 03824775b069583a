"""A capacity plan → its files: plan.json, probes.csv (one row per probe run), plan.md and launch-<engine>.sh.

`specplan plan --out DIR` writes these beside `DIR/probes/<key>.json` (each
probe run's summary, keep-up verdict and resolved scenario, stored by the
planner as it runs). plan.json is the JSON contract (specplan.simulator.study.plan.plan_json);
plan.md is the terminal table plus, per variant, every cluster size simulated
with each statistic the SLA names (± its interval) and its keep-up verdict (on agent sessions, its
job-level figures too; probes.csv then adds `SESSION_COLUMNS`). probes.csv ends with a column per
statistic the SLA names (tpot_p50_ms, ttft_p90_s, ...) that its fixed columns do not hold. A deployment search's files:
specplan.cli.search_files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from specplan.simulator.core.jsonsafe import dumps
from specplan.simulator.scenario.study import tps_column
from specplan.simulator.study.launch import launch_files
from specplan.simulator.study.plan.plan_json import (
    SESSION_COLUMNS,
    capacity_json,
    deployment_rows,
    pool_fields,
    probe_pool,
    search_json,
    session_record,
)
from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.probe import Probe
from specplan.simulator.study.plan.search import DeploymentPlan
from specplan.simulator.study.plan.tables import (
    gpus_text,
    plan_table,
    search_table,
    sessions_text,
    stat_text,
)
from specplan.simulator.study.plan.target import Target

PROBE_COLUMNS = ["label", "replicas", "replicas_simulated", "gpus", "gpus_decode", "gpus_prefill", "prefill_pool",
                 "prefill_busy_share", "prefix_cache_hit_rate", "seed", "tps_user",
                 "throughput_tokens_per_s_per_gpu", "ttft_p99_s", "requests_completed", "requests_rejected",
                 "keep_up_verdict", "keep_up_growth", "keep_up_served_share", "keep_up_served_share_ci95",
                 "meets_sla", "chosen", "key"]


def probe_rows(plan: CapacityPlan) -> pd.DataFrame:
    """One row per (variant, cluster size, seed) run, in search order of sizes."""
    column = tps_column(plan.target.statistic)
    sla_keys = [k for k in dict.fromkeys(b.key for b in plan.target.bounds) if k not in PROBE_COLUMNS + list(
        SESSION_COLUMNS)]  # each statistic the SLA names, as its own column
    rows: list[dict[str, Any]] = []
    for variant in plan.variants:
        for probe in variant.probes:
            for run in probe.runs:
                rows.append({"label": variant.label, "replicas": probe.replicas,
                             "replicas_simulated": probe.simulated, "gpus": probe.gpus,
                             **pool_fields(run.get, probe.gpus, variant.prefill_pool),
                             "seed": run.get("seed"), "tps_user": run.get(column),
                             "throughput_tokens_per_s_per_gpu": run.get("throughput_tokens_per_s_per_gpu"),
                             "ttft_p99_s": run.get("ttft_p99_s"), "requests_completed": run.get("requests_completed"),
                             "requests_rejected": run.get("requests_rejected"),
                             "keep_up_verdict": run.get("keep_up_verdict"), "keep_up_growth": run.get("keep_up_growth"),
                             "keep_up_served_share": run.get("keep_up_served_share"),
                             "keep_up_served_share_ci95": run.get("keep_up_served_share_ci95"),
                             "meets_sla": probe.meets_sla, "chosen": probe.replicas == variant.replicas,
                             "key": run.get("key"), **{k: run.get(k) for k in SESSION_COLUMNS},
                             **{k: run.get(k) for k in sla_keys}})
    sessions = any(row["session_lanes"] is not None for row in rows)
    return pd.DataFrame(rows, columns=PROBE_COLUMNS + (list(SESSION_COLUMNS) if sessions else []) + sla_keys)


def probe_lines(plan: CapacityPlan) -> list[str]:
    """Markdown bullets: every size simulated per variant, its interval and verdict."""
    lines = []
    for variant in plan.variants:
        lines.append(f"- **{variant.label}**")
        for probe in variant.probes:
            verdict = {"keeps up": "keeps up", "falls behind": f"falls behind ({probe.keep_up_reason})"}.get(
                probe.keep_up, f"keep-up undecided at this horizon (the SLA statistic fails anyway; "
                               f"{probe.keep_up_reason})")
            mark = " ← answer" if probe.replicas == variant.replicas else ""
            simulated = f" ({probe.simulated} simulated)" if probe.simulated < probe.replicas else ""
            record = session_record(probe)
            sessions = "; " + sessions_text(record, None) if record is not None else ""
            lines.append(f"  - {probe.replicas} replica(s){simulated}: {sla_text(probe, plan.target)}, {verdict}; "
                         f"{'meets' if probe.meets_sla else 'misses'} the SLA{mark}; "
                         f"{gpus_text(probe_pool(probe, variant.prefill_pool))}{sessions}")
        if variant.unmet:
            lines.append(f"  - not met: {variant.unmet}")
    return lines


def sla_text(probe: Probe, target: Target) -> str:
    """'tpot_p50_ms 18.4 ± 0.6, ttft_p90_s 1.79 ± 0.21': each statistic the SLA names, its mean over seeds ± its
    95% half-width ('(one seed: no interval)' after them for one seed)."""
    shown = ", ".join(f"{key} {stat_text(probe, key)}" for key in dict.fromkeys(b.key for b in target.bounds))
    return shown + (" (one seed: no interval)" if target.seeds < 2 else "")


def notes_lines(notes: tuple[str, ...]) -> list[str]:
    """plan.md's Notes section: what loading took from the profiles and what a search's options did not
    inherit, each once (none: no section)."""
    return ["## Notes", "", *(f"- {note}" for note in notes), ""] if notes else []


def write_plan_files(plan: CapacityPlan, out: Path) -> dict[str, Path]:
    """plan.json, probes.csv, plan.md and the winner's launch files (the variant meeting the SLA on the fewest
    GPUs, as the engine the plan priced launches it: specplan.simulator.study.launch) in `out`; returns them by
    name."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"plan.json": out / "plan.json", "probes.csv": out / "probes.csv", "plan.md": out / "plan.md"}
    files["plan.json"].write_text(dumps(capacity_json(plan)))
    probe_rows(plan).to_csv(files["probes.csv"], index=False, float_format="%.9g")
    launch = launch_files(plan.launch) if plan.launch is not None else {}
    for name, script in launch.items():
        files[name] = out / name
        files[name].write_text(script)
    text = ["# specplan capacity plan", "", "```", plan_table(plan), "```", "", *notes_lines(plan.notes),
            *(line for name, script in launch.items()
              for line in (f"## {name} ({plan.launch_label}: the fewest GPUs)", "", "```", script.rstrip(), "```", "")),
            "## Every probe", "", *probe_lines(plan), "",
            "Each probe is the whole cluster simulated once per seed; the interval is Student-t 95% over "
            "seeds. A cluster keeps up when its backlog of outstanding requests does not grow over the second "
            "half of the measurement window and, where requests waited for its engines, the output tokens/s "
            "they served then reach what the arrivals offer (arrival rate × mean output); a closed loop and agent "
            "session lanes, which wait for their answers, are judged by the backlog alone (on lanes the window "
            "opens at their warm-up barrier). Files: probes.csv (one row per run), probes/<key>.json (each run's "
            "summary, verdict and resolved scenario; reused by a re-run), plan.json.", ""]
    files["plan.md"].write_text("\n".join(text))
    return files


def write_search_files(plan: DeploymentPlan, out: Path) -> dict[str, Path]:
    """A search's files (the module docstring) but its figure; returns them by name."""
    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / name for name in ("plan.csv", "plan.json", "plan.md")}
    deployment_rows(plan).to_csv(files["plan.csv"], index=False, float_format="%.9g")
    files["plan.json"].write_text(dumps(search_json(plan)))
    launch = plan.launch()
    texts = launch_files(launch) if launch is not None else {}
    for name, text in texts.items():
        files[name] = out / name
        files[name].write_text(text)
    md = ["# specplan deployment search", "", "```", search_table(plan), "```", "", "![cost against the SLA](plan.png)",
          "", *notes_lines(plan.notes)]
    for name, text in texts.items():
        md += [f"## {name}", "", "```", text.rstrip(), "```", ""]
    md += ["Every deployment's fewest GPUs is confirmed by its own simulation and one fewer by a failed one; "
           "plan.csv lists every deployment, met or not; probes/<key>.json holds every run (reused by a re-run).", ""]
    files["plan.md"].write_text("\n".join(md))
    return files
