"""The paper's effect on a captured curve: DSpark greedy against async on the torch-captured CUDA-graph staircase.

The default scenario (Llama-3.1-8B on one H200, DSpark γ = 7 on a 2-layer drafter, closed-loop
chat users) with its step times replaced by the curves benchmarks/profile_gpu.py captured:

    target   builtin:GPU-llama3.1-8b-torch-cudagraph       the buckets baked in as a staircase
                                                           (the scenario sets no engine graphs of its own)
    drafter  builtin:GPU-llama3.1-8b-torch-drafter-dspark  2 layers + LM head over R x 8 positions
    Markov   builtin:GPU-llama3.1-8b-torch-markov          its share of a target step, measured: the
                                                           median over R of markov(R) / target(R)

Greedy stops at the first drop of Θ; where the captured staircase steps up, it stops there, and
async's global search crosses when the longer step pays. The curves hold 1,024 cached tokens per
request (no context axis; the scenario's requests hold about that) and end at 512 tokens, the
engine's default cap on a step. Paired seeds; prints one markdown table: per user count, greedy's
and async's throughput per GPU (mean over seeds), tokens/s/user p50 and 1 + ℓ, and async's
throughput gain over greedy with its 95% interval over seeds.

    .venv/bin/python benchmarks/captured_policies.py [--gpu h200] [--users 1 4 16 32 64] [--seeds 3] [--duration 20]

`--target`, `--drafter` and `--markov` (a curve, or `none` for the scenario's default share) name
other curves, e.g. the AIConfigurator built-ins, for the same table on them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.errors import ProfileError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.merge import apply_variant, strip_study_blocks

DEFAULT = Path(__file__).resolve().parents[1] / "scenarios" / "default.yaml"
POLICIES = ("DSpark-7 greedy", "DSpark-7 async")


def markov_share(markov: str, target: str) -> float:
    """The Markov head's median share of a target step at the same R (R both curves measured)."""
    head, step = load_profile(markov), load_profile(target)
    requests = step.tokens[step.tokens <= head.max_tokens]
    return float(np.median(head.step_ms(requests) / step.step_ms(requests)))


def scenario(label: str, users: int, seed: int, duration_s: float, curves: dict[str, str], share: float | None) -> dict:
    raw = yaml.safe_load(DEFAULT.read_text())
    variant = next(v for v in raw["sweep"]["variants"] if v["label"] == label)
    base = strip_study_blocks(raw)
    base["seed"], base["horizon"] = seed, {"duration_s": duration_s, "warmup_s": min(4.0, duration_s / 4)}
    base["hardware"]["profile"] = curves["target"]
    base["drafter"]["latency"] = {"kind": "profile", "path": curves["drafter"],
                                  **({} if share is None else {"markov_head_fraction": share})}
    base["workload"]["arrivals"]["users"] = users
    return apply_variant(base, variant)


def interval(gains: np.ndarray) -> str:
    """Mean and 95% t-interval of paired relative gains."""
    half = stats.t.ppf(0.975, gains.size - 1) * gains.std(ddof=1) / np.sqrt(gains.size) if gains.size > 1 else 0.0
    return f"{gains.mean():+.1%} [{gains.mean() - half:+.1%}, {gains.mean() + half:+.1%}]"


def row(users: int, args: argparse.Namespace, curves: dict[str, str], share: float | None) -> str:
    runs = {label: [simulate(scenario_from_mapping(scenario(label, users, seed, args.duration, curves, share),
                                                   DEFAULT.parent)).summary for seed in range(1, args.seeds + 1)]
            for label in POLICIES}
    cells = []
    for label in POLICIES:
        mean = {key: np.mean([s[key] for s in runs[label]]) for key in
                ("throughput_tokens_per_s_per_gpu", "tps_user_p50", "mean_verify_tokens_per_request_step")}
        cells.append(f"{mean['throughput_tokens_per_s_per_gpu']:,.0f} | {mean['tps_user_p50']:.1f} | "
                     f"{mean['mean_verify_tokens_per_request_step']:.2f}")
    greedy, asynchronous = (np.array([s["throughput_tokens_per_s_per_gpu"] for s in runs[p]]) for p in POLICIES)
    return f"| {users} | {' | '.join(cells)} | {interval(asynchronous / greedy - 1)} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--gpu", default="h200", help="the GPU name the captured curves start with (default h200)")
    ap.add_argument("--target", help="verify-step curve (default builtin:GPU-llama3.1-8b-torch-cudagraph)")
    ap.add_argument("--drafter", help="drafter-forward curve (default builtin:GPU-llama3.1-8b-torch-drafter-dspark)")
    ap.add_argument("--markov", help="Markov-head curve, or none (default builtin:GPU-llama3.1-8b-torch-markov)")
    ap.add_argument("--users", type=int, nargs="+", default=[1, 4, 16, 32, 64])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run (default 20)")
    args = ap.parse_args()
    stem = f"builtin:{args.gpu}-llama3.1-8b-torch"
    curves = {"target": args.target or f"{stem}-cudagraph", "drafter": args.drafter or f"{stem}-drafter-dspark"}
    markov = args.markov or f"{stem}-markov"
    try:
        share = None if markov == "none" else markov_share(markov, curves["target"])
        print(f"target {curves['target']}, drafter {curves['drafter']}, Markov head "
              + ("the scenario's default share" if share is None else f"{share:.4f} of a target step ({markov})"))
        print(f"{args.seeds} seeds x {args.duration:g} simulated s per point; throughput per GPU is the mean over seeds")
        print()
        print("| users | greedy tok/s/GPU | greedy tok/s/user p50 | greedy 1 + ℓ | async tok/s/GPU "
              "| async tok/s/user p50 | async 1 + ℓ | async over greedy, mean [95% CI] |")
        print("|---|---|---|---|---|---|---|---|")
        for users in args.users:
            print(row(users, args, curves, share), flush=True)
    except ProfileError as exc:
        print(f"captured_policies: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
