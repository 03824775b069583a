"""Results pages made by sweeps: the default comparison, DeepSeek-V3 on 8 x H200, DeepSeek-V4-Flash and -Pro.

Each page runs the sweep as a reader would (`specplan demo` / `specplan
sweep` into a fresh folder), shows what it printed, copies its frontier
figure, and reads points.csv and frontier.csv for the tables that say why:
the verify budget by load and where each step's time went.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from docs.gen.results import REPO, Study, between_markers, figure, specplan, table
from specplan.simulator.study.frontier import frontier_vertices, tps_user_at

READING = """A reading marked **at max load N** is the throughput of the largest
simulated load: the SLA is slower than any operating point the variant
reached, so more load might have given more, and the figure is a lower
bound, not an answer. Each sweep is one seed per point: a sketch of the
frontier, not a decision (add seeds and horizon for one).
"""

STEP_NOTE = """Step ms is the mean engine step in the measurement window; its shares
are drafting, the verify forward (of which the time spent reading the KV
cache), and host plus scheduling time. 1 + ℓ is the verified tokens per
decoding request-step, τ the emitted tokens per request-step (bonus
included), and tokens per step-ms = τ × decoding requests / step ms: the
rate a step turns into output.
"""


def sweep(scenario: str, out: Path, workers: int) -> tuple[str, pd.DataFrame, pd.DataFrame, Path]:
    """Run a sweep into `out`; (its printed block, points, frontier, folder)."""
    ran = specplan("sweep", scenario, "--out", str(out), "--workers", str(workers))
    block = ran.block().replace(str(out), "OUT")
    return block, pd.read_csv(out / "points.csv"), pd.read_csv(out / "frontier.csv"), out


def budget_table(points: pd.DataFrame) -> str:
    """1 + ℓ of every variant at every load."""
    pivot = points.pivot_table(index="label", columns="load", values="mean_verify_tokens_per_request_step",
                               sort=False)
    header = ["variant", *[f"{load:g}" for load in pivot.columns]]
    rows = [[label, *[f"{v:.2f}" for v in pivot.loc[label]]] for label in pivot.index]
    return table(header, rows)


def step_table(points: pd.DataFrame, loads: list[float], labels: list[str] | None = None) -> str:
    """Where each step's time went, per variant, at the given loads."""
    rows = []
    for load in loads:
        at = points[(points["load"] == load) & (points["label"].isin(labels or points["label"].unique()))]
        for _, p in at.iterrows():
            rate = p["mean_accepted_per_step"] * p["mean_decode_requests"] / p["mean_step_ms"]
            rows.append([f"{load:g}", p["label"], f"{p['mean_step_ms']:.2f}", pct(p["draft_share_of_step"]),
                         f"{pct(p['verify_share_of_step'])} ({pct(p['attention_share_of_step'])})",
                         pct(p["overhead_share_of_step"]), f"{p['mean_decode_requests']:,.0f}",
                         f"{p['mean_verify_tokens_per_request_step']:.2f}", f"{p['mean_accepted_per_step']:.2f}",
                         f"{rate:.1f}", pct(p["deferred_share"])])
    header = ["load", "variant", "step ms", "drafting", "verify (attention)", "host + sched.", "decoding",
              "1 + ℓ", "τ", "tokens / step-ms", "deferred"]
    return table(header, rows)


def pct(value: float) -> str:
    return "–" if pd.isna(value) else f"{100 * value:.0f}%"


def matched_table(frontier: pd.DataFrame, base: str, other: str, levels: list[float]) -> str:
    """Tokens/s/user of `other` against `base` at the same throughput per GPU, over `levels`."""
    rows = []
    for level in levels:
        a = tps_user_at(vertices(frontier, base), level)
        b = tps_user_at(vertices(frontier, other), level)
        if pd.notna(a) and pd.notna(b):
            rows.append([f"{level:,.0f}", f"{a:.1f}", f"{b:.1f}", f"{100 * (b / a - 1):+.0f}%"])
    return table(["throughput per GPU", f"{base} tok/s/user", f"{other} tok/s/user", "gain"], rows)


def gains_table(comparisons: pd.DataFrame, base: str, other: str) -> str:
    """Throughput per GPU of `base` and `other` at each SLA level, and the gain (edge readings marked)."""
    rows = []
    for level, at in comparisons.groupby("sla_tps_user", sort=True):
        a, b = (at[at["label"] == name].iloc[0] for name in (base, other))
        rows.append([f"{level:g}", throughput_text(a), throughput_text(b),
                     "–" if pd.isna(b["gain_vs_baseline"]) else f"{100 * b['gain_vs_baseline']:+.0f}%"])
    return table(["SLA (tokens/s/user p50)", f"{base} tok/s/GPU", f"{other} tok/s/GPU", "gain"], rows)


def throughput_text(row: pd.Series) -> str:
    if pd.isna(row["throughput_per_gpu"]):
        return "unreachable"
    edge = row["throughput_edge"]
    return f"{row['throughput_per_gpu']:,.0f}" + (f" (at {edge})" if isinstance(edge, str) and edge else "")


def vertices(frontier: pd.DataFrame, label: str) -> pd.DataFrame:
    rows = frontier[(frontier["label"] == label) & (frontier["kind"] == "vertex")]
    return frontier_vertices(rows.assign(meets_ttft=True))


