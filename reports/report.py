"""Sweep result → DIR/report.html (one self-contained file) and DIR/report.md.

What the reader gets, in order: what was simulated (scenario, horizon, load
axis, seeds, hardware profile and its provenance, engine, workload, SLA),
the variants (drafter, acceptance, confidence head, policy, lossless or
not), a warning naming every lossy or oracle policy, the SLA comparison
table, the figures (`specplan.reports.figures`), and the files of the sweep.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

from specplan.hwprofiles import load_profile
from specplan.policies.registry import policy_class
from specplan.reports.document import (
    Block,
    Bullets,
    Callout,
    Folded,
    Heading,
    Image,
    Paragraph,
    Table,
    to_html,
    to_markdown,
)
from specplan.reports.fidelity import fidelity_blocks
from specplan.reports.figures import write_figures
from specplan.reports.lanes import lanes_blocks
from specplan.reports.manual import SWEEP_PAGES, manual_links
from specplan.simulator.core.schema import to_plain
from specplan.simulator.scenario import Scenario
from specplan.simulator.study.points import SweepDesign
from specplan.simulator.study.sweep.run import SweepResult
from specplan.traces.spec import SessionArrivals, TraceArrivals


def copied_fidelity_blocks(results_dir: Path, figures_dir: Path) -> list[Block]:
    """The sim-to-real section of `results_dir` (what `specplan fidelity --out` wrote);
    its figure is copied beside the report's own so the report folder stands alone."""
    out: list[Block] = []
    for block in fidelity_blocks(results_dir):
        if isinstance(block, Image):
            copies = []
            for src in (block.png, block.svg):
                dst = figures_dir / f"fidelity{src.suffix}"
                if src.is_file():
                    shutil.copyfile(src, dst)
                copies.append(dst)
            block = dataclasses.replace(block, png=copies[0], svg=copies[1])
        out.append(block)
    return out


def write_report(result: SweepResult, out: str | Path, fidelity_dir: str | Path | None = None) -> Path:
    """Render figures into out/figures and write out/report.html and out/report.md; returns the HTML path.

    A sim-to-real section joins only when `fidelity_dir` names a fidelity result.
    """
    out = Path(out)
    figures = write_figures(result, out / "figures")
    blocks = [*report_blocks(result), Heading("Figures")]
    blocks += [Image(f.title, f.caption, f.png, f.svg) for f in figures]
    if fidelity_dir is not None:
        blocks += copied_fidelity_blocks(Path(fidelity_dir), out / "figures")
    blocks += [*files_blocks(bool(lanes_blocks(result))), *manual_links(SWEEP_PAGES)]
    title = f"specplan sweep report: {result.design.base.name}"
    html_path = out / "report.html"
    html_path.write_text(to_html(title, blocks))
    (out / "report.md").write_text(to_markdown(title, blocks, out))
    return html_path


def report_blocks(result: SweepResult) -> list[Block]:
    blocks: list[Block] = []
    if result.design.base.description:
        blocks.append(Paragraph(result.design.base.description.strip()))
    blocks += [Heading("SLA comparison"), *sla_blocks(result)]
    lanes = lanes_blocks(result)
    if lanes:
        blocks += [Heading("Gains at equal lanes"), *lanes]
    warning = policy_warning(result)
    if warning is not None:
        blocks.append(warning)
    if result.design.notes:  # what loading took from the profiles, each once (the CLI prints them too)
        blocks += [Heading("Notes"), Bullets(result.design.notes)]
    blocks += [Heading("Variants"), variants_table(result)]
    blocks.append(Folded("What was simulated: scenario, horizon, seeds, engine, workload, hardware profiles and "
                         "their provenance", (Bullets(tuple(simulated_items(result))),)))
    return blocks


def simulated_items(result: SweepResult) -> list[str]:
    design = result.design
    base: Scenario = design.base
    seeds = sorted({p.seed for p in design.points})
    items = [f"Scenario: {base.name} ({design.source})",
             f"Horizon: {horizon_text(base)}",
             f"Load axis: {load_text(result)}",
             f"Seeds: {', '.join(map(str, seeds))}; {len(design.points)} points "
             f"({result.computed} simulated in this run, {result.reused} reused from earlier runs)",
             f"Cluster: {base.cluster.replicas} replica(s) × {base.hardware.gpus_per_replica} GPU(s), "
             f"router {base.cluster.router}"]
    items += profile_items(design)
    engine = base.engine
    items.append(f"Engine: max batch {engine.max_batch_requests} requests, KV capacity "
                 f"{engine.kv_capacity_tokens:,} tokens, prefill {compact(engine.prefill)}, "
                 f"scheduling overhead {engine.scheduling_overhead_ms:g} ms/step (synchronous policies)")
    workload = base.workload
    arrivals = workload.arrivals
    if isinstance(arrivals, SessionArrivals):
        items.append(f"Workload: {sessions_text(arrivals)}")
    elif isinstance(arrivals, TraceArrivals) and arrivals.use_lengths:
        items.append(f"Workload: prompt and output tokens from the trace {arrivals.path}")
    else:
        items.append(f"Workload: prompt tokens {compact(workload.prompt_tokens)}; "
                     f"output tokens {compact(workload.output_tokens)}")
    items.append(f"SLA: {sla_text(result)}")
    return items


