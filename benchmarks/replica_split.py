"""What simulating replicas independently costs in accuracy, by router, against the whole-cluster run.

    .venv/bin/python benchmarks/replica_split.py [--replicas 8] [--rate 48] [--duration 60] [--seeds 4] [--workers 2]

Workload: Llama-3.1-8B on H200 (the measured built-in), MTP-1, Poisson
arrivals, lognormal prompts (median 1,000) and outputs (median 200), the
fixed-rate prefill stage at 40,000 tokens/s. For each seed: the whole
cluster with router random, round_robin and least_loaded, and the split run
(`specplan.simulator.study.split.simulate_split`: N one-replica runs at λ/N,
which is random routing in distribution). Prints, per figure, the mean over
seeds ± its 95% interval for each, and the split's difference from each
whole-cluster router in percent; and the wall time of both.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.study.split import simulate_split

FIGURES = ("throughput_tokens_per_s", "tps_user_p10", "tps_user_p50", "ttft_p50_s", "ttft_p99_s")
ROUTERS = ("random", "round_robin", "least_loaded")


def scenario(replicas: int, rate: float, duration: float, seed: int, router: str):
    return scenario_from_mapping({
        "name": "bench-replica-split", "seed": seed,
        "horizon": {"duration_s": duration, "warmup_s": 5},
        "hardware": {"profile": "builtin:h200-llama3.1-8b-vllm"},
        "cluster": {"replicas": replicas, "router": router},
        "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 600000,
                   "prefill": {"mode": "disaggregated", "tokens_per_s": 40000}},
        "drafter": {"family": "mtp", "block_size": 1, "acceptance": {"preset": "deepseek-v3", "domains": {"chat": 1.0}},
                    "latency": {"kind": "fixed", "ms": 0.4}},
        "policy": {"name": "mtp-1"},
        "workload": {"arrivals": {"kind": "poisson", "rate_per_s": rate},
                     "prompt_tokens": {"kind": "lognormal", "median": 1000, "sigma": 0.8, "max": 8000},
                     "output_tokens": {"kind": "lognormal", "median": 200, "sigma": 0.8, "max": 2000}},
    }, base_dir=__import__("pathlib").Path("."))


def interval(values: list[float]) -> tuple[float, float]:
    v = np.array(values)
    half = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return float(v.mean()), float(half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--rate", type=float, default=48.0)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {name: [] for name in (*ROUTERS, "split")}
    wall = {"whole": 0.0, "split": 0.0}
    for seed in range(args.seeds):
        for router in ROUTERS:
            start = time.perf_counter()
            runs[router].append(simulate(scenario(args.replicas, args.rate, args.duration, seed, router)).summary)
            wall["whole"] += (time.perf_counter() - start) / len(ROUTERS)
        start = time.perf_counter()
        base = scenario(args.replicas, args.rate, args.duration, seed, "random")
        runs["split"].append(simulate_split(base, workers=args.workers).summary)
        wall["split"] += time.perf_counter() - start
    print(f"{args.replicas} replicas, {args.rate:g} req/s, {args.duration:g} s, {args.seeds} seeds; "
          f"mean ± 95% interval over seeds")
    print(f"{'figure':26s}" + "".join(f"{n:>22s}" for n in runs) + "".join(f"{'split vs ' + r:>24s}" for r in ROUTERS))
    for figure in FIGURES:
        means = {n: interval([r[figure] for r in rs]) for n, rs in runs.items()}
        cells = "".join(f"{m:>13.4g} ± {h:<6.2g}" for m, h in means.values())
        diffs = "".join(f"{100 * (means['split'][0] / means[r][0] - 1):>+23.1f}%" for r in ROUTERS)
        print(f"{figure:26s}{cells}{diffs}")
    print(f"wall per run: whole cluster {wall['whole'] / args.seeds:.2f} s, split ({args.workers} workers) "
          f"{wall['split'] / args.seeds:.2f} s")


if __name__ == "__main__":
    main()
