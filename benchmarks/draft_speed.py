"""Drafting speed: microseconds per engine step for one full draw of a batch.

One draw is what the replica does per step: true acceptance p (R × γ, with
request and token spread), the STS-calibrated model head's confidences c,
and the outcomes (U < p → accepted prefix). Standard case (issue 4):
R = 256 requests, γ = 7, DSpark on qwen3-8b with the contract head
(overconfidence 1.5, noise 0.4, STS), request/token sigma 0.5. One core.
Prints the median over `--repeats` timing runs of `--steps` draws each,
and the per-part split.

    .venv/bin/python benchmarks/draft_speed.py [--requests 256] [--block 7] [--steps 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from simulator.core.streams import seed_sequence, stream
from simulator.drafters.drafter import Drafter, build_drafter
from simulator.drafters.spec import AcceptanceSpec, ConfidenceSpec, DrafterSpec, FixedLatency


def standard_drafter(block_size: int) -> Drafter:
    spec = DrafterSpec(
        family="dspark", block_size=block_size,
        acceptance=AcceptanceSpec(preset="qwen3-8b", domains={"math": 0.3, "code": 0.3, "chat": 0.4},
                                  request_sigma=0.5, token_sigma=0.5),
        confidence=ConfidenceSpec(kind="model", overconfidence=1.5, noise=0.4, calibration="sts"),
        latency=FixedLatency(ms=1.0),
    )
    return build_drafter(spec, None, seed_sequence(1, "calibration"))


def one_step(drafter: Drafter, domains: np.ndarray, offsets: np.ndarray, rngs: tuple) -> np.ndarray:
    """p, c and the accepted prefix for the whole batch: the replica's per-step draw."""
    rng_p, rng_c, rng_u = rngs
    p, _c = drafter.draft(domains, offsets, rng_p, rng_c)
    ok = rng_u.random(p.shape) < p
    return np.where(ok.all(axis=1), p.shape[1], ok.argmin(axis=1))


def time_steps(drafter: Drafter, requests: int, steps: int) -> float:
    """Microseconds per step over `steps` consecutive draws."""
    setup = stream(2, "bench-batch")
    acc = drafter.acceptance
    assert acc is not None
    domains = setup.choice(len(acc.domains), size=requests, p=acc.mix)
    offsets = acc.request_offsets(requests, setup)
    rngs = (stream(2, "acceptance"), stream(2, "confidence"), stream(2, "outcomes"))
    start = time.perf_counter()
    for _ in range(steps):
        one_step(drafter, domains, offsets, rngs)
    return (time.perf_counter() - start) / steps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--block", type=int, default=7)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    start = time.perf_counter()
    drafter = standard_drafter(args.block)
    build_s = time.perf_counter() - start
    runs = [time_steps(drafter, args.requests, args.steps) for _ in range(args.repeats)]
    print(f"draft draw (p, c, outcomes): R={args.requests}, γ={args.block}: "
          f"{statistics.median(runs):.1f} µs/step (median of {args.repeats} × {args.steps} steps; "
          f"min {min(runs):.1f}, max {max(runs):.1f})")
    print(f"first drafter build (lazy imports, preset fit, STS fit on "
          f"{drafter.spec.confidence.calibration_samples} blocks): {build_s:.2f} s")


if __name__ == "__main__":
    main()
