"""When does the difficulty-aware drafting bypass pay? dspark-async with and without it.

Workload: a closed loop of `users` on one replica of the measured
H200 / Llama-3.1-8B profile (AIConfigurator, vLLM 0.24); half the requests are easy (math-like DSpark
curve 0.93 → 0.81), half hard (acceptance 0.15 at every position),
request-level spread 0.5 in logit space, a γ = 7 DSpark drafter with
perfect confidences. Drafting cost: a fixed time per step (paid whenever
any request drafts) or the `layers` model (a 2-layer drafter over R·γ
tokens of a 32-layer target, plus its vocabulary head), whose cost grows
with the number of drafting requests once the forward leaves the
memory-bound region. For each bypass scope (`request`: every hard request
skips on its own; `batch`: only steps where all requests are hard skip)
prints the throughput gain of the bypass, paired by seed (the same
workload with and without it), as its mean and 95% confidence interval
over `--seeds` replications, and the share of request-steps that skipped
drafting.

    .venv/bin/python benchmarks/bypass_gain.py [--duration 20] [--users 1 4 16 64] [--seeds 5]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping

LATENCIES = {
    "fixed 1.5 ms": {"kind": "fixed", "ms": 1.5},
    "layers 2/32": {"kind": "layers", "target_layers": 32, "drafter_layers": 2, "lm_head_fraction": 0.076},
}


def scenario(users: int, latency: dict, bypass: str | None, duration_s: float, seed: int) -> dict:
    return {
        "name": "bench-bypass", "seed": seed,
        "horizon": {"duration_s": duration_s, "warmup_s": 2},
        "hardware": {"profile": "builtin:h200-llama3.1-8b-vllm"},
        # the profile's memory model holds 882,732 KV tokens; 64 requests use about 52k
        "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 880_000,
                   "prefill": {"mode": "disaggregated", "tokens_per_s": 50_000},
                   "scheduling_overhead_ms": 0.1},
        "drafter": {"family": "dspark", "block_size": 7,
                    "acceptance": {"per_position": {"math": [0.93, 0.91, 0.89, 0.87, 0.85, 0.83, 0.81],
                                                    "chat": [0.15] * 7},
                                   "domains": {"math": 0.5, "chat": 0.5}, "request_sigma": 0.5,
                                   "token_sigma": 0.3},
                    "confidence": {"kind": "perfect"}, "latency": latency},
        "policy": {"name": "dspark-async", "params": {"bypass": {"scope": bypass}} if bypass else {}},
        "workload": {"arrivals": {"kind": "closed_loop", "users": users, "think_s": 0.0},
                     "prompt_tokens": {"kind": "fixed", "value": 500},
                     "output_tokens": {"kind": "fixed", "value": 300}},
    }


def run(users: int, latency: dict, bypass: str | None, duration_s: float, seed: int) -> tuple[float, float]:
    """(throughput, share of request-steps that skipped drafting) of one run."""
    result = simulate(scenario_from_mapping(scenario(users, latency, bypass, duration_s, seed), base_dir=None))
    steps = result.steps
    decode = steps["decode_requests"].sum()
    skipped = 1.0 - steps["drafting_requests"].sum() / decode if decode else 0.0
    return result.summary["throughput_tokens_per_s"], skipped


def interval(gains: np.ndarray) -> str:
    """Mean and 95% t-interval of paired relative gains."""
    half = stats.t.ppf(0.975, gains.size - 1) * gains.std(ddof=1) / np.sqrt(gains.size) if gains.size > 1 else 0.0
    return f"{gains.mean():+.1%} [{gains.mean() - half:+.1%}, {gains.mean() + half:+.1%}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run")
    ap.add_argument("--users", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    print(f"{'drafting cost':<14}{'scope':>8}{'users':>6}  {'throughput gain, mean [95% CI]':<32}{'skipped':>8}")
    for label, latency in LATENCIES.items():
        for users in args.users:
            off = [run(users, latency, None, args.duration, seed) for seed in range(args.seeds)]
            for scope in ("request", "batch"):
                on = [run(users, latency, scope, args.duration, seed) for seed in range(args.seeds)]
                gains = np.array([a[0] / b[0] - 1 for a, b in zip(on, off, strict=True)])
                skipped = float(np.mean([s for _, s in on]))
                print(f"{label:<14}{scope:>8}{users:>6}  {interval(gains):<32}{skipped:>8.1%}")


if __name__ == "__main__":
    main()
