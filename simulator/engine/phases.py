"""Chunked prefill's schedule: which rows decode in a step and which prompt chunks it computes.

One rule per engine, chosen once when the core is assembled (`prefill_phases`,
`engine.prefill.schedule`), never a branch in the step. Each attention rank
(one, without data-parallel attention) decides for itself, as each DP rank's
scheduler does:

    Mixed      vLLM V1 (vllm/v1/core/sched/scheduler.py): one token budget per step; decoding
               rows first, then prompt chunks FIFO up to chunk_tokens within what the budget
               leaves (each rank: its own chunk and token cap under data-parallel attention)
    Separate   SGLang without --enable-mixed-chunk (python/sglang/srt/managers/scheduler.py,
               get_next_batch_to_run: "Run prefill first if possible"): a rank with a prompt
               to compute runs a prefill (extend) batch of chunks FIFO up to its chunk, and
               its decoding rows wait for the next step (`held`); the other ranks decode.
               Under data-parallel attention every rank's forward meets the others' in the
               MoE all-to-all, so the step lasts its busiest rank (specplan.simulator.engine.price.rank_forward).
               SGLang under speculative decoding (`engine.dp_attention.decode_during_prefill`, auto: the
               engine's `DpScheduler.spec_prefill_idle`): while any rank runs a prefill batch every other
               rank runs an idle batch, so every decoding row waits (specplan.engines.dp_scheduler)
    Delayed    Separate under SGLang's prefill delayer (`engine.dp_attention.prefill_delayer`;
               specplan.engines.dp_scheduler): while some ranks have a new prompt and others none,
               no rank starts one (the ranks decode, in a graph), up to `prefill_delay_passes` − 1
               steps in a row; a prompt already under way goes on. Idle passes are not simulated:
               where holding back would leave no rank anything to run, the prompts start at once
               (SGLang's passes with nothing to run last the ranks' all-gather, well under a step)

    phases.decoding(batch) -> (decode mask, held)        the rows that decode; decoding rows that wait
    phases.chunks(batch, rows, per_request) -> take      prompt tokens per batch row this step
    phases.charged(prefill_tokens)                       the prompt tokens the decoding budget carries

`step_load` describes a step's forward per attention rank for its price
(`StepLoad`: decoding rows, tokens and KV context, prompt chunks and their
attention pairs), and `PhaseCounters` keeps what summary.json reports:
prefill steps, the decode time that waited on them, and how unevenly the
ranks were loaded.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from specplan.engines.dp_scheduler import DEFAULT_DELAY_PASSES
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.batch import PREFILL_LEFT, RANK, RID, Batch, Rows
from specplan.simulator.engine.cluster.ranks import rank_cumsum, ranks_within
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.price.rank_load import StepLoad


class PrefillPhases(Protocol):
    def decoding(self, batch: Batch) -> tuple[np.ndarray, int]: ...

    def charged(self, prefill_tokens: int) -> int:
        """The prompt tokens a step's decoding budget carries (a separate prefill batch takes none of it)."""
        ...

    def chunks(self, batch: Batch, rows: Rows, per_request: int) -> np.ndarray: ...


def prefill_phases(config: EngineConfig, speculates: bool = False) -> PrefillPhases:
    """The engine's schedule for chunked prefill (config.prefill_schedule, resolved from `auto`), under the
    prefill delayer where the scenario turns it on; `speculates`: the policy drafts (SGLang's ranks then idle
    while one prefills)."""
    idle = idle_while_prefilling(config, speculates)
    passes = delay_passes(config)
    if passes is not None:
        return Delayed(config, passes, idle)
    return Separate(config, idle) if config.prefill_schedule == "separate" else Mixed(config)


def idle_while_prefilling(config: EngineConfig, speculates: bool) -> bool:
    """Whether a step with a prefill batch on any rank holds every rank's decoding rows (module docstring);
    an explicit `decode_during_prefill` is refused in one line where there are no ranks or no separate batches."""
    dp = config.engine.dp_attention
    setting = "auto" if dp is None else dp.decode_during_prefill
    if setting != "auto":
        needs_separate_ranks(config, "engine.dp_attention.decode_during_prefill",
                             "what a rank runs while another prefills needs dp_attention.ranks >= 2",
                             "a rank runs a separate prefill batch only under engine.prefill chunked with "
                             "schedule separate (or auto for an SGLang profile)")
        return setting == "idle"
    rule = config.serving.dp_scheduler
    return config.dp is not None and speculates and rule is not None and rule.spec_prefill_idle


def needs_separate_ranks(config: EngineConfig, key: str, no_ranks: str, not_separate: str) -> None:
    """A DP rule's key refused in one line without data-parallel ranks (`no_ranks`) or without separate prefill
    batches (`not_separate`)."""
    if config.dp is None:
        raise ScenarioError(key, no_ranks)
    if not config.chunked or config.prefill_schedule != "separate":
        raise ScenarioError(key, not_separate)


