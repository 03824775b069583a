"""Tuned schedule → DIR/report.html and DIR/report.md (specplan.reports.document), with its own figures.

What the reader gets, in order: the objective and the schedule (every
bucket, every candidate length's figure there, the pick), the three
exports, the verification against the best static length, MTP-1 and
dspark-async (what a confidence head is worth over the best schedule an
engine can run without one), every label's figure, the figures (those
four frontiers; each length's throughput against the decoding batch with
the buckets), and then the verification sweep as the sweep report tells it
(`specplan.reports.report`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from matplotlib.figure import Figure

from specplan.policies.dspark import DSparkAsync
from specplan.reports.document import (
    Block,
    Bullets,
    Callout,
    Heading,
    Image,
    Paragraph,
    Table,
    to_html,
    to_markdown,
)
from specplan.reports.figures import DPI, acceptance_figure, colours, frontier_axes, profile_figure
from specplan.reports.manual import TUNE_PAGES, manual_links
from specplan.reports.report import report_blocks
from specplan.simulator.study.export import policy_block, trtllm_block
from specplan.simulator.study.tune import (
    KEY_ROLES,
    TUNED,
    TUNED_ROLE,
    TunedSchedule,
    key_rows,
    static_label,
)


def write_tune_report(tuned: TunedSchedule, out: Path) -> Path:
    """Render the figures into out/figures, write out/report.html and out/report.md; returns the HTML path."""
    figures_dir = out / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    blocks = [*schedule_blocks(tuned), *verification_blocks(tuned), Heading("Figures")]
    blocks += [saved(fig, name, title, caption, figures_dir) for name, title, caption, fig in figures(tuned)]
    blocks += [Heading("The verification sweep"), *report_blocks(tuned.verification), *files_blocks(),
               *manual_links(TUNE_PAGES)]
    title = f"specplan tune report: {tuned.base.name}"
    html_path = out / "report.html"
    html_path.write_text(to_html(title, blocks))
    (out / "report.md").write_text(to_markdown(title, blocks, out))
    return html_path


def saved(fig: Figure, name: str, title: str, caption: str, figures_dir: Path) -> Image:
    png, svg = figures_dir / f"{name}.png", figures_dir / f"{name}.svg"
    fig.savefig(png, dpi=DPI)
    fig.savefig(svg, metadata={"Date": None})
    return Image(title, caption, png, svg)


# ---- the schedule -------------------------------------------------------------------------------
def schedule_blocks(tuned: TunedSchedule) -> list[Block]:
    objective = tuned.objective
    measure = "throughput per GPU (tok/s)" if objective.sla_tps is not None else \
        f"tokens/s/user ({objective.statistic})"
    interval = ("Student-t over the seeds' paired differences (every length ran the same requests under a seed)"
                if tuned.interval == "seeds" else
                "over one seed's requests (its tokens/s/user spread over √requests; add seeds for one over seeds)")
    blocks: list[Block] = [
        Heading("Tuned schedule"),
        *([Callout("Warning", (tuned.warning,))] if tuned.warning else []),
        Paragraph(f"Drafter: {tuned.base.drafter.family}, γ = {tuned.block_size}. Objective: "
                  f"{objective.describe()}. Each static length was simulated over the load axis; a bucket reads "
                  "every length at its representative decoding batch (geometric middle of the bucket), "
                  "interpolated between operating points. Cells give the "
                  f"{measure} there ± its 95% half-width; ★ marks the pick, ≈ a length tied with the best (their "
                  f"difference within its 95% interval, {interval}): a tie goes to the schedule's shape, the "
                  "longest length first, then the previous bucket's; ✗ a length that misses the SLA there, ~ a "
                  "batch outside the simulated operating points (nearest point used)."),
        bucket_table(tuned),
        *cap_blocks(tuned),
        Heading("Exports"),
        Bullets(export_items(tuned)),
    ]
    return blocks


def cap_blocks(tuned: TunedSchedule) -> list[Block]:
    """The buckets the first bucket's length capped (TensorRT-LLM's rule), said once."""
    capped = [f"batch {c.sizes}: capped at {c.length} (uncapped: {c.capped_from})" for c in tuned.buckets
              if c.capped_from is not None]
    if not capped:
        return []
    return [Paragraph("Capped buckets: TensorRT-LLM requires the first bucket's length to be the schedule's largest "
                      f"(max_draft_len = {tuned.buckets[0].length}), so these buckets run shorter than their own "
                      "best:"), Bullets(tuple(capped))]


def bucket_table(tuned: TunedSchedule) -> Table:
    column = "throughput_per_gpu" if tuned.objective.sla_tps is not None else "tps_user"
    header = ("batch sizes", "read at batch", "length", *(f"ℓ = {n}" for n in tuned.lengths))
    rows = []
    half = "throughput_ci95" if column == "throughput_per_gpu" else "tps_user_ci95"
    for choice in tuned.buckets:
        cells = []
        for n in tuned.lengths:
            f = choice.figures[n]
            value, width = getattr(f, column), getattr(f, half)
            mark = ("★ " if n == choice.length else "≈ " if n in choice.tied else "") + \
                ("" if f.meets(tuned.objective) else "✗ ") + ("" if f.measured else "~")
            shown = f"{value:,.0f}" + (f" ± {width:,.0f}" if math.isfinite(width) else "")
            cells.append(mark + (shown if math.isfinite(value) else "n/a"))
        length = str(choice.length) + (f" (capped; {choice.capped_from} uncapped)" if choice.capped_from is not None else "")
        rows.append((choice.sizes, f"{choice.batch:.1f}", length, *cells))
    return Table(header, tuple(rows))


def flow(mapping: dict[str, Any]) -> str:
    return yaml.safe_dump(mapping, default_flow_style=True, sort_keys=False, width=10**6).strip()


def export_items(tuned: TunedSchedule) -> tuple[str, ...]:
    return (
        f"schedule.yaml (specplan policy block; merge it into a scenario): {flow(policy_block(tuned))}",
        f"trtllm.yaml (TensorRT-LLM speculative_config; keep your decoding_type and speculative_model): "
        f"{flow(trtllm_block(tuned))}. Keys are batch-size upper bounds; above the last key the draft length "
        "is 0 (speculation off); max_draft_len is the first key's length, as TensorRT-LLM requires.",
        "schedule.json: the draft length for every batch size 1.."
        f"{tuned.base.engine.max_batch_requests} (no bound convention to get wrong).",
        "tune.json: every bucket's candidates and the verification below, as data.",
    )


# ---- verification -------------------------------------------------------------------------------
def verification_blocks(tuned: TunedSchedule) -> list[Block]:
    rows = key_rows(tuned.comparison)
    if rows.empty:
        return [Heading("Verification"), Paragraph("The tuned schedule has no operating point to compare at.")]
    at_sla = rows["measure"].iloc[0].endswith("sla")
    what = ("throughput per GPU at each SLA (read off each label's frontier)" if at_sla else
            "tokens/s/user at each throughput the tuned schedule reached (matched throughput)")
    blocks: list[Block] = [
        Heading("Verification"),
        Paragraph(f"The schedule ran as a length-schedule policy over the scenario's load axis beside every static "
                  f"length and the scenario's variants; the table gives {what}, and the tuned schedule's gain over "
                  f"each. {seeds_note(tuned)}"),
        key_table(rows, at_sla),
        Heading("What a confidence head is worth", level=3),
        Bullets(head_worth_items(rows, at_sla)),
        Heading("Every label", level=3),
        every_label_table(tuned, at_sla),
    ]
    return blocks


def seeds_note(tuned: TunedSchedule) -> str:
    seeds = len({p.seed for p in tuned.verification.design.points})
    if seeds > 1:
        return f"Each operating point is the mean of {seeds} seeds (points.csv has every seed)."
    return ("Each operating point is one seed: differences of a few percent are within run-to-run noise; add "
            "seeds (sweep.seeds) before deciding on them.")


def head_worth_items(rows: Any, at_sla: bool) -> tuple[str, ...]:
    """dspark-async's lead over the tuned schedule at each level: what per-step confidence scheduling adds."""
    items = []
    for level, group in rows.groupby("level", sort=False):
        tuned = group[group["role"] == TUNED_ROLE]["value"].iloc[0]
        for r in group[group["role"] == DSparkAsync.name].itertuples():
            lead = r.value / tuned - 1 if math.isfinite(r.value) and math.isfinite(tuned) and tuned else math.nan
            where = f"at tokens/s/user ≥ {fmt(level)}" if at_sla else f"at {fmt(level)} tok/s/GPU"
            items.append(f"{where}: {r.label} {fmt(r.value)} against the tuned schedule's {fmt(tuned)}: {pct(lead)}")
    return tuple(items) or ("The scenario has no dspark-async variant to compare with.",)


