"""What the engine's own terms change: token caps, DP-attention caps and CUDA graphs on the shipped scenarios.

    .venv/bin/python benchmarks/engine_terms.py [--duration 30] [--smoke]

DeepSeek-V3 (`scenarios/deepseek-v3-h200.yaml`) at 256 closed-loop users:
MTP-1, DSpark-5 greedy and async with no cap, a 512-token step budget
(truncate and defer), data-parallel attention over 8 ranks of 64 tokens,
the 512 budget with vLLM's CUDA graphs, and async drafting each request's
planned share (`draft_widths: plan`). Then the default scenario
(Llama-3.1-8B on one H200) at 32 and 128 users with and without vLLM's
graphs and with host time off. One seed each; prints one line per run
(throughput per GPU, tokens/s/user p50, mean step, 1 + ℓ, deferred share,
drafts truncated, drafting's share of the step).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.merge import apply_load, apply_variant, strip_study_blocks

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
DEEPSEEK_CASES = {
    "no cap": {},
    "512 truncate": {"engine": {"max_step_tokens": 512, "budget": "truncate"}},
    "512 defer": {"engine": {"max_step_tokens": 512, "budget": "defer"}},
    "DP8, 64/rank": {"engine": {"dp_attention": {"ranks": 8, "max_step_tokens": 64}}},
    "512 + vLLM graphs": {"engine": {"max_step_tokens": 512, "cuda_graph": {"engine": "vllm"}}},
}
DEFAULT_CASES = {"no graphs": {}, "vLLM graphs": {"engine": {"cuda_graph": {"engine": "vllm"}}},
                 "host off": {"engine": {"host": {"engine": "none"}}}}


def variants(raw: dict) -> dict[str, dict]:
    return {v["label"]: {k: x for k, x in v.items() if k != "label"} for v in raw["sweep"]["variants"]}


def line(label: str, case: str, users: int, summary: dict) -> str:
    s = summary
    return (f"{users:4d} users  {label:16s} {case:22s} {s['throughput_tokens_per_s_per_gpu']:8.0f} tok/s/GPU  "
            f"p50 {s['tps_user_p50']:6.1f} tok/s/user  step {s['mean_step_ms']:6.2f} ms  "
            f"1+l {s['mean_verify_tokens_per_request_step']:.2f}  deferred {s['deferred_share']:.3f}  "
            f"truncated {s['draft_tokens_truncated']}  drafting {s['draft_share_of_step']:.2f}")


def run(path: Path, label: str, change: dict, users: int, duration_s: float) -> dict:
    raw = yaml.safe_load(path.read_text())
    base = strip_study_blocks(raw)
    base["horizon"] = {"duration_s": duration_s, "warmup_s": min(8.0, duration_s / 4)}
    merged = apply_variant(apply_variant(base, variants(raw)[label]), change)
    arrivals = scenario_from_mapping(merged, path.parent).workload.arrivals
    return simulate(scenario_from_mapping(apply_load(merged, arrivals, "users", users), path.parent)).summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0, help="simulated seconds per run (default 30)")
    ap.add_argument("--smoke", action="store_true", help="one run per scenario (tests/test_benchmarks.py runs this)")
    args = ap.parse_args()
    deepseek, default = SCENARIOS / "deepseek-v3-h200.yaml", SCENARIOS / "default.yaml"
    first = slice(0, 1) if args.smoke else slice(None)
    for label in ("MTP-1", "DSpark-5 greedy", "DSpark-5 async")[first]:
        for case, change in list(DEEPSEEK_CASES.items())[first]:
            print(line(label, case, 256, run(deepseek, label, change, 256, args.duration)), flush=True)
    plan = {"engine": {"max_step_tokens": 512}, "policy": {"params": {"draft_widths": "plan"}}}
    print(line("DSpark-5 async", "512, plan widths", 256, run(deepseek, "DSpark-5 async", plan, 256, args.duration)))
    for users in (32, 128)[first]:
        for label in ("MTP-1", "DSpark-7 greedy", "DSpark-7 async")[first]:
            for case, change in list(DEFAULT_CASES.items())[first]:
                print(line(label, case, users, run(default, label, change, users, args.duration * 2 / 3)), flush=True)


if __name__ == "__main__":
    main()
