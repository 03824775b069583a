"""The front door shared by the simulator and the reference engine (validation/).

Both take requests from the same workload processes and admit them the same
way, so both use these rather than copies:

    FrontDoor(scenario, drafter, log)    the domains and their mix, arrivals (`arrive`: the request's
                                         row and the event its closed-loop user waits on), `done`
    register(log, now, prompt, output, domain, offset) -> rid
                                         a request's row, with its acceptance offset z_r
    request_misfit(log, config, rid)     the KV-fit rule: why a request no cache it may use can ever hold
                                         is rejected on arrival (every admission path asks it: a driver's
                                         `rejects`, a prefill pool's `reject_misfit`)
    admit_fifo(queue, log, free_slots, kv_used, kv_capacity, block_size)
                                         FIFO admission while a slot and KV capacity remain
    admit_to_ranks(queue, log, free_slots, kv_free, block_size, total_free, total_kv_free)
                                         the same over data-parallel attention ranks (per-rank slots and KV,
                                         within the engine's totals, as preemption keeps them)

Admission reads the log (each request's footprint) and writes nothing to
it: it pops the requests it admits from the queue and returns them, and
the decode core marks their rows admitted (`DecodeCore.admit`).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import simpy

from specplan.simulator.core.streams import stream
from specplan.simulator.drafters.drafter import Drafter
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.core.request_log import KV_CAPACITY, RequestLog
from specplan.simulator.scenario import Scenario
from specplan.traces.draws import ScalarDraws


class FrontDoor:
    """Where arrivals enter: their log rows, acceptance offsets and completion events."""

    def __init__(self, scenario: Scenario, drafter: Drafter, log: RequestLog) -> None:
        self.log = log
        acc = drafter.acceptance
        mix = scenario.drafter.acceptance.domains
        self.domains = tuple(acc.domains) if acc is not None else tuple(d for d, s in mix.items() if s > 0)
        self.domain_mix = np.array([mix[d] for d in self.domains], dtype=float)
        rng = stream(scenario.seed, "request_sigma")
        self.offsets = ScalarDraws(lambda n: acc.request_offsets(n, rng)).next if acc is not None else lambda: 0.0
        self.done_events: dict[int, simpy.Event] = {}

    def arrive(self, env: simpy.Environment, prompt: int, output: int, domain: int) -> tuple[int, simpy.Event]:
        """A request's row and the event that fires when it completes or is rejected."""
        rid = register(self.log, env.now, prompt, output, domain, self.offsets())
        event = self.done_events[rid] = env.event()
        return rid, event

    def done(self, rid: int) -> None:
        self.done_events.pop(rid).succeed()


def register(log: RequestLog, now: float, prompt: int, output: int, domain: int, offset: float) -> int:
    """Add an arrived request to the log, with its acceptance logit offset z_r (request_sigma)."""
    rid = log.add(now, prompt, output, domain)
    log["acceptance_offset"][rid] = offset
    return rid


def kv_misfit(config: EngineConfig, prompt: int, output: int) -> str | None:
    """Why a request can never be admitted, or None when it fits.

    Its footprint at its largest (prompt + output + the draft block, the KV
    rule of specplan.simulator.engine.core.decode) must fit the most KV one request
    may hold: the whole cache, or under data-parallel attention one rank's
    (`EngineConfig.request_kv_limit`). Anything larger would wait at the head
    of the decode queue for good.
    """
    if prompt + output + config.block_size <= config.request_kv_limit:
        return None
    return ("prompt + output + block exceed kv_capacity_tokens (of one attention rank)" if config.dp is not None
            else "prompt + output + block exceed kv_capacity_tokens")


def request_misfit(log: RequestLog, config: EngineConfig, rid: int) -> str | None:
    """Why request `rid` can never be admitted (`kv_misfit` of its lengths), or None."""
    return kv_misfit(config, int(log["prompt_tokens"][rid]), int(log["output_tokens"][rid]))


def reject_misfit(log: RequestLog, config: EngineConfig, rid: int) -> bool:
    """Reject request `rid` (reason `kv_capacity`) if it can never fit, before any driver holds it (a prefill
    pool's arrivals); whether it was. A driver rejects its own (`EngineDriver.rejects`)."""
    detail = request_misfit(log, config, rid)
    if detail is not None:
        log.rejected(rid, KV_CAPACITY, detail)
    return detail is not None


class Admission:
    """What admission reads of the log, read once per call: a request's footprint."""

    def __init__(self, log: RequestLog) -> None:
        self.generated, self.prompt = log["generated_tokens"], log["prompt_tokens"]

    def footprint(self, rid: int) -> tuple[int, int]:
        """(generated, kv): the tokens `rid` holds in the cache (prompt + generated); admission adds the draft block."""
        generated = int(self.generated[rid])
        return generated, int(self.prompt[rid]) + generated


def admit_fifo(queue: deque[int], log: RequestLog, free_slots: int, kv_used: int,
               kv_capacity: int, block_size: int) -> list[tuple[int, int, int]]:
    """Pop waiting requests, head first, while a batch slot and KV capacity remain.

    A request's footprint is prompt + generated + the draft block. Head-of-line
    blocking is deliberate (FIFO). Returns (rid, generated, kv) per admitted
    request, in admission order (the core marks their log rows).
    """
    admitted: list[tuple[int, int, int]] = []
    rows = Admission(log)
    while queue and len(admitted) < free_slots:
        rid = queue[0]
        generated, kv = rows.footprint(rid)
        if kv_used + kv + block_size > kv_capacity:
            break
        queue.popleft()
        kv_used += kv + block_size
        admitted.append((rid, generated, kv))
    return admitted


def admit_to_ranks(queue: deque[int], log: RequestLog, free_slots: np.ndarray, kv_free: np.ndarray,
                   block_size: int, total_free: int, total_kv_free: int) -> list[tuple[int, int, int, int]]:
    """FIFO admission over data-parallel attention ranks: each request goes to the rank with room.

    Of the ranks with a free slot and KV room for the request's footprint, the
    one with the most free KV takes it (the lowest index on ties); the queue
    stops at the first request no rank can hold, once `total_free` (the engine's own free
    slots) are taken, or at the first footprint the engine's free KV (`total_kv_free`) cannot
    hold: preemption keeps both the ranks' caches and the engine's total, so admission does.
    Returns (rid, generated, kv, rank) in admission order.
    """
    admitted: list[tuple[int, int, int, int]] = []
    rows = Admission(log)
    slots, free = free_slots.copy(), kv_free.copy()
    while queue and len(admitted) < total_free:
        rid = queue[0]
        generated, kv = rows.footprint(rid)
        room = np.where((slots > 0) & (free >= kv + block_size), free, -1)
        rank = int(room.argmax())
        if room[rank] < 0 or kv + block_size > total_kv_free:
            break
        queue.popleft()
        slots[rank] -= 1
        free[rank] -= kv + block_size
        total_kv_free -= kv + block_size
        admitted.append((rid, generated, kv, rank))
    return admitted