def delay_passes(config: EngineConfig) -> int | None:
    """The prefill delayer's passes where `engine.dp_attention.prefill_delayer` is on (None: off); refused in one
    line where the engine or the schedule has no such rule."""
    dp = config.engine.dp_attention
    if dp is None or not dp.prefill_delayer:
        return None
    key = "engine.dp_attention.prefill_delayer"
    needs_separate_ranks(config, key, "the prefill delayer aligns data-parallel ranks: it needs dp_attention.ranks >= 2",
                         "the prefill delayer is modelled for SGLang's separate prefill batches: set engine.prefill "
                         "to chunked with schedule separate (or auto for an SGLang profile)")
    serving = config.serving
    rule = None if serving.dp_scheduler is None else serving.dp_scheduler.delayer
    if rule is None and serving.name != "none":
        raise ScenarioError(key, f"{serving.label} has no prefill delayer (SGLang's --enable-prefill-delayer)")
    default = DEFAULT_DELAY_PASSES if rule is None else rule.max_delay_passes
    return dp.prefill_delay_passes or default


class Mixed:
    """Prompt chunks ride in decode steps, within each rank's token budget (see the module docstring)."""

    def __init__(self, config: EngineConfig) -> None:
        self.dp = config.dp
        self.chunk = config.chunk_tokens or 0
        self.max_step_tokens = config.max_step_tokens

    def decoding(self, batch: Batch) -> tuple[np.ndarray, int]:
        return batch.ints[PREFILL_LEFT] == 0, 0

    def charged(self, prefill_tokens: int) -> int:
        return prefill_tokens

    def chunks(self, batch: Batch, rows: Rows, per_request: int) -> np.ndarray:
        """FIFO within each rank's chunk and what its token cap leaves after its decoding rows."""
        ints = batch.ints
        if self.dp is None:
            decode_tokens = rows.count * per_request
            return fifo_chunks(ints[PREFILL_LEFT], None, max(0, min(self.chunk, self.max_step_tokens - decode_tokens)))
        decoded = np.bincount(ints[RANK][rows.index], minlength=self.dp.ranks) * per_request
        room = np.clip(np.minimum(self.dp.chunk_tokens, self.dp.step_tokens - decoded), 0, None)
        return fifo_chunks(ints[PREFILL_LEFT], ints[RANK], room)


class Separate:
    """A rank with prompts to compute runs a prefill batch; its decoding rows wait (module docstring)."""

    def __init__(self, config: EngineConfig, idle: bool = False) -> None:
        self.dp = config.dp
        self.chunk = (config.chunk_tokens or 0) if config.dp is None else config.dp.chunk_tokens
        self.idle = idle                 # every rank's decoding rows wait while any rank prefills

    def decoding(self, batch: Batch) -> tuple[np.ndarray, int]:
        left = batch.ints[PREFILL_LEFT]
        decode = left == 0
        if self.dp is None:  # one rank: any prompt to compute makes this a prefill step
            held = decode if not decode.all() else np.zeros_like(decode)
        else:
            held = self.waiting(decode, batch.ints[RANK], ~decode)
        return decode & ~held, int(np.count_nonzero(held))

    def waiting(self, decode: np.ndarray, ranks: np.ndarray, computing: np.ndarray) -> np.ndarray:
        """The decoding rows held back by the prefill batches of the rows `computing` (their ranks', or every
        rank's under `idle`)."""
        assert self.dp is not None
        prefilling = np.bincount(ranks[computing], minlength=self.dp.ranks) > 0
        return decode & (prefilling.any() if self.idle else prefilling[ranks])

    def charged(self, prefill_tokens: int) -> int:
        return 0

    def chunks(self, batch: Batch, rows: Rows, per_request: int) -> np.ndarray:
        ints = batch.ints
        if self.dp is None:
            return fifo_chunks(ints[PREFILL_LEFT], None, self.chunk)
        return fifo_chunks(ints[PREFILL_LEFT], ints[RANK], np.full(self.dp.ranks, self.chunk))


