"""One engine step as an engine's scheduler sees it, per attention rank: what the mode rules read.

The decode core builds a `StepShape` per step (phase 2: from its `StepLoad`)
and a `ModeSetup` once per deployment (capture list, all-to-all backend,
model family); an engine's `ExecutionRule` (specplan.engines.modes) turns the
pair into the step's execution mode. Both are engine-neutral: no field names
an engine, and the same shape means the same work under every row.

    shape = StepShape(decode_requests=(16, 16, 0, 16), verify_tokens=(32, 32, 0, 32),
                      prefill_tokens=(0, 0, 4096, 0), query_tokens=2)
    setup = ModeSetup(model="deepseek-v4", capture=(1, 2, ..., 64), all_to_all="deepep")

A rank with no tokens is idle (it runs an idle batch to meet the others in
the MoE all-to-all). `query_tokens` is 1 + k: what a decoding request
verifies in a uniform step (1 without speculation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specplan.errors import SpecplanError

ModelFamily = Literal["dense", "moe", "deepseek-v4"]
AllToAllBackend = Literal["none", "deepep", "megamoe"]
DeepEPMode = Literal["auto", "normal", "low_latency"]
MODEL_FAMILIES = ("dense", "moe", "deepseek-v4")
ALL_TO_ALL_BACKENDS = ("none", "deepep", "megamoe")
DEEPEP_MODES = ("auto", "normal", "low_latency")


@dataclass(frozen=True)
class StepShape:
    """One step per attention rank: decoding requests, the tokens they verify, prompt tokens computed.

    `verify_tokens[r]` counts rank r's decode tokens (anchors and drafts); `prefill_tokens[r]`
    its prompt tokens, an extend batch of its own (SGLang) or chunks mixed into the step (vLLM).
    """

    decode_requests: tuple[int, ...]
    verify_tokens: tuple[int, ...]
    prefill_tokens: tuple[int, ...]
    query_tokens: int = 1

    def __post_init__(self) -> None:
        columns = (self.decode_requests, self.verify_tokens, self.prefill_tokens)
        if not self.decode_requests or len({len(c) for c in columns}) != 1:
            raise SpecplanError("a step shape needs one decode, verify and prefill count per rank "
                                f"(got {', '.join(str(len(c)) for c in columns)})")
        if min(min(c) for c in columns) < 0 or self.query_tokens < 1:
            raise SpecplanError("a step shape's counts are non-negative and query_tokens is at least 1")
        if any(v < d for v, d in zip(self.verify_tokens, self.decode_requests, strict=True)):
            raise SpecplanError("a decoding request verifies at least its anchor token (verify_tokens >= "
                                "decode_requests on every rank)")
        if not any(self.tokens):
            raise SpecplanError("a step shape with no token on any rank is not a step")

    @property
    def ranks(self) -> int:
        return len(self.decode_requests)

    @property
    def tokens(self) -> tuple[int, ...]:
        """Each rank's tokens in the forward: decode and prompt."""
        return tuple(v + p for v, p in zip(self.verify_tokens, self.prefill_tokens, strict=True))

    @property
    def extending(self) -> bool:
        """Whether any rank computes prompt tokens this step."""
        return any(self.prefill_tokens)

    def active(self, rank: int) -> bool:
        return self.tokens[rank] > 0

    def uniform_decode(self, rank: int) -> bool:
        """Rank `rank` only decodes, every request verifying exactly `query_tokens` tokens."""
        requests = self.decode_requests[rank]
        return (self.prefill_tokens[rank] == 0 and requests > 0
                and self.verify_tokens[rank] == requests * self.query_tokens)


@dataclass(frozen=True)
class ModeSetup:
    """A deployment's facts a mode rule reads: model family, capture list, all-to-all backend.

    `capture`: the captured sizes per rank on the engine's axis (requests for SGLang and
    TensorRT-LLM, tokens for vLLM; () when graphs are off: --disable-cuda-graph,
    --enforce-eager). `max_requests`: a rank's request slots (vLLM's full decode graphs
    reach max_num_seqs x (1 + k) tokens; 0: not bounded). `breakable`: the engine may
    capture a piecewise (breakable) graph of a model it cannot compile (vLLM's
    VLLM_USE_BREAKABLE_CUDAGRAPH, auto-enabled for DeepSeek-V4).
    """

    model: ModelFamily
    capture: tuple[int, ...]
    all_to_all: AllToAllBackend = "none"
    deepep_mode: DeepEPMode = "auto"
    max_requests: int = 0
    breakable: bool = True

    def __post_init__(self) -> None:
        for name, value, known in (("model", self.model, MODEL_FAMILIES),
                                   ("all_to_all", self.all_to_all, ALL_TO_ALL_BACKENDS),
                                   ("deepep_mode", self.deepep_mode, DEEPEP_MODES)):
            if value not in known:
                raise SpecplanError(f"mode setup: unknown {name} '{value}' (known: {', '.join(known)})")
        if any(size < 1 for size in self.capture) or self.max_requests < 0:
            raise SpecplanError("mode setup: captured sizes are positive and max_requests is not negative")

    @property
    def graphs(self) -> bool:
        return bool(self.capture)

    @property
    def largest(self) -> int:
        return max(self.capture)

    def pad(self, size: int) -> int:
        """The smallest captured size at or above `size` (call only when size <= largest)."""
        return min(s for s in self.capture if s >= size)