def fmt(value: float, template: str = "{:,.0f}") -> str:
    return template.format(value) if value is not None and math.isfinite(value) else "unreachable"


def pct(value: float) -> str:
    return f"{100 * value:+.1f}%" if value is not None and math.isfinite(value) else "—"


def key_table(rows: Any, at_sla: bool) -> Table:
    header = ("SLA tok/s/user ≥" if at_sla else "throughput/GPU", "label", "role",
              "throughput/GPU" if at_sla else "tok/s/user", "tuned's gain over it")
    body = tuple((fmt(r.level), str(r.label), str(r.role) + (" (best static)" if r.best_static else ""),
                  fmt(r.value) + (f" (at {r.edge})" if isinstance(r.edge, str) and r.edge else ""),
                  "—" if r.role == TUNED_ROLE else pct(r.tuned_gain)) for r in rows.itertuples())
    return Table(header, body)


def every_label_table(tuned: TunedSchedule, at_sla: bool) -> Table:
    comp = tuned.comparison
    levels = list(dict.fromkeys(comp["level"].tolist()))
    header = ("label", "role", *(("≥ " if at_sla else "at ") + fmt(level) for level in levels))
    rows = []
    for label, group in comp.groupby("label", sort=False):
        by_level = dict(zip(group["level"], zip(group["value"], group["tuned_gain"], strict=True), strict=True))
        cells = [f"{fmt(by_level[lv][0])} ({pct(by_level[lv][1])})" if label != TUNED else fmt(by_level[lv][0])
                 for lv in levels]
        rows.append((str(label), str(group["role"].iloc[0]), *cells))
    return Table(header, tuple(rows))


