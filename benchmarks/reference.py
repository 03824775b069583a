"""A machine's speed, measured in the same run as a benchmark, so that its figures travel between machines.

    steps_per_s = reference_steps_per_s()      # median of 3 rounds of ~0.3 s each
    value, steps_per_s = bracketed(measure)    # the reference just before and just after, geometric mean

The reference step is a fixed piece of work shaped like the simulator's
engine step: a few dozen numpy calls on arrays of a batch's size (256 × 7
survivals: a product along the block, a sort, a cumulative sum, a
comparison, an index) with the Python around them. Absolute speeds move
from machine to machine (and on a shared machine from minute to minute);
a benchmark that prints its figure beside this rate, measured in the same
process around it (`bracketed`: just before and just after, as the fidelity
check brackets its points with profiles), gives a ratio (simulated tokens
per reference step, reference steps per decision) that moves much less.
benchmarks/README.md quotes both.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

T = TypeVar("T")
ROUNDS = 3
ROUND_S = 0.3


def reference_step(state: np.ndarray, out: np.ndarray) -> int:
    """One reference step: survival products, a descending sort, a cumulative sum, a threshold, a count."""
    survival = np.multiply.accumulate(state, axis=1)
    order = np.sort(survival.ravel())[::-1]
    np.cumsum(order, out=out)
    return int(np.count_nonzero(out > 0.5 * out[-1]))


def reference_steps_per_s(rounds: int = ROUNDS, round_s: float = ROUND_S) -> float:
    """Reference steps per wall-second on this machine now: the median of `rounds` timed rounds."""
    rng = np.random.default_rng(0)
    state = rng.beta(8.0, 2.0, size=(256, 7))
    out = np.empty(state.size)
    rates = []
    for _ in range(rounds):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < round_s:
            for _ in range(100):
                reference_step(state, out)
            count += 100
        rates.append(count / elapsed)
    return statistics.median(rates)


def bracketed(measure: Callable[[], T]) -> tuple[T, float]:
    """(what `measure` returned, the reference rate around it: geometric mean of one just before and after)."""
    before = reference_steps_per_s()
    value = measure()
    return value, math.sqrt(before * reference_steps_per_s())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"timed rounds, their median (default {ROUNDS})")
    args = parser.parse_args(argv)
    print(f"reference: {reference_steps_per_s(args.rounds):,.0f} steps/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
