"""A session workload's mean turn, for the run-size estimate (specplan.simulator.scenario.size).

Lanes are a closed system: each conversation sends its next turn after the
last answer and its (capped) tool gap, so what a lane asks of the engines
per second is set by the mean gap, the mean answer and how many of its
conversations run at once (a fan-out's subagents run together while their
parent waits). `session_load(spec, read_files)` gives those means:

    generated   from the AgentxShape: a clipped lognormal's mean is at most min(cap, median·e^{σ²/2});
                subagent sessions run `fanout_width_mean` conversations at once
    read        from the corpus itself (read only when `read_files`: every turn's answer and gap, the
                widest fan-out of each session)
    not read    None: the caller bounds the run without it

Gaps are capped as the lanes cap them (traces.sessions.capped_gap), so a
corpus of hour-long gaps under AgentX's 10 s cap counts 10 s at most.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from specplan.traces.sessions import Conversation, FanOut, SessionTrace, capped_gap, read_sessions
from specplan.traces.spec import AgentxShape, SessionArrivals


@dataclass(frozen=True)
class SessionLoad:
    """The mean turn of a session corpus: its answer, the tokens it adds to its prompt, the gap before it, and
    the conversations a lane runs at once (1 without subagents)."""

    output_tokens: float
    new_tokens: float
    gap_s: float
    conversations_per_lane: float


def session_load(spec: SessionArrivals, read_files: bool) -> SessionLoad | None:
    """The corpus's mean turn (module docstring); None for a trace when `read_files` is False."""
    if spec.generate is not None:
        return shape_load(spec.generate, spec.idle_gap_cap_s)
    if not read_files:
        return None
    return corpus_load(read_sessions(spec.path, spec.format, spec.block_tokens), spec.idle_gap_cap_s)


def lognormal_mean(median: float, sigma: float, cap: float) -> float:
    """An upper bound of the mean of a lognormal clipped at `cap`."""
    return min(cap, median * math.exp(sigma ** 2 / 2))


def shape_load(shape: AgentxShape, cap_s: float | None) -> SessionLoad:
    gap = lognormal_mean(shape.gap_median_s, shape.gap_sigma, shape.gap_max_s)
    concurrent = max(1.0, shape.fanout_width_mean) if shape.subagent_session_share > 0 else 1.0
    return SessionLoad(output_tokens=lognormal_mean(shape.output_median, shape.output_sigma, shape.output_max),
                       new_tokens=lognormal_mean(shape.new_tokens_median, shape.new_tokens_sigma,
                                                 shape.new_tokens_max),
                       gap_s=gap if cap_s is None else min(gap, cap_s), conversations_per_lane=concurrent)


def corpus_load(traces: Sequence[SessionTrace], cap_s: float | None) -> SessionLoad:
    chains = [conversation.turns() for trace in traces for conversation in conversations(trace.root)]
    turns = [turn for chain in chains for turn in chain]
    if not turns:
        return SessionLoad(1.0, 1.0, 0.0, 1.0)
    added = [max(0, turn.prompt_tokens - last.prompt_tokens - last.output_tokens)
             for chain in chains for last, turn in pairwise(chain)]
    gaps = [capped_gap(turn.gap_s, last_api_s, cap_s) for chain in chains
            for last_api_s, turn in zip([0.0, *(t.api_s for t in chain)], chain, strict=False)]
    widths = [max((len(f.children) for f in fan_outs(trace.root)), default=1) for trace in traces]
    return SessionLoad(output_tokens=sum(t.output_tokens for t in turns) / len(turns),
                       new_tokens=sum(added) / len(added) if added else 0.0,
                       gap_s=sum(gaps) / len(gaps), conversations_per_lane=sum(widths) / len(widths))


def conversations(conversation: Conversation) -> Iterator[Conversation]:
    """A conversation and every subagent conversation under it."""
    yield conversation
    for item in conversation.items:
        if isinstance(item, FanOut):
            for child in item.children:
                yield from conversations(child)


def fan_outs(conversation: Conversation) -> Iterator[FanOut]:
    for item in conversation.items:
        if isinstance(item, FanOut):
            yield item
            for child in item.children:
                yield from fan_outs(child)
