"""Agentic simulation speed: an hour of 64 session lanes of ~100k-token contexts on one 8-GPU replica.

Standard workload: DeepSeek-V4-Flash on 8 x B200 (builtin:b200-deepseek-v4-flash-tp8ep8-sglang, SGLang's
habits: separate prefill batches priced by its -prefill built-in, CUDA graphs), MTP-1 (its -mtp drafter,
the deepseek-v4-pro MTP acceptance), a GPU prefix cache of 64-token blocks over DeepSeek-V4's KV layout
with a HiCache-style host tier (ratio 8, as InferenceX's DeepSeek-V4 B200 launcher sets it; 64 GB/s),
sticky session routing; 64 lanes of generated AgentX-shaped sessions whose first prompt is ~90k tokens
(growing past 100k), AgentX's 10 s idle-gap cap, for `--duration` simulated seconds after the warm-up
barrier. Prints the median of `--repeats` runs of the wall time, the simulated seconds per wall second
and the engine steps per wall second, and the median over runs of the steps rate as a ratio to the
machine's reference rate measured in the same process around each run (benchmarks/reference.py:
engine steps per reference step).

    .venv/bin/python benchmarks/agentic_speed.py [--repeats 3] [--duration 3600] [--lanes 64]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from reference import bracketed

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping

PROFILE = "builtin:b200-deepseek-v4-flash-tp8ep8-sglang"


def scenario(duration_s: float, lanes: int) -> dict:
    return {
        "name": "bench-agentic-speed",
        "seed": 38,
        "horizon": {"duration_s": duration_s},
        "hardware": {"profile": PROFILE, "gpus_per_replica": 8},
        "cluster": {"replicas": 1, "router": "session"},
        "engine": {"max_batch_requests": 2 * lanes,       # InferenceX: max running requests 2 x concurrency
                   "prefill": {"mode": "chunked", "chunk_tokens": 8192, "profile": f"{PROFILE}-prefill"},
                   "cuda_graph": {},
                   "prefix_cache": {"block_tokens": 64, "layout": "deepseek-v4-flash", "kv_value_bytes": 1,
                                    "host": {"ratio": 8, "gbytes_per_s": 64}}},
        "drafter": {"family": "mtp", "block_size": 1,
                    "acceptance": {"preset": "deepseek-v4-pro", "domains": {"code": 1.0}},
                    "latency": {"kind": "profile", "path": f"{PROFILE}-mtp"}},
        "policy": {"name": "mtp-1"},
        "workload": {"arrivals": {"kind": "sessions", "lanes": lanes,
                                  "generate": {"sessions": 128, "first_prompt_median": 90000,
                                               "first_prompt_sigma": 0.15, "first_prompt_max": 120000}}},
    }


def rates(duration_s: float, lanes: int) -> tuple[float, float, float, int]:
    """(wall seconds, simulated seconds per wall second, engine steps per wall second, requests) of one run."""
    built = scenario_from_mapping(scenario(duration_s, lanes), Path.cwd())
    start = time.perf_counter()
    result = simulate(built)
    wall = time.perf_counter() - start
    return wall, float(result.summary["simulated_s"]) / wall, len(result.steps) / wall, len(result.requests)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3600.0, help="simulated seconds after the barrier")
    ap.add_argument("--lanes", type=int, default=64)
    args = ap.parse_args()
    print(f"workload: {args.lanes} session lanes (~100k-token contexts), DeepSeek-V4-Flash on 8 x B200, "
          f"MTP-1, {args.duration:g} simulated s after the warm-up; median of {args.repeats} runs")
    runs = [bracketed(lambda: rates(args.duration, args.lanes)) for _ in range(args.repeats)]
    wall, sim, steps = (statistics.median(r[i] for r, _ in runs) for i in range(3))
    ratio = statistics.median(r[2] / reference for r, reference in runs)
    reference = statistics.median(reference for _, reference in runs)
    print(f"  wall {wall:.1f} s  {sim:.1f} simulated s/s  {steps:,.0f} engine steps/s  {runs[0][0][3]:,} requests  "
          f"({ratio:.3f} engine steps per reference step; reference {reference:,.0f} steps/s)")


if __name__ == "__main__":
    main()
