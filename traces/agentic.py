"""AgentX-shaped sessions, generated: the statistics of real coding-agent traces, no real trace shipped.

`generate_sessions(shape, rng)` draws `shape.sessions` sessions (specplan.traces.sessions'
data model) from an `AgentxShape` (traces/spec.py): per session a number
of main-agent turns, a first prompt that starts with the shared system and
tool prefix, then per turn the tokens it adds to the previous prompt and
answer, its answer and the tool gap before it; with probability
`subagent_session_share` the session spawns subagents, in fan-outs of
1 + Poisson width after uniformly chosen parent turns, each a conversation
of its own (its own first prompt, turns and gaps) that the parent's next
turn joins. Block ids are derived as the Weka traces hash them: a prompt's
full blocks, each turn's extending the last.

Where each default comes from (docs/guides/agentic.md lists them): the
lengths, gaps and turn counts are fitted (median and the 90th percentile,
capped at the 99th) on the 710 stored traces of callanjfox/kv-cache-tester
(Apache-2.0, real Claude Code sessions in the Weka format) with
`session_stats`; the subagent rates on the AgentX corpus's published
counts (SemiAnalysisAI/InferenceX issue #1632: 472 traces, 137 with
subagents, 1,053 subagents, 27,504 subagent requests). Every draw comes
from the generator passed in (the scenario's named stream).

    python -m specplan.traces.agentic --out DIR [--sessions N --seed S --turns-median T ...]

writes the sessions as Weka JSON files (the shipped fixture was made so).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from specplan.traces.sessions import Conversation, FanOut, SessionTrace, Turn
from specplan.traces.spec import AgentxShape

Draw = Callable[..., np.ndarray]


class Lengths:
    """Lognormal draws (median, log-space sigma) rounded and clipped to [low, high]."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def draw(self, median: float, sigma: float, high: float, size: int, low: float = 1) -> np.ndarray:
        values = median * np.exp(sigma * self.rng.standard_normal(size))
        return np.clip(np.rint(values), low, high)


class BlockCounter:
    """A session's block ids: each conversation takes a run of fresh ids; its prompts are prefixes of the run
    (a prompt only grows, so its blocks extend the last prompt's)."""

    def __init__(self) -> None:
        self.next_id = 0

    def take(self, count: int) -> np.ndarray:
        start, self.next_id = self.next_id, self.next_id + count
        return np.arange(start, start + count, dtype=np.int64)


def generate_sessions(shape: AgentxShape, rng: np.random.Generator) -> list[SessionTrace]:
    """`shape.sessions` sessions drawn from `rng` (the module docstring)."""
    return [generate_session(f"agentx-{i:04d}", shape, rng) for i in range(shape.sessions)]


def generate_session(name: str, shape: AgentxShape, rng: np.random.Generator) -> SessionTrace:
    draw = Lengths(rng).draw
    counter = BlockCounter()
    turns = int(draw(shape.turns_median, shape.turns_sigma, shape.turns_max, 1)[0])
    first = max(int(draw(shape.first_prompt_median, shape.first_prompt_sigma, shape.first_prompt_max, 1)[0]),
                shape.shared_prefix_tokens + 1)
    gaps = (shape.gap_median_s, shape.gap_sigma, shape.gap_max_s)
    main = conversation_turns(name, turns, first, gaps, shape, draw, counter)
    items: list[Turn | FanOut] = list(main)
    if turns > 1 and rng.random() < shape.subagent_session_share:
        items = with_fanouts(name, main, shape, rng, draw, counter)
    prefix = min(shape.shared_prefix_tokens, first)
    return SessionTrace(name, shape.block_tokens, Conversation(name, tuple(items)), prefix)


def conversation_turns(name: str, turns: int, first: int, gaps: tuple[float, float, float], shape: AgentxShape,
                       draw: Draw, counter: BlockCounter) -> list[Turn]:
    """One conversation's turns: prompts growing by the previous answer and new tokens, blocks extending; a prompt
    past `compact_at_tokens` is compacted (`compacted_prompts`) and its blocks start afresh after the shared
    system and tool prefix."""
    new = draw(shape.new_tokens_median, shape.new_tokens_sigma, shape.new_tokens_max, turns)
    output = draw(shape.output_median, shape.output_sigma, shape.output_max, turns)
    gap = draw(gaps[0], gaps[1], gaps[2], turns, low=0) if gaps[0] > 0 else np.zeros(turns)
    growth = np.zeros(turns)
    growth[1:] = output[:-1] + new[1:]
    prompts, segments = compacted_prompts(first, growth, shape)
    blocks = segment_blocks(prompts, segments, shape, counter)
    return [Turn(int(prompts[i]), int(output[i]), blocks[i], 0.0 if i == 0 else float(gap[i])) for i in range(turns)]


