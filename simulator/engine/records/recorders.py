"""What one engine records, in one bundle: its request and step logs, emissions, counters and draft sample.

Place in the data flow: the decode core writes to its `Recorders` when a step
commits (and its speculator to the draft sampler); the simulation and the
reference engine (specplan.validation.engine) both read them the same way,
`counts()` giving the summary's counters of every engine they ran:

    log        the request log (specplan.simulator.engine.core.request_log), shared by a cluster's engines
    steps      one row per engine step (records.StepLog), shared likewise
    chunks     every step's emissions (records.ChunkLog: ITL, a benchmark client's chunks), or None
    speculation  vLLM-meaning speculative counters (records.SpeculationCounters)
    phases     prefill steps and the ranks' balance (phases.PhaseCounters), when the step is priced per rank
    drafts     the sampled drafts (`DraftSampler`: draft_record.DraftTally), when the engine drafts

The parts an engine lacks are null objects chosen at assembly (`NoPhases`,
`NoDraftSample`), so the step never asks whether it records.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from specplan.policies.base import Policy, StepOutcome
from specplan.simulator.engine.batch import RID, Batch, Rows
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.step import StepPlan, StepTiming
from specplan.simulator.engine.phases import PhaseCounters
from specplan.simulator.engine.records.draft_record import (
    SAMPLE_EVERY,
    DraftRecord,
    DraftTally,
    merged_record,
)
from specplan.simulator.engine.records.step_log import ChunkLog, SpeculationCounters, StepLog


class DraftSampler(Protocol):
    def due(self, step_index: int) -> bool:
        """Whether this step's drafts are sampled."""
        ...

    def outcomes(self, ids: np.ndarray, drawn: int, accepted: np.ndarray) -> None: ...

    def drafts(self, ids: np.ndarray, c: np.ndarray, prefix: np.ndarray, mask: np.ndarray | None) -> None: ...

    def record(self) -> DraftRecord | None: ...


class NoDraftSample:
    """An engine that drafts nothing samples nothing."""

    def due(self, step_index: int) -> bool:
        return False

    def outcomes(self, ids: np.ndarray, drawn: int, accepted: np.ndarray) -> None:
        raise AssertionError("no drafts are sampled")

    def drafts(self, ids: np.ndarray, c: np.ndarray, prefix: np.ndarray, mask: np.ndarray | None) -> None:
        raise AssertionError("no drafts are sampled")

    def record(self) -> DraftRecord | None:
        return None


class DraftSample:
    """Every SAMPLE_EVERY-th step's drafts into a tally (specplan.simulator.engine.records.draft_record)."""

    def __init__(self, tally: DraftTally, log: RequestLog) -> None:
        self.tally, self.log = tally, log  # the log's columns grow (reallocate): read them at each use

    def due(self, step_index: int) -> bool:
        return step_index % SAMPLE_EVERY == 0

    def outcomes(self, ids: np.ndarray, drawn: int, accepted: np.ndarray) -> None:
        self.tally.outcomes(self.log["domain"][ids], drawn, accepted)

    def drafts(self, ids: np.ndarray, c: np.ndarray, prefix: np.ndarray, mask: np.ndarray | None) -> None:
        """A sampled step's drafts: the rows that drafted, their outcomes over the whole block and the
        confidences the head gave them."""
        if mask is not None:
            drafted = np.asarray(mask, dtype=bool)
            ids, c, prefix = ids[drafted], c[drafted], prefix[drafted]
        self.tally.outcomes(self.log["domain"][ids], self.tally.block_size, prefix)
        self.tally.confidences(c, prefix)

    def record(self) -> DraftRecord | None:
        return self.tally.record()


class PhaseRecorder(Protocol):
    def add(self, plan: StepPlan, timing: StepTiming) -> None: ...

    def counters(self) -> PhaseCounters | None: ...


class NoPhases:
    """An engine whose steps are not priced per rank counts no phases."""

    def add(self, plan: StepPlan, timing: StepTiming) -> None:
        pass

    def counters(self) -> PhaseCounters | None:
        return None


class RankPhases:
    """The summary's prefill and rank-balance counters (`PhaseCounters`), one step at a time."""

    def __init__(self) -> None:
        self.phase_counts = PhaseCounters()

    def add(self, plan: StepPlan, timing: StepTiming) -> None:
        self.phase_counts.add(plan.load, plan.held_requests, timing.draft_ms + timing.verify_ms + timing.overhead_ms,
                              plan.quote.excess_ms(plan.verify_tokens))

    def counters(self) -> PhaseCounters | None:
        return self.phase_counts


class Emission(Protocol):
    """Told what a decode step emitted (after the ledger counted it)."""

    def emitted(self, batch: Batch, rows: Rows, accepted: np.ndarray, over: np.ndarray | None,
                lengths: np.ndarray | int, now: float) -> None: ...


class ChunkEmission:
    """The chunk log's row per decoding request: accepted + 1 tokens, cut at what it had left."""

    def __init__(self, chunks: ChunkLog) -> None:
        self.chunks = chunks

    def emitted(self, batch: Batch, rows: Rows, accepted: np.ndarray, over: np.ndarray | None,
                lengths: np.ndarray | int, now: float) -> None:
        self.chunks.add(now, rows.of(batch.rids), accepted + 1 if over is None else accepted + 1 + over)


class PolicyLearns:
    """A learning policy observes what each row accepted (`Policy.observe`)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def emitted(self, batch: Batch, rows: Rows, accepted: np.ndarray, over: np.ndarray | None,
                lengths: np.ndarray | int, now: float) -> None:
        ids = rows.of(batch.ints[RID])
        self.policy.observe(StepOutcome(ids, np.broadcast_to(lengths, accepted.shape), accepted, now))


@dataclass
class Recorders:
    """One engine's recorders (the module docstring)."""

    log: RequestLog
    steps: StepLog
    chunks: ChunkLog | None
    speculation: SpeculationCounters
    phases: PhaseRecorder
    drafts: DraftSampler

    def counts(self, ranks: int) -> dict[str, Any]:
        """The summary's counters these recorders hold (the phases' fields when steps are priced per rank)."""
        return merged_counts([self], ranks)[0]


def merged_counts(recorders: Sequence[Recorders], ranks: int) -> tuple[dict[str, Any], SpeculationCounters,
                                                                        DraftRecord | None, ChunkLog | None]:
    """Several engines' recorders as one: the summary's counters, the speculative counters, the draft record
    and the emissions (None when no engine kept them)."""
    phases = [c for c in (r.phases.counters() for r in recorders) if c is not None]
    counts: dict[str, Any] = functools.reduce(PhaseCounters.merge, phases).fields(ranks) if phases else {}
    speculation = functools.reduce(SpeculationCounters.merge, (r.speculation for r in recorders))
    drafts = merged_record([r.drafts.record() for r in recorders])
    logs = [r.chunks for r in recorders if r.chunks is not None]
    return counts, speculation, drafts, ChunkLog.merge(logs) if logs else None