# ---- figures ------------------------------------------------------------------------------------
def featured_labels(tuned: TunedSchedule) -> list[str]:
    """The tuned schedule, the best static length at each SLA level, the scenario's MTP-1 and dspark-async."""
    rows = key_rows(tuned.comparison)
    order = {TUNED_ROLE: 0, **{role: 2 + i for i, role in enumerate(KEY_ROLES)}}
    ranked = rows.assign(_rank=rows["role"].map(lambda role: order.get(role, 1)))
    ordered = ranked.sort_values("_rank", kind="stable")["label"]
    return list(dict.fromkeys([TUNED, *ordered]))


def frontier_figure(tuned: TunedSchedule) -> Figure:
    """Throughput per GPU vs tokens/s/user for the featured labels, SLA lines dotted."""
    result = tuned.verification
    labels = featured_labels(tuned)
    colour = colours(labels)
    fig = Figure(figsize=(8.5, 5.5), dpi=DPI)
    ax = fig.add_subplot()
    for label in labels:
        ops = result.operating[result.operating["label"] == label]
        curve = result.frontier[result.frontier["label"] == label]
        ax.scatter(ops["tps_user"], ops["throughput_per_gpu"], s=18, alpha=0.45, color=colour[label])
        ax.plot(curve["tps_user"], curve["throughput_per_gpu"], "-", lw=3 if label == TUNED else 1.8,
                color=colour[label], label=label)
    frontier_axes(ax, result, "Tuned schedule vs best static length, MTP-1 and dspark-async")
    fig.tight_layout()
    return fig


def bucket_figure(tuned: TunedSchedule) -> Figure:
    """Each static length's throughput per GPU (top) and tokens/s/user (bottom) vs decoding batch, buckets marked."""
    points = tuned.search.points
    column = tuned.objective.column
    colour = colours([static_label(n) for n in tuned.lengths])
    fig = Figure(figsize=(8.5, 7.0), dpi=DPI)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for n in tuned.lengths:
        mine = points[points["label"] == static_label(n)].groupby("load").mean(numeric_only=True)
        mine = mine.sort_values("mean_decode_requests")
        for ax, y in ((top, "throughput_tokens_per_s_per_gpu"), (bottom, column)):
            ax.plot(mine["mean_decode_requests"], mine[y], "o-", ms=3, lw=1.2, color=colour[static_label(n)],
                    label=f"ℓ = {n}" if ax is top else None)
    for choice in tuned.buckets:
        for ax in (top, bottom):
            ax.axvline(choice.high + 0.5, color="0.8", lw=0.8)
        picked = choice.figures[choice.length]
        top.plot(choice.batch, picked.throughput_per_gpu, "*", ms=13, color=colour[static_label(choice.length)],
                 markeredgecolor="black")
        bottom.plot(choice.batch, picked.tps_user, "*", ms=13, color=colour[static_label(choice.length)],
                    markeredgecolor="black")
    top.set_ylabel("throughput per GPU (tok/s/GPU)")
    bottom.set_ylabel(f"tokens/s/user, {tuned.objective.statistic} (tok/s)")
    bottom.set_xlabel("mean decoding requests per step (batch size)")
    bottom.set_xscale("log", base=2)
    top.set_title("Static lengths against the batch size; stars: each bucket's pick")
    top.legend(fontsize=7, ncol=2, loc="upper left")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def figures(tuned: TunedSchedule) -> list[tuple[str, str, str, Figure]]:
    out = [
        ("tune_frontier", "Frontiers", "Throughput per GPU against tokens/s/user: the tuned schedule (thick), the "
         "best static length at each SLA, and the scenario's MTP-1 and dspark-async variants; dots are "
         "operating points, dotted verticals the SLA thresholds.", frontier_figure(tuned)),
        ("tune_buckets", "Why each bucket got its length", "Every static length's operating points placed at their "
         "mean decoding batch; grey verticals are the bucket bounds, stars the pick read at each bucket's batch.",
         bucket_figure(tuned)),
        ("profile", "Step-time profile", "Engine step time against tokens verified in one forward.",
         profile_figure(tuned.verification)),
    ]
    acceptance = acceptance_figure(tuned.verification)
    if acceptance is not None:
        out.append(("acceptance", "Per-position acceptance", "Conditional acceptance p_k of each drafter.", acceptance))
    return out


def files_blocks() -> list[Block]:
    return [Heading("Files"), Bullets((
        "schedule.yaml, trtllm.yaml, schedule.json, tune.json: the schedule and the tune, as above",
        "points.csv, frontier.csv, comparisons.csv: the verification sweep (every label over the load axis)",
        "points/<hash>.json: every simulated point (the search's and the verification's), reused on a re-run",
        "figures/*.png and *.svg: the figures above",
    ))]

