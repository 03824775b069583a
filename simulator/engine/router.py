"""Routing arrivals to replicas: `round_robin`, `least_loaded`, `random`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class Router:
    """Picks a replica index for each arrival. `least_loaded` counts requests a
    replica holds (in prefill, queued, running); ties go to the lowest index."""

    def __init__(self, kind: str, replicas: Sequence[Any], rng: np.random.Generator) -> None:
        self.kind = kind
        self.replicas = replicas
        self.rng = rng
        self.next_index = 0

    def choose(self) -> int:
        n = len(self.replicas)
        if self.kind == "round_robin":
            i = self.next_index
            self.next_index = (i + 1) % n
            return i
        if self.kind == "random":
            return int(self.rng.integers(n))
        loads = [r.outstanding() for r in self.replicas]
        return loads.index(min(loads))
