"""Policy speed: microseconds per decision at R = 256 requests, γ = 7, next to one numpy.sort.

Every registered policy decides on the same steps (confidences drawn once,
a sawtooth steps/s table up to 4096 tokens); stateful policies see a run
of consecutive steps of the same batch, as in the engine, so the
asynchronous policy plans from its two-step-old snapshot and the learning
policies have history. The reference is `numpy.sort` of the same R·γ
survival values, warmed up the same way as the policies (its first calls
are not timed either). Goal: dspark-greedy and dspark-async within 5× of
that sort. Prints the median over `--repeats` timing rounds, and each
decision in the machine's reference steps (benchmarks/reference.py,
measured in the same process).

    .venv/bin/python benchmarks/policy_speed.py [--requests 256] [--block 7] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from reference import bracketed

from specplan.policies.admission import survival
from specplan.policies.base import OracleView, SpsTable, StepOutcome, StepView
from specplan.policies.registry import POLICIES, make_policy
from specplan.simulator.scenario import PolicySpec
from specplan.simulator.scenario.policy import policy_params

PARAMS = {"length-schedule": {"schedule": {"64": 4, "256": 2}}, "threshold": {"threshold": 0.5}}
STEPS = 64


def sawtooth_steps_per_s(max_tokens: int) -> np.ndarray:
    """A CUDA-graph-like table: padded to buckets of 64 tokens, 6 ms + 3 µs per padded token."""
    tokens = np.maximum(np.arange(max_tokens + 1), 1)
    padded = np.ceil(tokens / 64) * 64
    return 1000.0 / (6.0 + 0.003 * padded)


def make_views(requests: int, block: int, oracle: bool) -> list[StepView]:
    rng = np.random.default_rng(0)
    price = SpsTable(sawtooth_steps_per_s(4096))
    ids = np.arange(requests)
    views = []
    for step in range(STEPS):
        conf = rng.beta(8.0, 2.0, size=(requests, block))
        fields = dict(confidences=conf, request_ids=ids, price=price, max_step_tokens=4096,
                      reserved_tokens=0, max_batch_requests=requests, block_size=block,
                      step_index=step, now_s=0.0, drafted=np.ones(requests, dtype=bool), drafting=requests)
        if oracle:
            accepted = rng.integers(0, block + 1, size=requests)
            views.append(OracleView(**fields, accepted_prefix=accepted))
        else:
            views.append(StepView(**fields))
    return views


def time_policy(name: str, requests: int, block: int) -> float:
    """Median µs per decide over STEPS consecutive steps (observe is not timed)."""
    policy = make_policy(name, policy_params(PolicySpec(name, PARAMS.get(name, {}))), block)
    views = make_views(requests, block, POLICIES[name].oracle)
    learns = policy.learns
    times = []
    for view in views:
        start = time.perf_counter()
        decision = policy.decide(view)
        times.append(time.perf_counter() - start)
        if learns:
            lengths = decision.per_request(view.batch_requests)
            policy.observe(StepOutcome(view.request_ids, lengths, np.minimum(lengths, 2), view.now_s))
    return statistics.median(times[4:]) * 1e6


def time_sort(requests: int, block: int) -> float:
    """Median µs of numpy.sort over STEPS steps' survival values, the first 4 untimed as for policies."""
    rng = np.random.default_rng(0)
    steps = [survival(rng.beta(8.0, 2.0, size=(requests, block))).ravel() for _ in range(STEPS)]
    times = []
    for values in steps:
        start = time.perf_counter()
        np.sort(values)
        times.append(time.perf_counter() - start)
    return statistics.median(times[4:]) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--block", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    sort_us = statistics.median(time_sort(args.requests, args.block) for _ in range(args.repeats))
    print(f"R = {args.requests}, γ = {args.block}: numpy.sort of {args.requests * args.block} values "
          f"{sort_us:.1f} µs (median of {args.repeats} rounds); reference steps measured around each policy")
    print(f"  {'policy':<16}{'µs/decision':>12}{'× sort':>9}{'reference steps':>17}")
    for name in POLICIES:
        us, reference = bracketed(lambda n=name: statistics.median(time_policy(n, args.requests, args.block)
                                                                   for _ in range(args.repeats)))
        print(f"  {name:<16}{us:>12.1f}{us / sort_us:>9.1f}{us * reference / 1e6:>17.2f}")


if __name__ == "__main__":
    main()