def compacted_prompts(first: int, growth: np.ndarray, shape: AgentxShape) -> tuple[np.ndarray, np.ndarray]:
    """(prompt tokens, compaction segment) per turn: the prompt grows by `growth`; once it passes
    `compact_at_tokens` the agent compacts its context to `compacted_tokens` and grows from there, so a prompt
    u tokens past the first reads compacted + (u − cap) mod (cap − compacted), segment 1 + (u − cap) div (cap −
    compacted) (Claude Code's auto-compaction near its context window)."""
    grown = first + np.cumsum(growth).astype(np.int64)
    cap, floor = shape.compact_at_tokens, shape.compacted_tokens
    if cap is None or cap <= floor:
        return grown, np.zeros(len(grown), dtype=np.int64)
    past = grown - cap
    period = cap - floor
    over = past > 0
    segments = np.where(over, 1 + (past - 1) // period, 0)
    prompts = np.where(over, floor + 1 + (past - 1) % period, grown)
    return prompts.astype(np.int64), segments.astype(np.int64)


def segment_blocks(prompts: np.ndarray, segments: np.ndarray, shape: AgentxShape,
                   counter: BlockCounter) -> list[np.ndarray]:
    """Each turn's block ids: a prefix of its segment's run; a compacted segment keeps the shared prefix's
    blocks (the system prompt and tools) and takes fresh ids after them."""
    size = shape.block_tokens
    kept = shape.shared_prefix_tokens // size
    runs: list[np.ndarray] = []
    for segment in range(int(segments[-1]) + 1):
        longest = int(prompts[segments == segment].max()) // size if np.any(segments == segment) else 0
        if segment == 0:
            runs.append(counter.take(longest))
        else:
            head = runs[0][: min(kept, longest)]
            runs.append(np.concatenate([head, counter.take(longest - len(head))]))
    return [runs[int(segments[i])][: int(prompts[i]) // size] for i in range(len(prompts))]


def with_fanouts(name: str, main: list[Turn], shape: AgentxShape, rng: np.random.Generator, draw: Draw,
                 counter: BlockCounter) -> list[Turn | FanOut]:
    """The main turns with fan-outs of subagents after uniformly chosen turns (never after the last)."""
    count = int(rng.poisson(shape.subagents_mean))
    spawned: dict[int, list[Conversation]] = {}
    made = 0
    while made < count:
        width = min(1 + int(rng.poisson(shape.fanout_width_mean - 1)), count - made)
        after = int(rng.integers(0, len(main) - 1))
        for _ in range(width):
            spawned.setdefault(after, []).append(subagent(f"{name}/agent-{made:03d}", shape, draw, counter))
            made += 1
    items: list[Turn | FanOut] = []
    for i, turn in enumerate(main):
        items.append(turn)
        if i in spawned:
            items.append(FanOut(tuple(spawned[i])))
    return items


def subagent(name: str, shape: AgentxShape, draw: Draw, counter: BlockCounter) -> Conversation:
    turns = int(draw(shape.subagent_turns_median, shape.subagent_turns_sigma, shape.turns_max, 1)[0])
    first = int(draw(shape.subagent_prompt_median, shape.subagent_prompt_sigma, shape.first_prompt_max, 1)[0])
    gaps = (shape.subagent_gap_median_s, shape.subagent_gap_sigma, shape.gap_max_s)
    return Conversation(name, tuple(conversation_turns(name, turns, first, gaps, shape, draw, counter)))


# ---- the Weka format, written ---------------------------------------------------------------------------------


def weka_object(trace: SessionTrace) -> dict[str, object]:
    """A session as a Weka trace object (times from the gaps, no recorded server time)."""
    return {"id": trace.id, "models": ["generated"], "block_size": trace.block_tokens, "hash_id_scope": "local",
            "tool_tokens": 0, "system_tokens": trace.shared_prefix_tokens,
            "requests": weka_requests(trace.root.items, 0.0)[0]}


def weka_requests(items: Sequence[Turn | FanOut], t: float) -> tuple[list[dict[str, object]], float]:
    out: list[dict[str, object]] = []
    for item in items:
        if isinstance(item, FanOut):
            for child in item.children:
                requests, _ = weka_requests(child.items, t)
                out.append({"t": round(t, 3), "type": "subagent", "agent_id": child.id.rsplit("/", 1)[-1],
                            "subagent_type": "generated", "status": "completed", "requests": requests,
                            "models": ["generated"]})
            continue
        t += item.gap_s
        out.append({"t": round(t, 3), "type": "n", "model": "generated", "in": item.prompt_tokens,
                    "out": item.output_tokens, "hash_ids": item.blocks.tolist(), "think_time": round(item.gap_s, 3)})
    return out, t


def write_weka(traces: Sequence[SessionTrace], folder: Path) -> list[Path]:
    """One `<id>.json` per session, hash_ids on one line each."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for trace in traces:
        path = folder / f"{trace.id}.json"
        path.write_text(json.dumps(weka_object(trace), separators=(",", ":")) + "\n")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specplan.traces.agentic", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for the Weka JSON files")
    ap.add_argument("--seed", type=int, default=0, help="the generator's seed")
    for field in dataclasses.fields(AgentxShape):
        ap.add_argument("--" + field.name.replace("_", "-"), type=type(field.default), default=field.default,
                        help=field.metadata.get("doc", ""))
    args = ap.parse_args(argv)
    shape = AgentxShape(**{f.name: getattr(args, f.name) for f in dataclasses.fields(AgentxShape)})
    paths = write_weka(generate_sessions(shape, np.random.default_rng(args.seed)), args.out)
    print(f"wrote {len(paths)} sessions to {args.out}")


if __name__ == "__main__":
    main()
