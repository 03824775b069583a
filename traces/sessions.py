"""Session traces: conversations of turns, each prompt growing from the last, with subagents that fan out and join.

The first stage of session replay (lanes.py runs them in simulated time).
A `SessionTrace` is one recorded agent session: a root `Conversation` whose
items are `Turn`s (one model request each) and `FanOut`s (subagent
conversations spawned after the turn before it; the turn after it waits
for all of them: the join). A turn's prompt is the previous turn's prompt
and answer plus new tokens, so its block hashes extend the previous ones;
block ids are local to the trace (`hash_id_scope: local`).

Formats (`read_sessions(path, format, block_tokens)`):

- weka: the Weka / AgentX trace, one JSON object per conversation (a
  directory of `*.json`, a single `.json`, or `.jsonl` with one object per
  line): `id`, `block_size`, `hash_id_scope: local`, `tool_tokens`,
  `system_tokens` and `requests`, whose entries are turns (`type` `n` or
  `s`: `t`, `in`, `out`, `hash_ids`, `api_time`, `think_time`) and
  subagents (`type: subagent` with their own `requests`); the parent's next
  turn after a subagent entry joins it (aiperf's weka_trace_models: "the
  parent's next request occurs after this subagent completes");
- mooncake: JSON lines with `timestamp` (ms), `input_length`,
  `output_length`, `hash_ids` (blocks of `block_tokens`, 512 in Mooncake's
  traces) and optionally `session_id`, `parent` (the session a subagent
  belongs to) and `think_time` (s); without `session_id`, a line continues
  the session whose latest prompt's blocks its own blocks extend, else it
  opens a session. Rows record send times only, so without `think_time` the
  gap before a turn is the start-to-start delay;
- plain: JSON lines `{"session", "turn", "new_tokens", "output_tokens",
  "gap_s"}` (turns numbered 0, 1, ... in order), a subagent's turn 0 with
  `parent` and `after_turn` (the parent turn it fans out after); the
  prompt of turn n is turn n−1's prompt and answer plus `new_tokens`, and
  its blocks are derived (full blocks only, as the Weka traces hash them).

Refused, one line each (TraceError): a block list inconsistent with the
prompt's length (not ⌊in / block⌋ or ⌈in / block⌉ blocks), a subagent
joining an unknown parent, a session whose times or turn numbers go
backwards, a malformed field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from specplan.traces.errors import TraceError
from specplan.traces.readers import open_text

SESSION_FORMATS = ("weka", "mooncake", "plain")


class Turn(NamedTuple):
    """One model request: its prompt and answer, its prompt's block ids, the gap before it and its recorded
    server time (0 when unknown)."""

    prompt_tokens: int
    output_tokens: int
    blocks: np.ndarray          # int64 block ids, trace-local
    gap_s: float                # end-to-start delay before it (the tool's or the user's time)
    api_s: float = 0.0


class FanOut(NamedTuple):
    """Subagent conversations spawned together; the parent's next turn joins them."""

    children: tuple[Conversation, ...]


class Conversation(NamedTuple):
    id: str
    items: tuple[Turn | FanOut, ...]

    def turns(self) -> list[Turn]:
        return [item for item in self.items if isinstance(item, Turn)]


class SessionTrace(NamedTuple):
    """One recorded session: its root conversation, block size and the shared (system + tools) prefix."""

    id: str
    block_tokens: int
    root: Conversation
    shared_prefix_tokens: int = 0


def read_sessions(path: str, fmt: str, block_tokens: int | None = None) -> list[SessionTrace]:
    """Every session of a trace (file or folder), in file order; TraceError on bad input."""
    if fmt == "weka":
        return read_weka(path)
    if fmt == "mooncake":
        return read_mooncake(path, block_tokens or 512)
    if fmt == "plain":
        return read_plain(path, block_tokens or 64)
    raise TraceError(f"{path}: unknown session format '{fmt}' (valid: {', '.join(SESSION_FORMATS)})")


