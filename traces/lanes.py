"""The lanes protocol: agent sessions replayed on N lanes for a fixed time, as AgentX runs them.

The engine's workload (specplan.simulator.engine.cluster.workload) calls `start_lanes`
for `workload.arrivals: {kind: sessions}`. What runs (SessionArrivals in
traces/spec.py; aiperf's agentx-mvp tutorial and the InferenceX launchers
describe the benchmark this follows):

    lanes     `lanes` processes, each playing one session tree at a time; the sessions are
              drawn by a shuffled sampler that plays every session once before any twice
    warm-up   a lane's first session starts at turn k, a share of its main turns drawn
              uniformly in [start_min, start_max] (leaving at least one turn to measure); turn k
              is sent with its whole prefix, then `warmup_turns` one-token turns with no gap
    barrier   when every lane's warm-up is done, the measured window opens; it lasts
              horizon.duration_s, and no turn is sent after it
    replay    a turn is sent after the previous answer and its gap (end to start), the
              recorded start-to-start gap capped at idle_gap_cap_s (so the gap after a turn of
              recorded server time a is min(gap, max(0, cap − a)));
              a fan-out starts its subagents together, each from its first turn's gap; the
              parent's next turn waits for all of them (the join); a tree ends when its root
              and every subagent are done
    recycle   a lane whose tree ended draws the next session, from turn 0
    cache bust  `first_turn`: each play's block ids are its own (the session's shared system
              and tool prefix excepted), so replaying a session never finds its own earlier
              play in a cache; `none`: plays of a session share every block

Every submitted turn carries its blocks (namespaced ids) and a routing key
(its conversation in its play) for session-sticky routing. Random draws
come from the scenario's named streams: `sessions.order` (the sampler),
`sessions.start` (each lane's start share); a generated corpus from
`sessions.generate`, so each seed of a study generates its own corpus
(`seeds_play` says so in a plan) while a corpus read from a path is the same
for every seed. Each play is recorded (`PlayRecord`) for the job-level
figures (`session_fields`): a session's wall time and its tokens per
second, over plays that ran whole (from turn 0) inside the window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from specplan.traces.agentic import generate_sessions
from specplan.traces.agentx_corpus import corpus_match_text
from specplan.traces.errors import TraceError
from specplan.traces.sessions import (
    Conversation,
    FanOut,
    SessionTrace,
    Turn,
    capped_gap,
    read_sessions,
)
from specplan.traces.spec import SessionArrivals

Streams = Callable[..., np.random.Generator]
Submit = Callable[..., simpy.Event]   # (prompt, output, domain, blocks, key) -> done event
NAMESPACE_BITS = 32


def load_corpus(spec: SessionArrivals, streams: Streams) -> list[SessionTrace]:
    """The sessions the lanes draw from: read from `path`, or generated from the scenario's seed."""
    if spec.generate is not None:
        return generate_sessions(spec.generate, streams("sessions.generate"))
    return read_sessions(spec.path, spec.format, spec.block_tokens)


@dataclass
class PlayRecord:
    """One play of a session on a lane: when it started and ended, from which turn, what it sent."""

    lane: int
    session: str
    start_s: float
    first_turn: int            # 0: played whole; > 0: a lane's first play, started after its warm-up
    end_s: float = math.nan    # when its whole tree was done (NaN: still running at the end)
    turns: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0


class Sampler:
    """Sessions in shuffled rounds: every session once before any twice (`sessions.order`)."""

    def __init__(self, count: int, rng: np.random.Generator) -> None:
        self.count, self.rng = count, rng
        self.order: list[int] = []

    def next(self) -> int:
        if not self.order:
            self.order = self.rng.permutation(self.count).tolist()[::-1]
        return self.order.pop()