def horizon_text(scenario: Scenario) -> str:
    h = scenario.horizon
    span = f"{h.duration_s:g} s" if h.duration_s is not None else f"{h.requests} requests"
    if isinstance(scenario.workload.arrivals, SessionArrivals):
        return f"{span} after the lanes' warm-up barrier, its first {h.warmup_s:g} s excluded as warm-up"
    return f"{span}, first {h.warmup_s:g} s excluded as warm-up"


LOAD_WORDS = {"users": "closed-loop users", "rate_per_s": "mean arrival rate (requests/s)",
              "rate_scale": "the workload's own rate times", "lanes": "agent session lanes"}


def sessions_text(arrivals: SessionArrivals) -> str:
    """An agent-session workload in words: its corpus and the lanes protocol's settings."""
    corpus = (f"{arrivals.generate.sessions} AgentX-shaped sessions generated from each seed"
              if arrivals.generate is not None else f"the {arrivals.format} session trace {arrivals.path}")
    cap = f"{arrivals.idle_gap_cap_s:g} s" if arrivals.idle_gap_cap_s is not None else "none"
    return (f"agent sessions on lanes: {corpus}; start shares {arrivals.start_min:g}–{arrivals.start_max:g}, "
            f"{arrivals.warmup_turns} warm-up turns, idle-gap cap {cap}, cache bust {arrivals.cache_bust}, "
            f"recycling {'on' if arrivals.recycle else 'off'}; the window opens at the lanes' warm-up barrier")


def load_text(result: SweepResult) -> str:
    """The load axis and the workload it scales (its kind and parameters, as the first point has them)."""
    point = result.design.points[0]
    values = sorted({p.load for p in result.design.points if p.load is not None})
    arrivals = compact(point.scenario.workload.arrivals)
    if point.load_kind is None:
        return f"the scenario's own arrivals: {arrivals}"
    return (f"{LOAD_WORDS[point.load_kind]} {', '.join(f'{v:g}' for v in values)}, scaling the scenario's "
            f"own arrivals ({arrivals} at the first load)")


def profile_items(design: SweepDesign) -> list[str]:
    items, seen = [], []
    for scenario in design.variant_scenarios.values():
        spec = scenario.hardware.profile
        if spec in seen:
            continue
        seen.append(spec)
        profile = load_profile(spec)
        provenance = "; ".join(f"{k}: {v}" for k, v in profile.provenance.items())
        items.append(f"Hardware profile: {profile.name} (measured points 1..{profile.max_tokens} tokens) "
                     f"— provenance: {provenance}")
    return items


def sla_text(result: SweepResult) -> str:
    sla = result.design.sla
    if sla is None or not sla.tps_user:
        return f"none given (frontiers use the {result.statistic} of tokens/s/user)"
    ttft = f", TTFT p99 ≤ {sla.ttft_s:g} s" if sla.ttft_s is not None else ""
    values = ", ".join(f"{v:g}" for v in sla.tps_user)
    return f"tokens/s/user ({sla.statistic}) ≥ {values}{ttft}"


def compact(spec: Any) -> str:
    """A dataclass spec as 'kind, key value, ...' on one line."""
    plain = to_plain(spec)
    if not isinstance(plain, dict):
        return str(plain)
    parts = [f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in plain.items()
             if v is not None and k not in ("kind", "mode")]
    tag = plain.get("kind", plain.get("mode"))
    return ", ".join(([str(tag)] if tag else []) + parts)


def variants_table(result: SweepResult) -> Table:
    rows = []
    for label, scenario in result.design.variant_scenarios.items():
        drafter = scenario.drafter
        cls = policy_class(scenario.policy.name)
        params = ", ".join(f"{k}={v}" for k, v in scenario.policy.params.items() if v is not None)
        rows.append((label, f"{drafter.family}" + (f", γ = {drafter.block_size}" if drafter.speculates else ""),
                     acceptance_text(scenario), confidence_text(scenario),
                     compact(drafter.latency) if drafter.speculates else "—",
                     cls.label() + (f" ({params})" if params else ""), verification_kind(cls),
                     scheduling_text(cls, scenario.engine.scheduling_overhead_ms)))
    header = ("label", "drafter", "acceptance", "confidence head", "drafting latency", "policy", "verification",
              "scheduling overhead")
    return Table(header, tuple(rows))


def scheduling_text(cls: Any, scheduling_ms: float) -> str:
    """Who pays engine.scheduling_overhead_ms: per-step policies do, fixed and hidden ones do not."""
    if cls.length_setting == "per_step":
        return f"{scheduling_ms:g} ms per step (decides from the current drafts, synchronously)"
    if cls.length_setting == "hidden":
        return "none (decided ahead, overlapped with the previous step)"
    return "none (lengths fixed before drafting)"


