"""A session corpus in numbers: turns, prompt growth, answers, tool gaps, subagents, prefix reuse.

`session_stats(traces)` summarises sessions read by specplan.traces.sessions
(percentiles p10 / p50 / p90 / p99 and the mean of each per-turn or
per-session figure); the generator's defaults (AgentxShape in
traces/spec.py) are fitted on its output for a real corpus: a lognormal's
median is the p50, its log-space sigma ln(p90 / p50) / 1.2816, its cap the
p99 (`lognormal_fit`).

    python -m specplan.traces.session_stats PATH [--format weka|mooncake|plain] [--block-tokens N]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from specplan.traces.sessions import (
    SESSION_FORMATS,
    Conversation,
    FanOut,
    SessionTrace,
    Turn,
    read_sessions,
)

Z90 = 1.2816   # the standard normal's 90th percentile


def percentiles(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    if not v.size:
        return {"n": 0}
    p10, p50, p90, p99 = np.percentile(v, [10, 50, 90, 99])
    return {"n": int(v.size), "mean": float(v.mean()), "p10": float(p10), "p50": float(p50), "p90": float(p90),
            "p99": float(p99)}


def lognormal_fit(stats: dict[str, float]) -> dict[str, float]:
    """(median, log-space sigma, cap) of a positive figure from its p50, p90 and p99."""
    if not stats.get("n") or stats["p50"] <= 0:
        return {}
    return {"median": stats["p50"], "sigma": math.log(stats["p90"] / stats["p50"]) / Z90, "max": stats["p99"]}


def session_stats(traces: Sequence[SessionTrace]) -> dict[str, Any]:
    """Per-session and per-turn figures of a corpus (the module docstring)."""
    main_turns: list[int] = []
    first_prompt: list[int] = []
    growth: list[int] = []
    output: list[int] = []
    gap: list[float] = []
    reuse: list[float] = []
    subagents: list[int] = []
    sub_turns: list[int] = []
    sub_prompt: list[int] = []
    sub_gap: list[float] = []
    widths: list[int] = []
    for trace in traces:
        turns = trace.root.turns()
        main_turns.append(len(turns))
        first_prompt.append(turns[0].prompt_tokens)
        per_turn(turns, growth, output, gap, reuse)
        fans = [item for item in trace.root.items if isinstance(item, FanOut)]
        children = [child for fan in fans for child in descendants(fan)]
        subagents.append(len(children))
        widths += [len(fan.children) for fan in fans]
        for child in children:
            child_turns = child.turns()
            sub_turns.append(len(child_turns))
            sub_prompt.append(child_turns[0].prompt_tokens)
            sub_gap += [t.gap_s for t in child_turns[1:]]
    with_sub = [n for n in subagents if n]
    return {"sessions": len(traces), "main_turns": percentiles(main_turns),
            "first_prompt_tokens": percentiles(first_prompt), "new_tokens_per_turn": percentiles(
                [g for g in growth if g > 0]), "shrinking_turn_share": float(np.mean([g < 0 for g in growth]))
            if growth else math.nan, "output_tokens": percentiles(output), "gap_s": percentiles(gap),
            "block_reuse": percentiles(reuse), "subagent_session_share": len(with_sub) / max(len(traces), 1),
            "subagents_per_subagent_session": float(np.mean(with_sub)) if with_sub else 0.0,
            "fanout_width": percentiles(widths), "subagent_turns": percentiles(sub_turns),
            "subagent_first_prompt_tokens": percentiles(sub_prompt), "subagent_gap_s": percentiles(sub_gap)}


def per_turn(turns: list[Turn], growth: list[int], output: list[int], gap: list[float], reuse: list[float]) -> None:
    """A conversation's answers, and per later turn: tokens added to the last prompt and answer, the gap, and
    the share of its blocks the last prompt's blocks cover."""
    output += [t.output_tokens for t in turns]
    for before, after in pairwise(turns):
        growth.append(after.prompt_tokens - before.prompt_tokens - before.output_tokens)
        gap.append(after.gap_s)
        shared = leading_shared(before.blocks, after.blocks)
        reuse.append(shared / after.blocks.size if after.blocks.size else 0.0)


def leading_shared(a: np.ndarray, b: np.ndarray) -> int:
    n = min(a.size, b.size)
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def descendants(fan: FanOut) -> list[Conversation]:
    out = []
    for child in fan.children:
        out.append(child)
        for item in child.items:
            if isinstance(item, FanOut):
                out += descendants(item)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specplan.traces.session_stats", description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a session trace: a file, or a folder of weka JSON files")
    ap.add_argument("--format", choices=SESSION_FORMATS, default="weka")
    ap.add_argument("--block-tokens", type=int, default=None)
    args = ap.parse_args(argv)
    stats = session_stats(read_sessions(args.path, args.format, args.block_tokens))
    fits = {key: lognormal_fit(value) for key, value in stats.items() if isinstance(value, dict)}
    print(json.dumps({"stats": stats, "lognormal_fits": fits}, indent=1))


if __name__ == "__main__":
    main()