def capped_gap(gap_s: float, previous_api_s: float, cap_s: float | None) -> float:
    """The end-to-start gap after capping the recorded start-to-start gap (previous server time + gap) at cap_s."""
    if cap_s is None:
        return gap_s
    return min(gap_s, max(0.0, cap_s - previous_api_s))


# ---- checks shared by the formats -------------------------------------------------------------------------------


def check_blocks(where: str, prompt: int, blocks: np.ndarray, block_tokens: int) -> None:
    low, high = prompt // block_tokens, math.ceil(prompt / block_tokens)
    if not low <= blocks.size <= high:
        raise TraceError(f"{where}: {blocks.size} blocks for a {prompt}-token prompt of {block_tokens}-token "
                         f"blocks (expected {low}" + ("" if low == high else f" or {high}") + ")")


def tokens(value: Any, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise TraceError(f"{where}: {what} {value!r} is not a whole number >= 0")
    return int(value)


def seconds(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: {what} {value!r} is not a number of seconds >= 0")
    return float(value)


def block_ids(value: Any, where: str) -> np.ndarray:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TraceError(f"{where}: hash_ids must be a list of integers")
    return np.asarray(value, dtype=np.int64)


def json_objects(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, object) for each JSON line of a file, skipping blank lines."""
    with open_text(path) as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            where = f"{path}:{number}"
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{where}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise TraceError(f"{where}: expected a JSON object")
            yield where, obj


def field(obj: dict[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise TraceError(f"{where}: no '{key}'")
    return obj[key]


# ---- weka ---------------------------------------------------------------------------------------------------------


def read_weka(path: str) -> list[SessionTrace]:
    root = Path(path)
    if root.is_dir():
        files = sorted(root.glob("*.json"))
        if not files:
            raise TraceError(f"{path}: no *.json session files in the folder")
        return [weka_session(load_json(str(f)), str(f)) for f in files]
    if path.endswith((".jsonl", ".jsonl.gz")):
        return [weka_session(obj, where) for where, obj in json_objects(path)]
    return [weka_session(load_json(path), path)]


def load_json(path: str) -> dict[str, Any]:
    with open_text(path) as handle:
        try:
            obj = json.load(handle)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(obj, dict):
        raise TraceError(f"{path}: expected one JSON object per conversation")
    return obj


def weka_session(obj: dict[str, Any], where: str) -> SessionTrace:
    block = field(obj, "block_size", where)
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise TraceError(f"{where}: block_size {block!r} is not a positive integer")
    scope = obj.get("hash_id_scope", "local")
    if scope != "local":
        raise TraceError(f"{where}: hash_id_scope '{scope}' is not supported (local: block ids per trace)")
    requests = field(obj, "requests", where)
    name = str(field(obj, "id", where))
    conversation = weka_conversation(name, requests, block, where)
    if not conversation.turns():
        raise TraceError(f"{where}: session '{name}' has no turns")
    shared = tokens(obj.get("tool_tokens", 0), where, "tool_tokens") + tokens(obj.get("system_tokens", 0), where,
                                                                             "system_tokens")
    return SessionTrace(name, block, conversation, shared)


def weka_conversation(name: str, requests: Any, block: int, where: str) -> Conversation:
    if not isinstance(requests, list):
        raise TraceError(f"{where}: '{name}' requests must be a list")
    items: list[Turn | FanOut] = []
    previous_t, previous_end = -math.inf, None
    for i, entry in enumerate(requests):
        at = f"{where}: {name} request {i}"
        if not isinstance(entry, dict):
            raise TraceError(f"{at}: expected an object")
        t = seconds(field(entry, "t", at), at, "t")
        if t < previous_t:
            raise TraceError(f"{at}: t {t:g} goes backwards (previous {previous_t:g}); sort the session by time")
        previous_t = t
        kind = entry.get("type", "n")
        if kind == "subagent":
            child = weka_conversation(f"{name}/{entry.get('agent_id', i)}", entry.get("requests", []), block, where)
            if child.turns():
                add_child(items, child)
            continue
        if kind not in ("n", "s"):
            raise TraceError(f"{at}: unknown request type {kind!r} (n, s or subagent)")
        turn = weka_turn(entry, t, previous_end, block, at)
        previous_end = t + turn.api_s
        items.append(turn)
    return Conversation(name, tuple(items))


def weka_turn(entry: dict[str, Any], t: float, previous_end: float | None, block: int, at: str) -> Turn:
    prompt = tokens(field(entry, "in", at), at, "in")
    output = tokens(field(entry, "out", at), at, "out")
    blocks = block_ids(entry.get("hash_ids", []), at)
    check_blocks(at, prompt, blocks, block)
    api = seconds(entry["api_time"], at, "api_time") if entry.get("api_time") is not None else 0.0
    if entry.get("think_time") is not None:
        gap = seconds(entry["think_time"], at, "think_time")
    else:
        gap = 0.0 if previous_end is None else max(0.0, t - previous_end)
    return Turn(prompt, max(output, 1), blocks, gap, api)


def add_child(items: list[Turn | FanOut], child: Conversation) -> None:
    """A subagent joins the fan-out right before it (adjacent subagents spawn together), or opens one."""
    if items and isinstance(items[-1], FanOut):
        items[-1] = FanOut((*items[-1].children, child))
    else:
        items.append(FanOut((child,)))


# ---- flat formats (mooncake, plain): rows grouped into conversations, subagents attached to parents ----------------


class FlatTurn(NamedTuple):
    time_s: float
    turn: Turn


class FlatConversation:
    """A conversation being read from a flat file: its turns, and its parent and the parent turn it follows."""

    def __init__(self, name: str, parent: str | None, after: int | None, where: str) -> None:
        self.name, self.parent, self.after, self.where = name, parent, after, where
        self.turns: list[FlatTurn] = []
        self.children: list[FlatConversation] = []


def assemble(conversations: dict[str, FlatConversation], block: int, path: str) -> list[SessionTrace]:
    """Attach each subagent to its parent, then build the sessions (the roots, in file order)."""
    for conv in conversations.values():
        if conv.parent is None:
            continue
        parent = conversations.get(conv.parent)
        if parent is None:
            raise TraceError(f"{conv.where}: subagent '{conv.name}' joins an unknown parent '{conv.parent}'")
        parent.children.append(conv)
    return [SessionTrace(c.name, block, nested(c)) for c in conversations.values() if c.parent is None]


def nested(conv: FlatConversation) -> Conversation:
    """Turns with each child's fan-out after the parent turn it follows (`after`, or the last turn sent before
    the child's first)."""
    after: dict[int, list[Conversation]] = {}
    for child in conv.children:
        index = child.after if child.after is not None else spawn_index(conv, child)
        if index >= len(conv.turns):
            raise TraceError(f"{child.where}: subagent '{child.name}' follows turn {index} of '{conv.name}', "
                             f"which has {len(conv.turns)} turns")
        after.setdefault(index, []).append(nested(child))
    items: list[Turn | FanOut] = []
    if -1 in after:
        items.append(FanOut(tuple(after[-1])))
    for i, flat in enumerate(conv.turns):
        items.append(flat.turn)
        if i in after:
            items.append(FanOut(tuple(after[i])))
    return Conversation(conv.name, tuple(items))


def spawn_index(parent: FlatConversation, child: FlatConversation) -> int:
    """The parent's last turn sent at or before the child's first (-1: before the parent's first)."""
    times = [t.time_s for t in parent.turns]
    return int(np.searchsorted(times, child.turns[0].time_s, side="right")) - 1


def read_mooncake(path: str, block: int) -> list[SessionTrace]:
    conversations: dict[str, FlatConversation] = {}
    chains: dict[tuple[int, ...], str] = {}   # a session's latest prompt blocks → its name (sessions without ids)
    for where, obj in json_objects(path):
        time_s = seconds(field(obj, "timestamp", where), where, "timestamp") / 1000.0
        prompt = tokens(field(obj, "input_length", where), where, "input_length")
        output = tokens(field(obj, "output_length", where), where, "output_length")
        blocks = block_ids(field(obj, "hash_ids", where), where)
        check_blocks(where, prompt, blocks, block)
        name = session_name(obj, blocks, chains, len(conversations))
        conv = conversations.get(name)
        if conv is None:
            parent = obj.get("parent")
            conv = conversations[name] = FlatConversation(name, None if parent is None else str(parent), None, where)
        previous = conv.turns[-1].time_s if conv.turns else None
        if previous is not None and time_s < previous:
            raise TraceError(f"{where}: session '{name}' goes back in time ({time_s:g} s after {previous:g} s); "
                             "sort each session by timestamp")
        gap = (seconds(obj["think_time"], where, "think_time") if obj.get("think_time") is not None
               else 0.0 if previous is None else time_s - previous)
        conv.turns.append(FlatTurn(time_s, Turn(prompt, max(output, 1), blocks, gap)))
        chains[tuple(blocks.tolist())] = name
    if not conversations:
        raise TraceError(f"{path}: no sessions in the trace")
    return assemble(conversations, block, path)


def session_name(obj: dict[str, Any], blocks: np.ndarray, chains: dict[tuple[int, ...], str], count: int) -> str:
    """The line's session: its `session_id`, else the session whose latest prompt its blocks extend."""
    if obj.get("session_id") is not None:
        return str(obj["session_id"])
    ids = tuple(blocks.tolist())
    for cut in range(len(ids), 0, -1):
        name = chains.get(ids[:cut])
        if name is not None:
            return name
    return f"session-{count}"


def read_plain(path: str, block: int) -> list[SessionTrace]:
    conversations: dict[str, FlatConversation] = {}
    state: dict[str, tuple[int, int, np.ndarray]] = {}   # per conversation: prompt, output, blocks of the last turn
    next_block: dict[str, int] = {}                      # per root session: the next free block id
    for where, obj in json_objects(path):
        name = str(field(obj, "session", where))
        number = tokens(field(obj, "turn", where), where, "turn")
        conv = conversations.get(name)
        if conv is None:
            conv = conversations[name] = plain_conversation(obj, name, where)
        if number != len(conv.turns):
            raise TraceError(f"{where}: session '{name}' turn {number} out of order (expected turn "
                             f"{len(conv.turns)}); list each session's turns in order")
        new = tokens(field(obj, "new_tokens", where), where, "new_tokens")
        output = max(tokens(field(obj, "output_tokens", where), where, "output_tokens"), 1)
        gap = seconds(obj.get("gap_s", 0.0), where, "gap_s")
        root = root_of(conversations, conv)
        prompt, blocks = grown_prompt(state.get(name), new, block, next_block, root)
        state[name] = (prompt, output, blocks)
        conv.turns.append(FlatTurn(float(number), Turn(prompt, output, blocks, gap)))
    if not conversations:
        raise TraceError(f"{path}: no sessions in the trace")
    return assemble(conversations, block, path)


def plain_conversation(obj: dict[str, Any], name: str, where: str) -> FlatConversation:
    parent = obj.get("parent")
    if parent is None:
        return FlatConversation(name, None, None, where)
    after = tokens(field(obj, "after_turn", where), where, "after_turn")
    return FlatConversation(name, str(parent), after, where)


def root_of(conversations: dict[str, FlatConversation], conv: FlatConversation) -> str:
    seen = 0
    while conv.parent is not None and conv.parent in conversations and seen < len(conversations):
        conv, seen = conversations[conv.parent], seen + 1
    return conv.name


def grown_prompt(last: tuple[int, int, np.ndarray] | None, new: int, block: int, next_block: dict[str, int],
                 root: str) -> tuple[int, np.ndarray]:
    """Turn n's prompt (turn n−1's prompt and answer plus `new` tokens) and its full blocks: the previous prompt's
    blocks, then fresh ids from the session's counter."""
    prompt, kept = (new, np.zeros(0, dtype=np.int64)) if last is None else (last[0] + last[1] + new, last[2])
    fresh = prompt // block - kept.size
    start = next_block.get(root, 0)
    next_block[root] = start + fresh
    return prompt, np.concatenate([kept, np.arange(start, start + fresh, dtype=np.int64)])
