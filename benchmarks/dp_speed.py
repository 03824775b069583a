"""Simulator speed under data-parallel attention: the development set's costliest cell, engine steps per wall-second.

The workload is the SGLang cookbook's B200 high-throughput cell as the replication suite runs it
(benchmarks/published/sglang-cookbook-v4-flash-official-b200-fp4-high-throughput/scenario.yaml: DeepSeek-V4-Flash
on 8 x B200, DP8 attention with EP8 MegaMoE, separate prefill batches, a bench client of 2,048 prompts at
concurrency 1,024), uncalibrated: every step is priced per rank (each rank's own part, the busiest rank, the
ranks' token caps, KV preemption per rank, FIFO prompt chunks per rank). It is the kind of cell that takes most
of `replicate --calibrate`'s time (issue 46). Prints the median over `--repeats` runs of engine steps and
simulated output tokens per wall-second, and of each as a ratio to the machine's reference rate measured in the
same process around each run (benchmarks/reference.py: tokens and engine steps per reference step).

    .venv/bin/python benchmarks/dp_speed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from reference import bracketed

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario

CELL = (Path(__file__).resolve().parent / "published" / "sglang-cookbook-v4-flash-official-b200-fp4-high-throughput"
        / "scenario.yaml")


def rates() -> tuple[float, float]:
    """(engine steps, simulated output tokens) per wall-second of one run of the cell."""
    scenario = load_scenario(CELL)
    start = time.perf_counter()
    result = simulate(scenario)
    wall = time.perf_counter() - start
    return len(result.steps) / wall, float(result.requests["generated_tokens"].sum()) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runs = [bracketed(rates) for _ in range(args.repeats)]
    steps = statistics.median(measured[0] for measured, _ in runs)
    tokens = statistics.median(measured[1] for measured, _ in runs)
    per_step = statistics.median(measured[0] / reference for measured, reference in runs)
    per_token = statistics.median(measured[1] / reference for measured, reference in runs)
    reference = statistics.median(reference for _, reference in runs)
    print(f"workload: {CELL.parent.name} (DP8 attention, 2,048 prompts at concurrency 1,024); "
          f"median of {args.repeats} runs")
    print(f"  DP8 cell  {steps:>9,.0f} engine steps/s  {tokens:>12,.0f} simulated output tokens/s  "
          f"({per_token:.1f} tokens per reference step, {per_step:.3f} engine steps; reference {reference:,.0f} steps/s)")


if __name__ == "__main__":
    main()
