"""What every driver of the engine loop does around a step, written once: wake, enqueue, finish, reject, requeue.

The loop (specplan.simulator.engine.core.step.serve) asks its driver four things:
`admitted(count)` after admission, `idle()` when no row runs (the event that
wakes it, or None to stop), `planned(plan)` before a step's time passes and
`stepped(finished, evicted)` after its commit. `EngineDriver` answers them
for a decode core and a request log, with the request's way through written
once (every status and stage time through the log's transitions,
specplan.simulator.engine.core.request_log):

    enqueue(rid, front)    the request waits for a decode slot; a waiting loop wakes
    finish(ids)            the requests' last tokens are out
    reject(rid, ...)       turned away; `rejects(rid)` asks the KV-fit rule on arrival
    requeue(rid)           a preempted request goes back to the head of the queue
    done(rid)              the hook a request's end calls (the simulation's count, a closed-loop user)

Its subclasses are the simulator's replica (specplan.simulator.engine.cluster.replica:
a prefill stage in front, first tokens of disaggregated prefill, requeueing
through prefill), the reference engine (specplan.validation.engine: real KV
caches opened and released) and the tests' driver (tests/drive.py: stops when
nothing is left).
"""

from __future__ import annotations

import numpy as np
import simpy

from specplan.simulator.engine.core.decode import DecodeCore
from specplan.simulator.engine.core.request_log import KV_CAPACITY, RequestLog
from specplan.simulator.engine.core.step import StepPlan
from specplan.simulator.engine.intake import request_misfit


class EngineDriver:
    """A decode core driven in an environment, its requests written to a log (the module docstring)."""

    def __init__(self, env: simpy.Environment, core: DecodeCore, log: RequestLog) -> None:
        self.env, self.core, self.log = env, core, log
        self.wake_event: simpy.Event | None = None

    # ---- a request's way through --------------------------------------------------------------
    def enqueue(self, rid: int, front: bool = False) -> None:
        self.log.queued(rid)
        self.core.enqueue(rid, front)
        self.wake()

    def wake(self) -> None:
        """Wake a loop waiting for work (`idle`)."""
        if self.wake_event is not None and not self.wake_event.triggered:
            self.wake_event.succeed()

    def finish(self, ids: np.ndarray) -> None:
        self.log.finished(ids, self.env.now)
        for rid in ids.tolist():
            self.done(rid)

    def reject(self, rid: int, reason: str, detail: str) -> None:
        self.log.rejected(rid, reason, detail)
        self.done(rid)

    def rejects(self, rid: int) -> bool:
        """The KV-fit rule on arrival: a request no cache it may use can ever hold is rejected; whether it was."""
        detail = request_misfit(self.log, self.core.config, rid)
        if detail is not None:
            self.reject(rid, KV_CAPACITY, detail)
        return detail is not None

    def requeue(self, rid: int) -> None:
        self.enqueue(rid, front=True)

    def done(self, rid: int) -> None:
        """A request ended (completed or rejected)."""

    # ---- the loop's questions (specplan.simulator.engine.core.step.serve) ----------------------------
    def admitted(self, count: int) -> None:
        """`count` requests joined the batch (its last rows)."""

    def idle(self) -> simpy.Event | None:
        """No row runs: wait for an enqueued request."""
        self.wake_event = self.env.event()
        return self.wake_event

    def planned(self, plan: StepPlan) -> None:
        """A step is decided, before its time passes."""

    def stepped(self, finished: np.ndarray, evicted: np.ndarray) -> None:
        """A step was committed: finish its finished requests, requeue its evicted ones (youngest first, so
        the oldest ends at the head)."""
        if finished.size:
            self.finish(finished)
        if evicted.size:
            for rid in evicted[::-1].tolist():
                self.requeue(rid)
