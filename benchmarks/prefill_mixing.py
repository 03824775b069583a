"""What mixing prompt chunks into decode steps does to the SGLang cookbook cells' TTFT, TPOT and throughput.

    .venv/bin/python benchmarks/prefill_mixing.py [NAME_FILTER]

SGLang runs a prefill (extend) batch apart from the decode batch: while it
runs, the decoding requests wait. The simulated engine (`engine.prefill:
chunked`) instead adds a prompt chunk to a decode step and prices the step
at decode + chunk tokens on the decode-shaped verify profile. For every
runnable cookbook cell at each published concurrency this prints, with
nothing fitted:

    published         the cell's mean TTFT, mean TPOT and output tok/s/GPU, and the prefill
                      rate they imply: output tok/s x mean prompt / mean output tokens
                      (every prompt token the run prefilled, over the run's duration)
    mixed             the case as it runs in the suite (chunked prefill): the same three,
                      the share of simulated time in steps that carry a prompt chunk, and
                      the prefill rate inside those steps (prompt tokens / their time)
    prefill apart     the same run with the prompts prefilled elsewhere at the mixed run's
                      own rate (`prefill: {mode: disaggregated, tokens_per_s: that rate}`):
                      what the mixed steps add to TPOT, with prefill costing the same

`prefill apart` stalls nothing, as a prefill pool on GPUs of its own would
not (`cluster.prefill`); neither option stalls decode behind a prefill batch
the way SGLang's scheduler does. One seed, the case's own.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from specplan.simulator.engine.simulation import simulate
from specplan.simulator.scenario import load_scenario
from specplan.simulator.study.case_runner import CaseRunner, availability
from specplan.simulator.study.published import read_case

PUBLISHED = Path(__file__).resolve().parent / "published"
KEYS = ("mean_ttft_ms", "mean_tpot_ms", "output_throughput_tok_s_per_gpu")


def run(runner: CaseRunner, figure, extra: list[str]) -> tuple[dict, object]:
    overrides = [*runner.overrides(figure, figure.arms[0]), *extra]
    result = simulate(load_scenario(runner.case.folder / "scenario.yaml", overrides))
    bench = {k.split(".", 1)[1]: v for k, v in result.summary.items() if k.startswith("sglang_bench_serving.")}
    return bench, result.steps


def mixed_rate(steps) -> tuple[float, float]:
    """(share of time in steps carrying a prompt chunk, prompt tokens per second inside them)."""
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
        implied = pub["output_throughput_per_gpu"] * case.source["gpus"]["count"] * mean_in / mean_out
        mixed, steps = run(runner, figure, [])
        share, rate = mixed_rate(steps)
        apart, _ = run(runner, figure, [f"engine.prefill={{mode: disaggregated, tokens_per_s: {rate:.0f}}}"])
        print(f"{folder.name.removeprefix('sglang-cookbook-v4-flash-')} c={concurrency}")
        print(f"  published      TTFT {pub['mean_ttft']:9.0f} ms  TPOT {pub['mean_tpot']:6.2f} ms  "
              f"{pub['output_throughput_per_gpu']:7.0f} tok/s/GPU  implied prefill {implied:8.0f} tok/s")
        print(f"  mixed          TTFT {mixed['mean_ttft_ms']:9.0f} ms  TPOT {mixed['mean_tpot_ms']:6.2f} ms  "
              f"{mixed['output_throughput_tok_s_per_gpu']:7.0f} tok/s/GPU  prefill {rate:8.0f} tok/s in the "
              f"{share:.0%} of time its steps take")
        print(f"  prefill apart  TTFT {apart['mean_ttft_ms']:9.0f} ms  TPOT {apart['mean_tpot_ms']:6.2f} ms  "
              f"{apart['output_throughput_tok_s_per_gpu']:7.0f} tok/s/GPU")


def main(pattern: str) -> None:
    for folder in sorted(PUBLISHED.glob("sglang-cookbook-*")):
        if pattern in folder.name:
            cell(folder)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("filter", nargs="?", default="", help="only the cookbook cells whose folder name contains this")
    main(parser.parse_args().filter)