class Delayed(Separate):
    """Separate under SGLang's prefill delayer (module docstring): new prompts wait while the ranks are mixed."""

    def __init__(self, config: EngineConfig, passes: int, idle: bool = False) -> None:
        super().__init__(config, idle)
        assert self.dp is not None
        self.ranks, self.passes = self.dp.ranks, passes
        self.delayed = 0                                 # steps in a row the delayer has held new prompts back
        self.delayed_steps = 0                           # over the run
        self.started = np.zeros(1024, dtype=bool)        # per request id: its prompt's computation has begun
        self.computing = np.zeros(0, dtype=bool)         # per batch row, this step: may take a prompt chunk

    def decoding(self, batch: Batch) -> tuple[np.ndarray, int]:
        ints = batch.ints
        pending, ranks = ints[PREFILL_LEFT] > 0, ints[RANK]
        under_way = pending & self.began(ints[RID])
        ready = np.bincount(ranks[pending & ~under_way], minlength=self.ranks) > 0
        decode = ~pending
        if ready.any() and not ready.all() and self.delayed < self.passes - 1 and (decode.any() or under_way.any()):
            self.delayed += 1
            self.delayed_steps += 1
            self.computing = under_way
        else:
            self.delayed = 0
            self.computing = pending
        held = self.waiting(decode, ranks, self.computing)
        return decode & ~held, int(np.count_nonzero(held))

    def chunks(self, batch: Batch, rows: Rows, per_request: int) -> np.ndarray:
        ints = batch.ints
        left = np.where(self.computing, ints[PREFILL_LEFT], 0)
        take = fifo_chunks(left, ints[RANK], np.full(self.ranks, self.chunk))
        self.mark(ints[RID][take > 0])
        return take

    def began(self, rids: np.ndarray) -> np.ndarray:
        if rids.size and int(rids.max()) >= self.started.size:
            self.started = np.concatenate([self.started, np.zeros(int(rids.max()) + 1, dtype=bool)])
        return self.started[rids]

    def mark(self, rids: np.ndarray) -> None:
        self.began(rids)
        self.started[rids] = True


def fifo_chunks(left: np.ndarray, ranks: np.ndarray | None, room: np.ndarray | int) -> np.ndarray:
    """Prompt tokens each row computes: its rank's room (one room without ranks) taken FIFO, rows in arrival order."""
    if ranks is None:
        return np.clip(room - (np.cumsum(left) - left), 0, left)
    if ranks_within(left, ranks, room):
        return left.copy()
    before = rank_cumsum(left, ranks) - left
    return np.clip(np.asarray(room)[ranks] - before, 0, left)


def step_load(batch: Batch, rows: Rows, take: np.ndarray | None, ranks: int, separate: bool) -> StepLoad:
    """The rank layout of a step that runs `rows` (decoding) and the prompt chunks `take`."""
    ints = batch.ints
    rank = ints[RANK]
    kv = batch.kv_tokens()
    running = np.zeros(batch.n, dtype=bool)
    running[rows.index] = True
    anchors = np.bincount(rank[running], minlength=ranks)
    zero = np.zeros(ranks, dtype=np.int64)
    context = np.bincount(rank[running], weights=kv[running], minlength=ranks)
    if take is None or not take.any():
        return StepLoad(anchors, zero, context, zero, zero, zero)
    chunk = np.bincount(rank, weights=take, minlength=ranks).astype(np.int64)
    chunk_context = np.bincount(rank, weights=np.where(take > 0, kv, 0), minlength=ranks)
    if separate:
        pairs = np.bincount(rank, weights=take * (take + 2.0 * kv), minlength=ranks)
        return StepLoad(anchors, zero, context, chunk, pairs, chunk_context)
    return StepLoad(anchors, chunk, context + chunk_context, zero, zero, zero)


class PhaseCounters:
    """What summary.json says of prefill steps and of the ranks' balance, summed over a run's steps."""

    def __init__(self) -> None:
        self.steps = self.prefill_steps = self.held_request_steps = 0
        self.step_ms = self.prefill_ms = self.held_request_ms = self.excess_ms = 0.0
        self.ranked_steps = 0
        self.busiest_over_mean = 0.0

    def add(self, load: StepLoad | None, held: int, step_ms: float, excess_ms: float) -> None:
        self.steps += 1
        self.step_ms += step_ms
        if load is None:
            return
        if load.prefilling:
            self.prefill_steps += 1
            self.prefill_ms += step_ms
        self.held_request_steps += held
        self.held_request_ms += held * step_ms
        if load.anchors.size > 1:
            tokens = load.anchors + load.fixed + load.prefill
            if tokens.any():
                self.ranked_steps += 1
                self.busiest_over_mean += float(tokens.max() / (tokens.sum() / tokens.size))   # np.mean costs ~8 us
                self.excess_ms += excess_ms

    def merge(self, other: PhaseCounters) -> PhaseCounters:
        out = PhaseCounters()
        for name, value in vars(self).items():
            setattr(out, name, value + getattr(other, name))
        return out

    def fields(self, ranks: int) -> dict[str, float | int]:
        """The summary's keys: prefill steps and the decode time held by them; with ranks, their imbalance."""
        out: dict[str, float | int] = {
            "engine_prefill_steps": self.prefill_steps,
            "engine_prefill_step_share": self.prefill_ms / self.step_ms if self.step_ms else 0.0,
            "decode_request_steps_held": self.held_request_steps,
            "decode_held_request_s": self.held_request_ms / 1000.0,
        }
        if ranks > 1:
            out["dp_busiest_over_mean_tokens"] = self.busiest_over_mean / self.ranked_steps if self.ranked_steps \
                else float("nan")
            out["dp_imbalance_share_of_step"] = self.excess_ms / self.step_ms if self.step_ms else 0.0
        return out