class Play:
    """A session being played: its block namespace, its record, the routing keys of its conversations."""

    def __init__(self, lanes: Lanes, trace: SessionTrace, index: int, number: int, record: PlayRecord) -> None:
        self.trace, self.record, self.number = trace, record, number
        bust = lanes.spec.cache_bust == "first_turn"
        self.namespace = np.int64((number + 1 if bust else (1 << 30) + index) << NAMESPACE_BITS)
        self.shared_namespace = np.int64(((1 << 30) + index) << NAMESPACE_BITS)
        first = trace.root.turns()[0].blocks
        self.shared = first[: trace.shared_prefix_tokens // trace.block_tokens] if bust else first[:0]
        self.keys: dict[str, int] = {}
        self.domain = 0

    def blocks(self, turn: Turn) -> np.ndarray:
        ids = turn.blocks | self.namespace
        if self.shared.size:
            head = min(self.shared.size, turn.blocks.size)
            same = turn.blocks[:head] == self.shared[:head]
            ids[:head][same] = turn.blocks[:head][same] | self.shared_namespace
        return ids   # int64: a request's blocks are kept until the run ends (8 bytes each, not a list's ~36)

    def key(self, conversation: Conversation) -> int:
        """A stable key per conversation of this play (the sticky router hashes it)."""
        return self.keys.setdefault(conversation.id, (self.number << 16) + len(self.keys))


class Lanes:
    """The lanes' SimPy processes and what they record (the module docstring)."""

    def __init__(self, env: simpy.Environment, spec: SessionArrivals, corpus: Sequence[SessionTrace],
                 streams: Streams, submit: Submit, domain: Callable[[], int], duration_s: float) -> None:
        self.env, self.spec, self.corpus, self.submit, self.domain = env, spec, corpus, submit, domain
        self.duration_s = duration_s
        self.sampler = Sampler(len(corpus), streams("sessions.order"))
        self.start_draws = streams("sessions.start").uniform(spec.start_min, spec.start_max, spec.lanes)
        self.plays: list[PlayRecord] = []
        self.window_start_s: float | None = None
        self.end = env.event()
        self.warming = spec.lanes
        self.barrier = env.event()
        self.running = spec.lanes
        check_warmable(corpus, spec)

    def start(self) -> None:
        for lane in range(self.spec.lanes):
            self.env.process(self.lane(lane))

    def open(self) -> bool:
        """Whether a turn may still be sent: the warm-up, or the measured window before its end."""
        return not self.end.triggered

    # ---- one lane ---------------------------------------------------------------------------------------------
    def lane(self, lane: int) -> Generator[simpy.Event, Any, None]:
        first = True
        while self.open():
            index = self.next_session(first)
            trace = self.corpus[index]
            start = self.start_turn(trace, lane) if first else 0
            play = self.new_play(lane, trace, index, start)
            if first:
                yield from self.warm_up(play, start)
                first = False
                start += 1 + self.spec.warmup_turns
            yield from self.conversation(play, trace.root, start)
            play.record.end_s = self.env.now
            if not self.spec.recycle:
                break
        self.running -= 1
        if self.running == 0 and not self.end.triggered:
            self.end.succeed()   # every lane is done before the window's end: it ends here

    def next_session(self, first: bool) -> int:
        """The sampler's next session (a lane's first one must be long enough to warm up and then measure)."""
        for _ in range(2 * len(self.corpus)):
            index = self.sampler.next()
            if not first or warmable(self.corpus[index], self.spec):
                return index
        raise AssertionError("check_warmable guarantees a session long enough")

    def start_turn(self, trace: SessionTrace, lane: int) -> int:
        """Turn k, a drawn share of the root's turns, leaving the warm-up turns and one turn to measure."""
        turns = len(trace.root.turns())
        last = turns - 2 - self.spec.warmup_turns
        return min(int(self.start_draws[lane] * turns), last)

    def new_play(self, lane: int, trace: SessionTrace, index: int, first_turn: int) -> Play:
        record = PlayRecord(lane, trace.id, self.env.now, first_turn)
        self.plays.append(record)
        play = Play(self, trace, index, len(self.plays), record)
        play.domain = self.domain()
        return play

    # ---- warm-up and the barrier ------------------------------------------------------------------------------
    def warm_up(self, play: Play, start: int) -> Generator[simpy.Event, Any, None]:
        """Turn `start` with its whole prefix, then the one-token warm-up turns; then wait for every lane."""
        turns = play.trace.root.turns()
        yield self.send(play, play.trace.root, turns[start])
        for turn in turns[start + 1: start + 1 + self.spec.warmup_turns]:
            yield self.send(play, play.trace.root, turn, output=1)
        self.warming -= 1
        if self.warming == 0:
            self.window_start_s = self.env.now
            self.barrier.succeed()
            self.env.process(self.close_window())
        yield self.barrier

    def close_window(self) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(self.duration_s)
        if not self.end.triggered:
            self.end.succeed()

    # ---- a conversation: turns, fan-outs, joins ----------------------------------------------------------------
    def conversation(self, play: Play, conversation: Conversation,
                     start_turn: int = 0) -> Generator[simpy.Event, Any, None]:
        """Its turns from `start_turn` (earlier fan-outs skipped), each after its gap and its joins."""
        pending: list[simpy.Process] = []
        previous_api_s = 0.0
        seen = 0
        for item in conversation.items:
            if isinstance(item, FanOut):
                if seen >= start_turn:
                    pending += [self.env.process(self.conversation(play, child)) for child in item.children]
                continue
            seen += 1
            if seen <= start_turn:
                continue
            if pending:
                yield simpy.AllOf(self.env, pending)
                pending = []
            gap_s = capped_gap(item.gap_s, previous_api_s, self.spec.idle_gap_cap_s)
            if gap_s > 0:
                yield self.env.timeout(gap_s)
            if not self.open():
                break
            yield self.send(play, conversation, item)
            previous_api_s = item.api_s
        if pending:
            yield simpy.AllOf(self.env, pending)

    def send(self, play: Play, conversation: Conversation, turn: Turn, output: int | None = None) -> simpy.Event:
        record = play.record
        record.turns += 1
        record.prompt_tokens += turn.prompt_tokens
        record.output_tokens += turn.output_tokens if output is None else output
        return self.submit(turn.prompt_tokens, turn.output_tokens if output is None else output, play.domain,
                           play.blocks(turn), play.key(conversation))


def seeds_play(spec: SessionArrivals) -> str:
    """What each seed plays of a session workload, in words: what an interval over seeds covers. A generated
    corpus is drawn from the seed (`sessions.generate`), so each seed plays its own sessions; a corpus read from
    a path is the same for every seed."""
    if spec.generate is not None:
        return (f"each seed generates its own corpus of {spec.generate.sessions} sessions and draws its own session "
                "order and lanes' start turns, so the interval covers the sessions too (variants at one seed play "
                f"the same corpus); {corpus_match_text(spec.generate)}")
    return (f"every seed plays the same sessions ({spec.path}), in its own order and from its own start turns, so "
            "the interval covers which sessions the lanes play and when, and the simulator's own draws, not the "
            "corpus")


def warmable(trace: SessionTrace, spec: SessionArrivals) -> bool:
    return len(trace.root.turns()) >= 2 + spec.warmup_turns


def check_warmable(corpus: Sequence[SessionTrace], spec: SessionArrivals) -> None:
    if not corpus:
        raise TraceError(f"{spec.path or 'generate'}: no sessions")
    if not any(warmable(trace, spec) for trace in corpus):
        raise TraceError(f"{spec.path or 'generate'}: no session has the {2 + spec.warmup_turns} main turns a lane "
                         f"needs (one to warm up, warmup_turns {spec.warmup_turns}, one to measure)")


def start_lanes(env: simpy.Environment, spec: SessionArrivals, streams: Streams, submit: Submit,
                domain: Callable[[], int], duration_s: float) -> Lanes:
    """Load the sessions and start the lanes; the returned `Lanes` holds the window and the plays."""
    lanes = Lanes(env, spec, load_corpus(spec, streams), streams, submit, domain, duration_s)
    lanes.start()
    return lanes


def session_fields(lanes: Lanes, window_end_s: float) -> dict[str, Any]:
    """Job-level figures over the plays that ran whole inside the window (from turn 0, started after the
    barrier, ended by its end): a session's wall time and its output tokens per second of wall time."""
    start = lanes.window_start_s if lanes.window_start_s is not None else math.inf
    whole = [p for p in lanes.plays if p.first_turn == 0 and p.start_s >= start and p.end_s <= window_end_s]
    wall = np.array([p.end_s - p.start_s for p in whole])
    rate = np.array([p.output_tokens / w for p, w in zip(whole, wall, strict=True) if w > 0])
    return {
        "session_lanes": lanes.spec.lanes,
        "session_window_start_s": lanes.window_start_s,
        "sessions_started": len(lanes.plays),
        "sessions_completed": len(whole),
        "session_wall_mean_s": float(wall.mean()) if wall.size else math.nan,
        "session_wall_p50_s": float(np.percentile(wall, 50)) if wall.size else math.nan,
        "session_wall_p90_s": float(np.percentile(wall, 90)) if wall.size else math.nan,
        "session_output_tokens_per_s_mean": float(rate.mean()) if rate.size else math.nan,
        "session_output_tokens_per_s_p50": float(np.percentile(rate, 50)) if rate.size else math.nan,
        "session_turns_mean": float(np.mean([p.turns for p in whole])) if whole else math.nan,
    }