def default_page(args: argparse.Namespace) -> str:
    """The demo's sweep; its printed table also goes into the README, between its markers."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        ran = specplan("demo", "--out", str(out), "--workers", str(args.workers))
        points = pd.read_csv(out / "points.csv")
        fig = figure(out / "figures" / "frontier.png", "default-frontier.png")
    block = ran.block().replace(str(out), "OUT")
    write_readme_block(ran.stdout.replace(str(out), "out/demo"), ran.seconds, args.workers)
    return sweep_body(
        "`scenarios/default.yaml`, embedded: chat traffic on one H200 serving Llama-3.1-8B, step times from "
        "AIConfigurator's kernel database (vLLM 0.24) over the batch's KV context, every drafter's forward "
        "from the same database, closed-loop users from 1 to 128; acceptance from published presets "
        "(DSpark Table 1's Qwen3-8B curves for DFlash and DSpark, DeepSeek-V3's MTP figures).",
        "## What `specplan demo` prints", block, fig, points)


def sweep_body(intro: str, heading: str, block: str, fig: str, points: pd.DataFrame) -> str:
    """A sweep's page: what it printed, its frontier, the verify budget by load, the step at the top load."""
    top = float(points["load"].max())
    return "\n".join([intro, "", heading, "", block, READING, fig,
                      "## The verify budget (1 + ℓ) by load (users)", "", budget_table(points),
                      f"## Where the step goes at {top:g} users", "", STEP_NOTE, step_table(points, [top])])


def write_readme_block(stdout: str, seconds: float, workers: int) -> None:
    """README's headline: what `make demo` prints, as this run printed it."""
    block = f"```text\n$ make demo          # {seconds:.0f} s on {workers} workers\n{stdout.rstrip()}\n```\n"
    between_markers(REPO / "README.md", "demo", block)


def v3_page(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        block, points, _, out = sweep("scenarios/deepseek-v3-h200.yaml", Path(tmp) / "dsv3", args.workers)
        fig = figure(out / "figures" / "frontier.png", "deepseek-v3-h200-frontier.png")
    return sweep_body(
        "`scenarios/deepseek-v3-h200.yaml`: DeepSeek-V3 replicas of 8 H200s (TP8, EP8), step times and every "
        "drafter's forward from AIConfigurator's H200 / vLLM 0.24 tables (the MTP module: one MoE layer + "
        "eh_proj + LM head; DSpark-5: three MoE layers + LM head, the paper's production setting), MTP-1 as in "
        "production, static MTP-3 and MTP-5, DSpark-5 greedy and async, closed-loop users 1 to 256. MTP "
        "acceptance is DeepSeek-V3's published 85–90%; no DSpark acceptance has been published for "
        "DeepSeek-V3, so DSpark stands in the Qwen3-8B preset.", "## What the sweep prints", block, fig, points)


def v4_page(args: argparse.Namespace) -> str:
    parts = [V4_INTRO]
    with tempfile.TemporaryDirectory() as tmp:
        for model, paper in (("flash", True), ("pro", False)):
            parts += v4_section(model, Path(tmp) / model, args.workers, paper)
    return "\n".join(parts)


V4_INTRO = """`scenarios/deepseek-v4-flash.yaml` (8 × H200, FP8 checkpoint) and
`scenarios/deepseek-v4-pro.yaml` (8 × B300, FP4 experts): one decode pool
with data-parallel attention (8 ranks) over EP8 MoE under vLLM's terms
(per-rank CUDA graphs, host time of speculating steps, the budget truncated
at its edge, 256 tokens per rank), MTP-1 against static MTP-3 and MTP-5
and DSpark-5 greedy and async; the choices are in
[DeepSeek-V4 on real engines](../guides/deepseek-v4.md). Nothing here was
tuned to the paper's figures. A gain at one SLA depends on where the SLA
falls against MTP-1's light-load ceiling; the matched-throughput
comparison (tokens/s/user of each at the same throughput per GPU) does not.
Every DeepSeek-V4-Pro end-to-end serving figure, the paper's included, is
held out: the Pro section shows the simulator's own figures only.
"""

PAPER_FLASH = """The DSpark paper reports, for V4-Flash, DSpark against MTP-1: +51%
throughput at 80 tokens/s/user, and +60–85% tokens/s/user at matched
throughput. Here, at the same comparisons:
"""


def v4_section(model: str, out: Path, workers: int, paper: bool) -> list[str]:
    block, points, frontier, _ = sweep(f"scenarios/deepseek-v4-{model}.yaml", out, workers)
    fig = figure(out / "figures" / "frontier.png", f"deepseek-v4-{model}-frontier.png")
    gains = gains_table(pd.read_csv(out / "comparisons.csv"), "MTP-1", "DSpark-5 async")
    levels = [250, 500, 1000, 1500, 2000, 2500, 3000, 4000, 5000]
    loads = [float(x) for x in (8, 128, 1024, 2048) if x in set(points["load"])]
    return [f"## DeepSeek-V4-{model.capitalize()}", "", "### What the sweep prints", "", block, fig,
            "### DSpark-5 async against MTP-1", "", PAPER_FLASH if paper else "", gains,
            "Tokens/s/user at matched throughput per GPU:", "", matched_table(frontier, "MTP-1", "DSpark-5 async",
                                                                           levels),
            "### The verify budget (1 + ℓ) by load (users)", "", budget_table(points),
            "### Where the step goes", "", STEP_NOTE + "Deferred: the share of decoding requests the per-rank "
            "caps left for the next step.\n", step_table(points, loads, ["MTP-1", "MTP-3 static", "DSpark-5 async"])]


STUDIES = {
    "default": Study("The default comparison: DSpark against MTP-1 and static MTP-k", "~30 s", default_page),
    "deepseek-v3": Study("DeepSeek-V3 on 8 x H200", "~1 min", v3_page),
    "deepseek-v4": Study("DeepSeek-V4-Flash and V4-Pro under vLLM", "~5 min", v4_page),
}
