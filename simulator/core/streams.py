"""Named random streams: every draw flows from the scenario's seed.

`stream(seed, "arrivals")` and `stream(seed, "outcomes", replica)` return
independent generators whose seeds are `SeedSequence(seed, spawn_key=...)`
children keyed by a stable hash of the name (plus optional indices), so
adding a stream or changing how one part of the model draws does not
reshuffle any other part. Values of one stream drawn one at a time in
blocks: `specplan.traces.draws.ScalarDraws`.
"""

from __future__ import annotations

import zlib

import numpy as np


def seed_sequence(seed: int, name: str, *index: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=(zlib.crc32(name.encode()), *index))


def stream(seed: int, name: str, *index: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name, *index)))
