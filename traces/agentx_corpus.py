"""The AgentX corpus's public statistics, and a session corpus's figures beside them.

InferenceX's AgentX benchmark replays SemiAnalysis's Claude Code traces
(`semianalysisai/cc-traces-weka-with-subagents-052726`, the corpus of its
MVP v0.2). The corpus itself sits on a model hub the project cannot reach;
its figures are public in SemiAnalysisAI/InferenceX issue #1632 (a full scan
of its traces.jsonl, 2026-06-04): 472 traces, 85,750 main-agent turns,
1,053 subagent groups, 27,504 subagent inner requests, 113,254 model
requests, 137 traces with subagents (335 of 472 peak at 0 concurrent
groups), and the requests by input + output tokens in six buckets
(`AGENTX_052726`; K is read as 1,024 tokens).

    figures = corpus_figures(traces)     the same statistics of sessions read or generated
    corpus_match_text(shape)             what a plan on generated sessions says of the match

Not public anywhere searched (the issue's percentile tables stop at the
header of its ISL summary): input and output tokens per request as
percentiles, the tool gaps, turns per session beyond their mean. The
generator's defaults for those stay kv-cache-tester's (docs/guides/agentic.md
lists every default, its source, and which corpus figure it is checked
against).
"""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import numpy as np

from specplan.traces.sessions import Conversation, FanOut, SessionTrace, Turn
from specplan.traces.spec import AgentxShape

TRACES, MAIN_TURNS, SUBAGENTS, SUBAGENT_REQUESTS, REQUESTS = 472, 85_750, 1_053, 27_504, 113_254
WITH_SUBAGENTS = 137
# input + output tokens of a request: (upper bound, requests in the bucket); the last bucket, > 1M (428
# requests, 0.4%), is too small to check at 10% and is left out
CONTEXT_BUCKETS = ((64 << 10, 13_624), (128 << 10, 30_622), (256 << 10, 34_509), (512 << 10, 23_189),
                   (1024 << 10, 10_882))
BUCKET_NAMES = ("context_le_64k_share", "context_64k_128k_share", "context_128k_256k_share",
                "context_256k_512k_share", "context_512k_1m_share")
SOURCE = "SemiAnalysisAI/InferenceX issue #1632 (cc-traces-weka-with-subagents-052726, full scan)"

AGENTX_052726: dict[str, float] = {
    "requests_per_session": REQUESTS / TRACES,
    "main_turns_per_session": MAIN_TURNS / TRACES,
    "subagent_request_share": SUBAGENT_REQUESTS / REQUESTS,
    "sessions_with_subagents_share": WITH_SUBAGENTS / TRACES,
    "subagents_per_session": SUBAGENTS / TRACES,
    "requests_per_subagent": SUBAGENT_REQUESTS / SUBAGENTS,
    **{name: count / REQUESTS for name, (_, count) in zip(BUCKET_NAMES, CONTEXT_BUCKETS, strict=True)},
}
TOLERANCE = 0.10   # the generator's defaults match every figure within this share of it


@dataclasses.dataclass
class Tally:
    """Counts over a corpus: main turns, subagent requests, subagents, sessions with any, request contexts."""

    main: int = 0
    sub: int = 0
    subagents: int = 0
    with_subagents: int = 0
    contexts: list[int] = dataclasses.field(default_factory=list)

    def add(self, conversation: Conversation, main: bool) -> None:
        for item in conversation.items:
            if isinstance(item, FanOut):
                self.subagents += len(item.children)
                for child in item.children:
                    self.add(child, False)
            else:
                self.count(item, main)

    def count(self, turn: Turn, main: bool) -> None:
        if main:
            self.main += 1
        else:
            self.sub += 1
        self.contexts.append(turn.prompt_tokens + turn.output_tokens)


def corpus_figures(traces: list[SessionTrace]) -> dict[str, float]:
    """`AGENTX_052726`'s statistics of `traces` (a corpus read or generated)."""
    tally = Tally()
    for trace in traces:
        before = tally.subagents
        tally.add(trace.root, True)
        tally.with_subagents += tally.subagents > before
    n, requests = len(traces), tally.main + tally.sub
    contexts = np.asarray(tally.contexts, dtype=float)
    edges = [0, *(bound for bound, _ in CONTEXT_BUCKETS)]
    shares = [float(np.mean((contexts > low) & (contexts <= high))) for low, high in pairwise(edges)]
    return {"requests_per_session": requests / n, "main_turns_per_session": tally.main / n,
            "subagent_request_share": tally.sub / requests, "sessions_with_subagents_share": tally.with_subagents / n,
            "subagents_per_session": tally.subagents / n,
            "requests_per_subagent": tally.sub / tally.subagents if tally.subagents else 0.0,
            **dict(zip(BUCKET_NAMES, shares, strict=True))}


def corpus_match_text(shape: AgentxShape) -> str:
    """What a plan on generated sessions says of their match to the AgentX corpus."""
    changed = [f.name for f in dataclasses.fields(AgentxShape)
               if f.name != "sessions" and getattr(shape, f.name) != f.default]
    checked = ("requests and main turns per session, the subagent share of requests, sessions with subagents, "
               "subagents per session, requests per subagent, the requests' input + output tokens in five buckets")
    if changed:
        return (f"generated sessions with {', '.join(changed)} changed: the AgentX corpus's figures ({checked}; "
                f"{SOURCE}) are matched by the defaults only")
    return (f"generated sessions match the AgentX corpus's public figures within {TOLERANCE:.0%} ({checked}; "
            f"{SOURCE}); output lengths and tool gaps are kv-cache-tester's, the corpus's not public")
