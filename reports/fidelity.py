"""The fidelity result as a report section (specplan.reports.document blocks, or HTML on its own).

    fidelity_blocks(results_dir) -> list[Block]   ([] when no fidelity.json is there)
    fidelity_section(results_dir) -> str          (the same blocks as an HTML fragment)

`results_dir` holds what `specplan fidelity --out DIR` wrote (fidelity.json,
fidelity.png, fidelity.svg); a sweep report shows the section only when the
user names such a folder (`specplan sweep ... --fidelity DIR`). The section says what was compared, the error summary against the
goal, one row per point, the scatter, and what the simulator's model of
the engine leaves out.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from specplan.reports.document import (
    Block,
    Bullets,
    Callout,
    Heading,
    Image,
    Paragraph,
    Table,
    html_block,
)

GOAL_MEDIAN, GOAL_MAX = 0.05, 0.10
LEFT_OUT = (
    "The forward is priced from (tokens, KV context) as the harness measured it: 3 new tokens per "
    "request, every request the same context. The engine pads each phase's attention (verify "
    "blocks; prompt chunks) to that phase's longest query and KV, which the price counts per phase "
    "for the KV (engine.attention: padded) but not for the query: a step whose blocks are 1 or 5 "
    "tokens long costs a few percent more or less than priced.",
    "Forwards inside the serving loop run slower than the harness's back-to-back timing (caches the "
    "host work and the other model evict): measured −7% to +7% per point over two runs (step_time_checks: "
    "verify_ratio, draft_ratio), not priced.",
    "Host time per step is a per-policy a + b·requests from one calibration run; its step-to-step "
    "variation, and the KV copy the engine makes when a request finishes (it keeps its cache slots "
    "compact; a paged engine would not copy), are in that mean only.",
    "The machine's speed during a run is the mean of the profiles just before and after it; faster "
    "fluctuations of a shared machine (other tenants) are not modelled.",
)


def load_fidelity(results_dir: Path) -> dict[str, Any] | None:
    path = Path(results_dir) / "fidelity.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def pct(value: Any) -> str:
    return "n/a" if value is None or not math.isfinite(float(value)) else f"{float(value):+.1%}"


def points_table(points: list[dict[str, Any]]) -> Table:
    header = ("policy", "load", "throughput measured", "predicted", "error",
              "p50 tok/s/user measured", "predicted", "error")
    rows = tuple((str(p["policy"]), f"{p['load']:g}" if p["load"] is not None else "-",
                  f"{p['measured_throughput']:.1f}", f"{p['predicted_throughput']:.1f}", pct(p.get("throughput_error")),
                  f"{p['measured_tps_p50']:.1f}" if p["measured_tps_p50"] is not None else "n/a",
                  f"{p['predicted_tps_p50']:.1f}" if p["predicted_tps_p50"] is not None else "n/a",
                  pct(p.get("tps_p50_error"))) for p in points)
    return Table(header, rows)


def ratio_text(value: Any) -> str:
    return "n/a" if value is None or not math.isfinite(float(value)) else f"{float(value):.3f}"


def step_time_table(checks: list[dict[str, Any]]) -> Table:
    """Per point: the engine's measured step parts over the simulator's prices of them."""
    header = ("policy", "load", "steps", "verify (decode only)", "verify (with a prompt chunk)", "draft",
              "step", "mean step ms measured", "machine drift")
    rows = tuple((str(c["policy"]), f"{c['load']:g}" if c.get("load") is not None else "-", str(c["steps"]),
                  ratio_text(c.get("verify_ratio_decode_only")), ratio_text(c.get("verify_ratio_with_prefill")),
                  ratio_text(c.get("draft_ratio")), ratio_text(c.get("step_ratio")),
                  f"{c['mean_measured_ms']['step']:.1f}", ratio_text(c.get("drift_ratio")))
                 for c in checks if c.get("steps"))
    return Table(header, rows)


def summary_items(doc: dict[str, Any]) -> tuple[str, ...]:
    med, worst = doc["median_abs_error"], doc["max_abs_error"]
    met = med <= GOAL_MEDIAN and worst <= GOAL_MAX
    drift = doc.get("profile_drift", {})
    return (
        f"Median |error| {med:.1%}, max {worst:.1%} over {doc.get('errors_counted', '?')} "
        f"(point, metric) pairs; goal ≤ {GOAL_MEDIAN:.0%} and ≤ {GOAL_MAX:.0%}: {'met' if met else 'not met'}.",
        f"Device: {doc.get('device', '?')}; model: {doc.get('model', '?')}; torch {doc.get('torch', '?')}.",
        (f"Machine drift over each run (profile after / before): median {drift['ratio']:.3f}, "
         f"worst {drift['worst']:.3f}; predictions use the mean of the two." if drift
         else "Machine drift not measured (one profile for every point, --profile-once)."),
        f"Scenario: {doc.get('scenario', '?')}; measured on {doc.get('date', '?')} in {doc.get('wall_s', 0):.0f} s.",
    )


def fidelity_blocks(results_dir: Path) -> list[Block]:
    doc = load_fidelity(results_dir)
    if doc is None:
        return []
    blocks: list[Block] = [
        Heading("Sim-to-real fidelity"),
        Paragraph("specplan's predictions against a small real speculative serving engine in torch "
                  "(validation/): same workload, seeds, acceptance models and policy code; every duration "
                  "measured on the machine. Error = (predicted − measured) / measured."),
        Bullets(summary_items(doc)),
        points_table(doc["points"]),
    ]
    png = Path(results_dir) / "fidelity.png"
    if png.is_file():
        blocks.append(Image("Predicted vs measured", "One marker per policy and load; the line is y = x, "
                            "the band ±10%.", png, png.with_suffix(".svg")))
    checks = doc.get("step_time_checks") or []
    if any(c.get("steps") for c in checks):
        blocks += [Heading("Where the step time goes", level=3),
                   Paragraph("Measured ÷ priced over each run's steps (specplan.validation.diagnose): the target's "
                             "verify forward split by whether a prompt chunk shared it, the drafter's forward, "
                             "and the whole step with host time; machine drift is the profile after the run ÷ "
                             "the one before. A ratio far from 1 names the term the model gets wrong."),
                   step_time_table(checks)]
    blocks.append(Callout("What the simulator's model of the engine leaves out", LEFT_OUT))
    return blocks


def fidelity_section(results_dir: Path) -> str:
    """The fidelity section as an HTML fragment ('' when there is no result)."""
    return "\n".join(html_block(b) for b in fidelity_blocks(results_dir))
