"""Routing arrivals to replicas: `round_robin`, `least_loaded`, `random`, and `session` (sticky, DP-aware).

`session` is what an agentic benchmark runs behind a router (SGLang's
router with a routing key per conversation, Dynamo's session affinity,
llm-d's prefix scorer keeping a conversation in place): a consistent hash
of the request's conversation key over every (replica, attention rank)
slot, so each turn of a conversation lands where its prefix is cached, and
adding a replica moves only the conversations it takes. The hash is Lamping
and Veach's jump consistent hash ("A Fast, Minimal Memory, Consistent Hash
Algorithm", 2014) over the key scrambled by splitmix64. Requests without a
key (not from a session workload) go round robin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

MASK64 = (1 << 64) - 1


class Router:
    """Picks a replica index for each arrival. `least_loaded` counts requests a
    replica holds (in prefill, queued, running); ties go to the lowest index."""

    def __init__(self, kind: str, replicas: Sequence[Any], rng: np.random.Generator, ranks: int = 1) -> None:
        self.kind = kind
        self.replicas = replicas
        self.rng = rng
        self.ranks = ranks
        self.next_index = 0

    def route(self, key: int | None) -> tuple[int, int | None]:
        """(replica, attention rank) for a request; the rank is None unless the session router pins it."""
        if self.kind != "session" or key is None:
            return self.choose(), None
        slot = jump_hash(splitmix64(key), len(self.replicas) * self.ranks)
        return slot // self.ranks, (slot % self.ranks if self.ranks > 1 else None)

    def choose(self) -> int:
        n = len(self.replicas)
        if self.kind in ("round_robin", "session"):
            i = self.next_index
            self.next_index = (i + 1) % n
            return i
        if self.kind == "random":
            return int(self.rng.integers(n))
        loads = [r.outstanding() for r in self.replicas]
        return loads.index(min(loads))


def splitmix64(key: int) -> int:
    """A 64-bit scramble of the key, so neighbouring keys land far apart."""
    z = (key + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def jump_hash(key: int, buckets: int) -> int:
    """The bucket in [0, buckets) of a 64-bit key; growing `buckets` by one moves 1/(buckets + 1) of the keys."""
    bucket, jump = -1, 0
    while jump < buckets:
        bucket = jump
        key = (key * 2862933555777941757 + 1) & MASK64
        jump = int((bucket + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return bucket
