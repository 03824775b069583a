"""Named random streams: every draw flows from the scenario's seed.

`stream(seed, "arrivals")` and `stream(seed, "outcomes", replica)` return
independent generators whose seeds are `SeedSequence(seed, spawn_key=...)`
children keyed by a stable hash of the name (plus optional indices), so
adding a stream or changing how one part of the model draws does not
reshuffle any other part.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np


def seed_sequence(seed: int, name: str, *index: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=(zlib.crc32(name.encode()), *index))


def stream(seed: int, name: str, *index: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name, *index)))


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
