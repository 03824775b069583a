"""One replica: the decode core (specplan.simulator.engine.core.decode) driven by a SimPy clock, one event per step.

    loop:  admit → schedule → wait the step's price → commit → first tokens / finish / requeue

The loop is the one every driver runs (specplan.simulator.engine.core.step.serve),
this replica its driver, each step priced: its duration is the quote the policy's Θ read (drafting + verify at
B and the batch's KV context + host time + the scheduling overhead the
policy pays). Where prompts are computed is the replica's prefill front
(specplan.simulator.engine.cluster.prefill_front, chosen when the simulation
builds the replica): chunked in the core, a fixed-rate stage, or a prefill
pool whose requests `receive` takes when their KV has arrived. The front
also holds the first-token rule: a request whose KV arrives whole gets its
first token at the end of its first decode step (or the stage's end with
`engine.prefill.first_token: prefill`), and one preempted before it still
awaits it. The stage marks of TTFT's parts (`request_log.ttft_parts`) are
the request log's transitions, called where each stage ends: in the front,
the pool and the core. What every driver does (enqueue, finish, requeue,
wake) is `EngineDriver`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
import simpy

from specplan.simulator.engine.cluster.prefill_front import PrefillFront
from specplan.simulator.engine.core.decode import DecodeCore
from specplan.simulator.engine.core.driver import EngineDriver
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.step import PRICED, StepClock, StepPlan, serve


class Replica(EngineDriver):
    """A decode engine in simulated time; `submit(rid)` hands it a routed request."""

    def __init__(self, env: simpy.Environment, core: DecodeCore, log: RequestLog,
                 on_done: Callable[[int], None], front: PrefillFront, clock: StepClock = PRICED) -> None:
        super().__init__(env, core, log)
        self.core: DecodeCore = core
        self.index, self.on_done = core.index, on_done
        self.front = front
        self.clock = clock  # the priced step (kv_tiers.LoadingClock: waiting for host-tier loads)
        env.process(self.run())

    # ---- arrivals -----------------------------------------------------------------
    def outstanding(self) -> int:
        """Requests this replica holds: in its prefill stage, queued, or running."""
        state = self.core.state  # read directly: the router asks every replica at every arrival
        return self.front.in_prefill + len(state.queue) + state.batch.n

    def submit(self, rid: int, blocks: Sequence[int] | None = None, rank: int | None = None) -> None:
        self.core.remember(rid, blocks, rank)
        self.log.routed(rid, self.index)
        if self.rejects(rid):
            return
        self.front.submit(self, rid, blocks)

    def receive(self, rid: int, first: bool) -> None:
        """A request whose KV has reached this replica (from the prefill stage or a pool); `first`: its first
        token comes from its first decode step."""
        self.log.routed(rid, self.index)
        self.front.receive(self, rid, first)

    # ---- the engine loop (specplan.simulator.engine.core.step.serve): this replica as its driver ----------
    def run(self) -> Generator[simpy.Event, Any, None]:
        yield from serve(self.core, self.env, self.clock, self)

    def planned(self, plan: StepPlan) -> None:
        """Before a step's time passes: the ids it decodes, while some await their first token (the front's rule)."""
        self.front.planned(plan)

    def stepped(self, finished: np.ndarray, evicted: np.ndarray) -> None:
        """After its commit: first tokens (the front's rule), then finished and evicted requests."""
        self.front.stepped(self.env.now)
        EngineDriver.stepped(self, finished, evicted)  # not super(): called every step

    def done(self, rid: int) -> None:
        self.on_done(rid)

    def requeue(self, rid: int) -> None:
        """A preempted request: back through the front (the queue's head, or prefill again)."""
        self.front.requeue(self, rid)
