"""Results pages made by benchmark scripts: fleets (replica splitting, sampled plans), performance, and the
replication cells under each prefill schedule.

Each runs the scripts under benchmarks/ as a reader would and shows what
they printed. The performance page also writes the performance table of
benchmarks/README.md (between its markers), every figure beside the
machine's reference rate measured in the same process
(benchmarks/reference.py), so the ratio travels between machines.
"""

from __future__ import annotations

import argparse
import re

from docs.gen.results import REPO, Ran, Study, between_markers, script

RATIO = r"[\d.,]+ (?:tokens per reference step|M reference steps|reference steps)"


def fleets_page(args: argparse.Namespace) -> str:
    split = script("benchmarks/replica_split.py", "--workers", str(args.workers))
    plan = script("benchmarks/fleet_plan.py", "--workers", str(args.workers))
    return "\n".join([
        "What simulating a fleet's replicas independently costs in accuracy, and what sampling a plan's "
        "probes costs in time and accuracy: [Planning](../guides/planning.md#fleets) says how both work.", "",
        "## Splitting a cluster into one-replica runs", "",
        "Llama-3.1-8B on H200, MTP-1, Poisson arrivals over 8 replicas, 4 seeds; the split run (N one-replica "
        "runs at λ/N, which is random routing in distribution) against the whole-cluster run under each "
        "router. Against random routing the differences should sit inside the seeds' intervals (a test checks "
        "it as a Welch test over 6 seeds); round robin and least-loaded routing smooth each replica's "
        "arrivals, so for them a split run over-states queueing (TTFT): a conservative bound.", "",
        split.block(),
        "## A plan for a fleet of hundreds of replicas", "",
        "The same workload at 4,800 req/s (about 200 replicas), router random, SLA tps_user_p10 ≥ 200 and "
        "ttft_p99_s ≤ 1, 2 seeds, probes sampled by 8; then the same plan at 384 req/s sampled and whole, and "
        "the sampled and whole statistics at that answer over 16 seeds.", "", plan.block()])


BENCHMARKS = (
    ("simulator speed: 8 replicas × 64 closed-loop users, MTP-style drafter γ = 3, 600 simulated s, one "
     "core", "benchmarks/sim_speed.py", ("--repeats", "3")),
    ("the same, outputs ten times longer (the engine's step alone), 300 simulated s",
     "benchmarks/sim_speed.py", ("--repeats", "3", "--output-median", "3000", "--duration", "300")),
    ("the same workload with its requests and none of the engine's rules (the floor a request-level loop "
     "reaches), beside `specplan run`, each a share of the bare SimPy loop", "benchmarks/request_floor.py",
     ("--repeats", "3")),
    ("a step under data-parallel attention: the development set's B200 DP8 high-throughput cell (2,048 prompts "
     "at concurrency 1,024), one core", "benchmarks/dp_speed.py", ("--repeats", "3")),
    ("one step's draws, R = 256, γ = 7, by the engine's own code", "benchmarks/draft_speed.py", ()),
    ("a policy's decision, R = 256, γ = 7", "benchmarks/policy_speed.py", ()),
    ("`specplan demo` from nothing to report.html (36 points)", "benchmarks/demo_time.py", ("--workers", "2")),
)


def performance_page(args: argparse.Namespace) -> str:
    runs = [(what, script(path, *extra)) for what, path, extra in BENCHMARKS]
    rows = performance_table(runs)
    write_benchmarks_readme(rows)
    blocks = [f"### {what}\n\n{ran.block()}" for what, ran in runs]
    return "\n".join([
        "Every figure is measured by a script under `benchmarks/` and printed beside the machine's reference "
        "rate, measured in the same process just before and just after each run (`benchmarks/reference.py`: "
        "a fixed step-shaped "
        "piece of numpy work). Absolute speeds move from machine to machine and, on a shared machine, from "
        "minute to minute; the ratio moves much less. Tests assert nothing about speed.", "", rows, *blocks])


def performance_table(runs: list[tuple[str, Ran]]) -> str:
    lines = ["| what | measured | as a ratio to the reference | command |", "|---|---|---|---|"]
    for what, ran in runs:
        for measured, ratio in figures(ran.stdout):
            lines.append(f"| {what} | {measured} | {ratio} | `{ran.line}` |")
    return "\n".join(lines) + "\n"


def figures(stdout: str) -> list[tuple[str, str]]:
    """(figure, ratio) pairs from a benchmark's printed lines: a line with a ratio names it in parentheses
    ('54.5 tokens per reference step', '0.53 reference steps'); policy_speed prints a table of them."""
    pairs = []
    for line in stdout.splitlines():
        aside = re.search(r"\(([^()]*reference[^()]*)\)", line)
        ratio = re.search(RATIO, aside.group(1)) if aside else None
        if ratio is not None:
            measured = re.sub(r"\s*\([^()]*reference[^()]*\)", "", line)
            pairs.append((re.sub(r"\s+", " ", measured).strip(), ratio.group(0)))
        elif re.fullmatch(r"\s+[\w-]+\s+[\d.]+\s+[\d.]+\s+[\d.]+", line):
            name, us, _sort, steps = line.split()
            pairs.append((f"{name}: {us} µs per decision", f"{steps} reference steps"))
    return pairs


def prefill_schedule_page(args: argparse.Namespace) -> str:
    ran = script("benchmarks/prefill_schedule.py")
    return "\n".join([
        "The SGLang cookbook cells of the replication suite (DeepSeek-V4-Flash, random 8192/1024) under each "
        "prefill schedule, one seed each, nothing fitted: `separate` as SGLang runs it and the suite runs the "
        "cases (a prefill batch apart from decode, priced by the `-prefill` built-in, each DP step as long as its "
        "busiest rank), the same priced on the decode profile, and `mixed` (chunks inside decode steps, vLLM's "
        "rule). `implied prefill` is the published run's output tok/s × mean prompt / mean output tokens. How "
        "the schedules work: [Engine terms](../model/engine-terms.md#prefill-as-the-engine-schedules-it); what "
        "the figures say about the suite's misses: "
        "[Replication and fidelity](../guides/replication.md#what-is-responsible).", "",
        "| row | what |", "|---|---|",
        "| published | the cell's mean TTFT, mean TPOT and output tok/s/GPU, and the prompt tokens/s they imply |",
        "| separate | the case as the suite runs it; the prompt tokens/s inside its prefill batches, their share of "
        "time, what the busiest rank adds over the ranks' mean |",
        "| separate, decode-priced | the same schedule without a prefill profile |",
        "| mixed | prompt chunks inside decode steps on the decode profile |", "",
        ran.block()])


def write_benchmarks_readme(rows: str) -> None:
    between_markers(REPO / "benchmarks" / "README.md", "performance", rows)


STUDIES = {
    "fleets": Study("Fleets: split runs and sampled plans", "~3 min", fleets_page),
    "performance": Study("Performance", "~4 min", performance_page),
    "prefill-schedule": Study("DeepSeek-V4-Flash under SGLang's prefill schedule", "~1 min",
                              prefill_schedule_page),
}
