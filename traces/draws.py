"""One generator's values one at a time, drawn in blocks: how the workload's scalar streams are read.

The caller passes in the generator (a named stream of the scenario's seed,
specplan.simulator.core.streams); this module draws nothing of its own.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class ScalarDraws:
    """Values of one dedicated stream, one at a time, generated `block` at a time.

    `ScalarDraws(lambda n: rng.gamma(k, θ, n)).next()` returns the same
    values, in the same order, as one `rng.gamma(k, θ)` call per value:
    numpy's generators fill an array by drawing its elements in turn from the
    one bit generator, as repeated scalar calls do, at a fraction of a scalar
    call's cost. The stream runs up to a block ahead, so it must serve
    nothing else.
    """

    __slots__ = ("block", "fill", "pos", "values")

    def __init__(self, fill: Callable[[int], np.ndarray], block: int = 256) -> None:
        self.fill, self.block = fill, block
        self.values: list[float] = []
        self.pos = 0

    def next(self) -> float:
        if self.pos == len(self.values):
            self.values = self.fill(self.block).tolist()
            self.pos = 0
        value = self.values[self.pos]
        self.pos += 1
        return value
