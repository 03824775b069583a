"""How the SGLang cookbook cells' TTFT, TPOT and throughput move with the engine's prefill schedule.

    .venv/bin/python benchmarks/prefill_schedule.py [NAME_FILTER]

SGLang runs a prefill (extend) batch apart from decode: a rank with prompts
to compute runs it, its decoding requests wait, and under data-parallel
attention every rank's step lasts the busiest rank's (the cases run so:
`engine.prefill.schedule: separate`, priced by the `-prefill` built-in).
For every runnable cookbook cell at each published concurrency this prints,
with nothing fitted:

    published         the cell's mean TTFT, mean TPOT and output tok/s/GPU, and the prefill rate
                      they imply: output tok/s x mean prompt / mean output tokens
    separate          the case as the suite runs it: the same three, the share of time in steps
                      with a prefill batch and the prompt tokens per second inside them, the share
                      of step time the busiest rank adds over the ranks' mean (DP cells)
    separate, decode-priced   the same schedule with the prefill batches priced on the decode
                      profile at their tokens (no prefill profile): what the context-phase tables add
    mixed             prompt chunks inside decode steps on the decode profile (vLLM's schedule, and
                      this engine's only one before): what the schedule itself changes

One seed, the case's own.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario
from specplan.simulator.study.replication.case_runner import CaseRunner, availability
from specplan.simulator.study.replication.published import read_case

PUBLISHED = Path(__file__).resolve().parent / "published"


def run(runner: CaseRunner, figure, extra: list[str]) -> tuple[dict, object, dict]:
    overrides = [*runner.overrides(figure, figure.arms[0]), *extra]
    result = simulate(load_scenario(runner.case.folder / "scenario.yaml", overrides))
    bench = {k.split(".", 1)[1]: v for k, v in result.summary.items() if k.startswith("sglang_bench_serving.")}
    return bench, result.steps, result.summary


def prefill_rate(steps) -> tuple[float, float]:
    """(share of time in steps carrying prompt tokens, prompt tokens per second inside them)."""
    ms = (steps["draft_ms"] + steps["verify_ms"] + steps["overhead_ms"]).to_numpy()
    carrying = steps["prefill_tokens"].to_numpy() > 0
    return float(ms[carrying].sum() / ms.sum()), float(steps["prefill_tokens"].sum() / (ms[carrying].sum() / 1e3))


def published(case, concurrency: int) -> dict[str, float]:
    return {f.metric: f.value for f in case.figures if f.concurrency == concurrency}


def cell(folder: Path) -> None:
    case = read_case(folder)
    if availability(case):
        print(f"{folder.name}: {availability(case)}")
        return
    runner = CaseRunner(case, Path(tempfile.gettempdir()))   # it writes nothing: no calibration here
    scenario = load_scenario(folder / "scenario.yaml")
    mean_in = float(np.mean(scenario.workload.prompt_tokens.values))
    mean_out = float(np.mean(scenario.workload.output_tokens.values))
    for concurrency in sorted({f.concurrency for f in case.figures}):
        figure = next(f for f in case.figures if f.concurrency == concurrency)
        pub = published(case, concurrency)
        stat = "median" if "median_tpot" in pub else "mean"   # the statistic the cell publishes (P50 or mean)
        output = pub.get("output_throughput_per_gpu", pub.get("total_throughput_per_gpu", math.nan) * mean_out
                         / (mean_in + mean_out))
        implied = output * case.source["gpus"]["count"] * mean_in / mean_out
        print(f"{folder.name.removeprefix('sglang-cookbook-v4-flash-')} c={concurrency} ({stat} latencies)")
        print(f"  published                TTFT {pub[stat + '_ttft']:9.0f} ms  TPOT {pub[stat + '_tpot']:6.2f} ms  "
              f"{output:7.0f} tok/s/GPU  implied prefill {implied:8.0f} tok/s")
        for label, extra in (("separate", []), ("separate, decode-priced", ["engine.prefill.profile=null"]),
                             ("mixed", ["engine.prefill.schedule=mixed", "engine.prefill.profile=null"])):
            bench, steps, summary = run(runner, figure, extra)
            share, rate = prefill_rate(steps)
            ranks = summary.get("dp_imbalance_share_of_step")
            print(f"  {label:<24} TTFT {bench[stat + '_ttft_ms']:9.0f} ms  TPOT {bench[stat + '_tpot_ms']:6.2f} ms  "
                  f"{bench['output_throughput_tok_s_per_gpu']:7.0f} tok/s/GPU  prefill {rate:8.0f} tok/s in "
                  f"{share:.0%} of the time" + (f", busiest rank +{ranks:.0%}" if ranks is not None else ""))


def main(pattern: str) -> None:
    for folder in sorted(PUBLISHED.glob("sglang-cookbook-*")):
        if pattern in folder.name:
            cell(folder)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("filter", nargs="?", default="", help="only the cookbook cells whose folder name contains this")
    main(parser.parse_args().filter)