def acceptance_text(scenario: Scenario) -> str:
    drafter = scenario.drafter
    if not drafter.speculates:
        return "—"
    acc = drafter.acceptance
    mix = ", ".join(f"{d} {s:g}" for d, s in acc.domains.items() if s > 0)
    if acc.preset is not None:
        source = f"preset {acc.preset}"
    else:
        curves = acc.per_position or {}
        source = "; ".join(f"{d} [{', '.join(f'{p:g}' for p in c[: drafter.block_size])}]"
                           for d, c in curves.items())
    return f"{source}; mix {mix}; σ request {acc.request_sigma:g}, token {acc.token_sigma:g}"


def confidence_text(scenario: Scenario) -> str:
    if not scenario.drafter.speculates:
        return "—"
    head = scenario.drafter.confidence
    if head.kind == "perfect":
        return "perfect (c = p)"
    return f"model: overconfidence {head.overconfidence:g}, noise {head.noise:g}, calibration {head.calibration}"


def verification_kind(cls: Any) -> str:
    if cls.oracle:
        return "ORACLE (sees outcomes)"
    return "lossless" if cls.lossless else "LOSSY"


def policy_warning(result: SweepResult) -> Callout | None:
    items = []
    for label, scenario in result.design.variant_scenarios.items():
        cls = policy_class(scenario.policy.name)
        if cls.oracle:
            items.append(f"{label}: {cls.label()} — it knows which drafts will be accepted; an upper bound only")
        elif not cls.lossless:
            items.append(f"{label}: {cls.label()} — admission depends on the drafted tokens themselves")
    if not items:
        return None
    return Callout("Lossy and oracle policies (not comparable to shipping, lossless policies)", tuple(items))


def sla_blocks(result: SweepResult) -> list[Block]:
    comp = result.comparisons
    if comp.empty:
        return [Paragraph("No SLA was given (add `sla: {tps_user: [...]}` to the scenario); "
                          "see frontier.csv and the figures.")]
    baseline = str(comp["baseline"].iloc[0])
    header = (f"SLA: tokens/s/user ({result.statistic}) ≥", "label", "throughput per GPU (tok/s)",
              f"gain vs {baseline}", f"tokens/s/user at {baseline}'s throughput", "gain")
    rows = tuple((f"{r.sla_tps_user:g}", str(r.label),
                  number(r.throughput_per_gpu, "{:,.0f}") + edge_note(r.throughput_edge, result) + thin_note(r.thin),
                  percent(r.gain_vs_baseline),
                  number(r.tps_user_at_matched, "{:.1f}") + edge_note(r.tps_user_edge, result)
                  + thin_note(r.tps_user_thin),
                  percent(r.tps_user_gain_vs_baseline)) for r in comp.itertuples())
    note = Paragraph("Throughput per GPU is read off each label's frontier at the SLA (piecewise-linear "
                     "between simulated operating points); 'unreachable' means no operating point of the "
                     "label met the SLA. Matched throughput: each label's best tokens/s/user while "
                     f"delivering {baseline}'s throughput per GPU at that SLA. A value marked '(at max "
                     "load …)' is the largest simulated load's (the SLA is slower than any point the label "
                     "reached): a lower bound, since more load was not simulated; '(at min load …)' likewise "
                     "for the smallest load. A value marked '(thin: load L: N requests)' rests on a point where "
                     "a seed completed fewer than 30 requests in the measurement window (a plan refuses such "
                     "a probe), and so does any gain against it: lengthen the horizon before reading it.")
    return [Table(header, rows), note]


def edge_note(edge: Any, result: SweepResult) -> str:
    """' (at max load 128 users)' for a reading taken at an end of the load axis, else ''."""
    if not isinstance(edge, str) or not edge:
        return ""
    return f" (at {edge}{load_unit(result)})"


def thin_note(thin: Any) -> str:
    """' (thin: load 64: 0 requests)' for a reading resting on a point with too few requests, else ''."""
    return f" (thin: {thin})" if isinstance(thin, str) and thin else ""


def load_unit(result: SweepResult) -> str:
    kinds = {p.load_kind or "" for p in result.design.points}
    return {frozenset({"users"}): " users", frozenset({"rate_per_s"}): " req/s",
            frozenset({"lanes"}): " lanes"}.get(frozenset(kinds), "")


def number(value: float, template: str) -> str:
    return template.format(value) if value is not None and math.isfinite(value) else "unreachable"


def percent(value: float) -> str:
    return f"{100 * value:+.1f}%" if value is not None and math.isfinite(value) else "—"


def files_blocks(lanes: bool = False) -> list[Block]:
    return [Heading("Files"), Bullets((
        "points.csv: one row per variant × load × seed, every summary key plus label, load, seed",
        "frontier.csv: per label, Pareto vertices (kind=vertex) and a monotone interpolation (kind=interpolated)",
        "comparisons.csv: the SLA table above, with matched-throughput columns",
        *(("lanes.csv: the gains at equal lanes above, with their intervals",) if lanes else ()),
        "points/<hash>.json: each point's summary and resolved scenario (the resume cache)",
        "figures/*.png and *.svg: the figures above",
    ))]
