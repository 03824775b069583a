"""Simulator speed: simulated output tokens and engine steps per wall-second.

Standard workload (issue 2): 8 replicas, a closed loop of 64 users per
replica, an MTP-style drafter with static verification length 3, 600
simulated seconds. Runs in one process (one core). Prints the median of
`--repeats` runs.

    .venv/bin/python benchmarks/sim_speed.py [--repeats 3] [--duration 600]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from simulator.engine.simulation import simulate
from simulator.scenario import scenario_from_mapping

STANDARD = {
    "name": "bench-sim-speed",
    "seed": 1,
    "horizon": {"duration_s": 600, "warmup_s": 10},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.02}, "gpus_per_replica": 1},
    "cluster": {"replicas": 8, "router": "least_loaded"},
    "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 4_000_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 50_000}, "scheduling_overhead_ms": 0.1},
    "drafter": {"family": "mtp", "block_size": 3,
                "acceptance": {"per_position": {"chat": [0.87, 0.8, 0.75]}, "domains": {"chat": 1.0},
                               "request_sigma": 0.3, "token_sigma": 0.3},
                "confidence": {"kind": "perfect"}, "latency": {"kind": "fixed", "ms": 0.5}},
    "policy": {"name": "static", "params": {"length": 3}},
    "workload": {"arrivals": {"kind": "closed_loop", "users": 512, "think_s": 1.0},
                 "prompt_tokens": {"kind": "lognormal", "median": 800, "sigma": 0.7, "max": 8000},
                 "output_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.8, "max": 4000}},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=600.0)
    args = ap.parse_args()
    raw = dict(STANDARD, horizon={"duration_s": args.duration, "warmup_s": 10})
    scenario = scenario_from_mapping(raw, Path.cwd())
    tokens_rate, steps_rate = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = simulate(scenario)
        wall = time.perf_counter() - start
        tokens = int(result.steps["emitted_tokens"].sum()) + int(result.requests["first_token_s"].notna().sum())
        tokens_rate.append(tokens / wall)
        steps_rate.append(len(result.steps) / wall)
    print(f"workload: 8 replicas x 64 closed-loop users, static length 3, {args.duration:g} simulated s")
    print(f"simulated output tokens per wall-second: {statistics.median(tokens_rate):,.0f} (median of {args.repeats})")
    print(f"engine steps per wall-second:            {statistics.median(steps_rate):,.0f}")
    print(f"simulated seconds per wall-second:       {args.duration / (tokens / tokens_rate[-1]):,.1f}")


if __name__ == "__main__":
    main()
