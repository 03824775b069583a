"""The front door shared by the simulator and the reference engine (validation/).

Both take requests from the same workload processes and admit them the same
way, so both use these functions rather than copies:

    request_domains(scenario, drafter)   the domains of the mix, in acceptance-model order
    domain_mix(scenario, domains)        their shares, for the workload's domain draws
    register(log, now, prompt, output, domain, drafter, offset_rng) -> rid
                                         a request's row, with its acceptance offset z_r
    admit_fifo(queue, log, now, free_slots, kv_used, kv_capacity, block_size)
                                         FIFO admission while a slot and KV capacity remain
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from simulator.engine.records import RUNNING, RequestLog


def request_domains(scenario: Any, drafter: Any) -> tuple[str, ...]:
    acc = drafter.acceptance
    if acc is not None:
        return tuple(acc.domains)
    return tuple(d for d, share in scenario.drafter.acceptance.domains.items() if share > 0)


def domain_mix(scenario: Any, domains: tuple[str, ...]) -> np.ndarray:
    mix = scenario.drafter.acceptance.domains
    return np.array([mix[d] for d in domains], dtype=float)


def register(log: RequestLog, now: float, prompt: int, output: int, domain: int, drafter: Any,
             offset_rng: np.random.Generator) -> int:
    """Add an arrived request to the log, with its logit offset z_r (request_sigma)."""
    rid = log.add(now, prompt, output, domain)
    acc = drafter.acceptance
    heterogeneous = acc is not None and acc.request_sigma > 0
    log["acceptance_offset"][rid] = acc.request_offsets(1, offset_rng)[0] if heterogeneous else 0.0
    return rid


def admit_fifo(queue: deque[int], log: RequestLog, now: float, free_slots: int, kv_used: int,
               kv_capacity: int, block_size: int) -> list[tuple[int, int, int]]:
    """Pop waiting requests, head first, while a batch slot and KV capacity remain.

    A request's footprint is prompt + generated + the draft block. Head-of-line
    blocking is deliberate (FIFO). Returns (rid, generated, kv) per admitted
    request; their log rows are marked running (admission time kept from the
    first admission after a preemption).
    """
    admitted: list[tuple[int, int, int]] = []
    while queue and len(admitted) < free_slots:
        rid = queue[0]
        generated = int(log["generated_tokens"][rid])
        kv = int(log["prompt_tokens"][rid]) + generated
        if kv_used + kv + block_size > kv_capacity:
            break
        queue.popleft()
        kv_used += kv + block_size
        if np.isnan(log["admitted_s"][rid]):
            log["admitted_s"][rid] = now
        log["status"][rid] = RUNNING
        admitted.append((rid, generated, kv))
    return admitted
