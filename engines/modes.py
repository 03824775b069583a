"""How an engine runs one step: a CUDA graph, a piecewise graph or eager, and which all-to-all mode.

Place in the data flow: an engine's row (specplan.engines.traits) carries an
`ExecutionRule` and an `AllToAllRule`; `step_mode(traits, shape, setup)`
answers for one step (`StepShape`, specplan.engines.steps) with a `StepMode`:
the mode, a reason code (`REASONS`), the captured size it replays and the
all-to-all mode. The decode core asks it per step (phase 2) and prices the
step by its mode (specplan.engines.eager).

    RankVote       SGLang (and TensorRT-LLM): every attention rank votes "I can replay my
                   decode graph" and the votes are min-reduced, so one rank with an extend
                   (prefill) batch sends every rank eager for that step; a decode step replays
                   the graph of max over ranks of its requests, padded to the capture list
    TokenDispatch  vLLM: per rank, FULL when the step is a uniform decode batch within the
                   capture list, PIECEWISE (attention eager, the rest replayed) when it is not,
                   NONE (eager) above the largest captured size; the ranks take the min mode

The all-to-all mode: DeepEP's `auto` resolves per step by whether any rank
extends (normal for an extend, low-latency for decode: SGLang's
`DeepEPMode.resolve`, its flag max-reduced over ranks); a fixed mode stays;
MegaMoE fuses dispatch, experts and combine in one kernel in every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from specplan.engines.steps import AllToAllBackend, DeepEPMode, ModelFamily, ModeSetup, StepShape
from specplan.errors import SpecplanError

Mode = Literal["graph", "piecewise", "eager", "unmodelled"]   # unmodelled: no capture list to decide by
AllToAllMode = Literal["none", "low_latency", "normal", "megamoe"]
MODE_ORDER: dict[Mode, int] = {"eager": 0, "piecewise": 1, "graph": 2}   # vLLM's NONE < PIECEWISE < FULL
MODES: tuple[Mode, ...] = ("graph", "piecewise", "eager", "unmodelled")
ALL_TO_ALL_MODES: tuple[AllToAllMode, ...] = ("none", "low_latency", "normal", "megamoe")

REASONS = {
    "decode_graph": "a decode batch within the capture list replayed its graph",
    "rank_prefilling": "a rank was prefilling, so every rank ran eager (the ranks' graph votes are min-reduced)",
    "v4_prefill_eager": "DeepSeek-V4 prefill runs eager under DP attention or an all-to-all backend",
    "prefill_eager": "a prefill (extend) batch runs eager in this engine version",
    "above_capture": "the step was above the largest captured size",
    "graphs_off": "CUDA graphs were off for this deployment",
    "deepep_normal": "DeepEP's normal mode cannot be captured, so decode ran eager",
    "mixed_piecewise": "prompt tokens in the step: a piecewise graph with attention eager",
    "ragged_piecewise": "requests verified different numbers of tokens: a piecewise graph with attention eager",
    "normal_piecewise": "DeepEP's normal mode splits the graph at the MoE: a piecewise graph",
    "slots_piecewise": "the padded size was past the full decode graphs' reach (max_num_seqs x (1 + k)): piecewise",
    "no_piecewise": "no piecewise graph for a model the engine cannot compile (breakable graphs off): eager",
    "no_graph_model": "no CUDA-graph capture list was modelled (engine.cuda_graph not given): the step is priced "
                      "at the profile's time for its own size",
}


@dataclass(frozen=True)
class StepMode:
    """The execution mode of one step (`reason`: a key of REASONS; `padded`: the captured size
    replayed per rank on the rule's axis, None when eager)."""

    mode: Mode
    reason: str
    padded: int | None
    all_to_all: AllToAllMode

    @property
    def explanation(self) -> str:
        return REASONS[self.reason]


@dataclass(frozen=True)
class AllToAllRule:
    """Which all-to-all kernels a step runs, and what a DeepEP normal-mode step costs beside low-latency.

    `auto_per_step`: DeepEP `auto` resolves per step (SGLang) or is not offered (vLLM picks
    one backend per deployment). Normal mode's price, where no normal-mode row of
    hwprofiles/public/kernels.csv matches the GPU and geometry: the graph step's MoE block
    (dispatch + routed experts + combine) x `normal_over_low_latency`, the one public pair at
    equal tokens per rank; and each normal dispatch waits for the host (`normal_syncs_per_layer`).
    """

    auto_per_step: bool
    source: str
    normal_over_low_latency: float = 348.0 / 264.0
    normal_price_source: str = ("deepseek-ai/DeepGEMM PR #383 (hwprofiles/public/kernels.csv, deepgemm_pr383_h200): "
                                "V4-Flash MoE layer at 8 tokens per rank, H200, EP8, FP8: DeepEP normal 348.0 us, "
                                "low-latency 264.0 us (means)")
    normal_syncs_per_layer: int = 1
    sync_source: str = ("deepseek-ai/DeepEP README: a dispatch without a cached handle synchronises with the CPU "
                        "(the received counts); low-latency kernels do not")

    def resolve(self, backend: AllToAllBackend, mode: DeepEPMode, extending: bool) -> AllToAllMode:
        """The all-to-all mode of a step; `extending`: any rank has an extend (prefill) batch."""
        if backend == "none":
            return "none"
        if backend == "megamoe":
            return "megamoe"
        if mode != "auto":
            return mode
        if not self.auto_per_step:
            raise SpecplanError("this engine has no per-step DeepEP mode: name deepep_mode low_latency or normal")
        return "normal" if extending else "low_latency"


class ExecutionRule(Protocol):
    """An engine's rule for a step's execution mode, given the step's resolved all-to-all mode."""

    @property
    def axis(self) -> Literal["requests", "tokens"]: ...

    @property
    def source(self) -> str: ...

    def decide(self, shape: StepShape, setup: ModeSetup, all_to_all: AllToAllMode) -> StepMode: ...


@dataclass(frozen=True)
class RankVote:
    """SGLang's rule (module docstring): one rank extending sends every rank eager.

    `eager_prefill_models`: families whose prefill this engine version runs eager under DP
    attention or an all-to-all backend (the reason given when no rank decodes beside it).
    """

    source: str
    eager_prefill_models: tuple[ModelFamily, ...] = ()
    axis: Literal["requests", "tokens"] = "requests"

    def decide(self, shape: StepShape, setup: ModeSetup, all_to_all: AllToAllMode) -> StepMode:
        if not setup.graphs:
            return StepMode("eager", "graphs_off", None, all_to_all)
        if setup.all_to_all == "deepep" and setup.deepep_mode == "normal":
            return StepMode("eager", "deepep_normal", None, all_to_all)
        if shape.extending:
            return StepMode("eager", self.prefill_reason(shape, setup), None, all_to_all)
        batch = self.graph_batch(shape)
        if batch > setup.largest:
            return StepMode("eager", "above_capture", None, all_to_all)
        return StepMode("graph", "decode_graph", setup.pad(batch), all_to_all)

    def prefill_reason(self, shape: StepShape, setup: ModeSetup) -> str:
        decoding_beside = any(shape.decode_requests[r] and not shape.prefill_tokens[r] for r in range(shape.ranks))
        if shape.ranks > 1 and decoding_beside:
            return "rank_prefilling"
        if setup.model in self.eager_prefill_models and (shape.ranks > 1 or setup.all_to_all != "none"):
            return "v4_prefill_eager"
        return "prefill_eager"

    @staticmethod
    def graph_batch(shape: StepShape) -> int:
        """The batch the graph runner pads: one rank's requests; under DP the busiest rank's tokens / (1 + k)."""
        if shape.ranks == 1:
            return shape.decode_requests[0]
        return max(shape.verify_tokens) // shape.query_tokens


@dataclass(frozen=True)
class TokenDispatch:
    """vLLM's rule (module docstring); `compiled_models`: families it torch-compiles, so piecewise
    graphs exist without the breakable graph."""

    source: str
    compiled_models: tuple[ModelFamily, ...] = ("dense", "moe")
    axis: Literal["requests", "tokens"] = "tokens"

    def decide(self, shape: StepShape, setup: ModeSetup, all_to_all: AllToAllMode) -> StepMode:
        if not setup.graphs:
            return StepMode("eager", "graphs_off", None, all_to_all)
        votes = [self.rank_vote(shape, setup, all_to_all, r) for r in range(shape.ranks) if shape.active(r)]
        mode, reason = min(votes, key=lambda vote: MODE_ORDER[vote[0]])
        padded = None if mode == "eager" else setup.pad(max(shape.tokens))
        return StepMode(mode, reason, padded, all_to_all)

    def rank_vote(self, shape: StepShape, setup: ModeSetup, all_to_all: AllToAllMode, rank: int) -> tuple[Mode, str]:
        tokens = shape.tokens[rank]
        if tokens > setup.largest:
            return "eager", "above_capture"
        full_decode = not (all_to_all == "normal" and shape.ranks > 1)
        within_slots = not setup.max_requests or setup.pad(tokens) <= setup.max_requests * shape.query_tokens
        uniform = shape.uniform_decode(rank)
        if uniform and full_decode and within_slots:
            return "graph", "decode_graph"
        if setup.model not in self.compiled_models and not setup.breakable:
            return "eager", "no_piecewise"
        if shape.prefill_tokens[rank]:
            return "piecewise", "mixed_piecewise"
        if not full_decode:
            return "piecewise", "normal_piecewise"
        return "piecewise", "ragged_piecewise" if not uniform else "slots_piecewise"


class ModeRules(Protocol):
    """What `step_mode` reads of an engine's row (specplan.engines.traits.EngineTraits)."""

    @property
    def label(self) -> str: ...

    @property
    def execution(self) -> ExecutionRule | None: ...

    @property
    def all_to_all(self) -> AllToAllRule | None: ...


def step_mode(traits: ModeRules, shape: StepShape, setup: ModeSetup) -> StepMode:
    """The execution mode `traits`' engine gives this step (its rows without a rule are refused)."""
    if traits.execution is None or traits.all_to_all is None:
        raise SpecplanError(f"{traits.label} has no execution-mode rule in the traits table")
    all_to_all = traits.all_to_all.resolve(setup.all_to_all, setup.deepep_mode, shape.extending)
    return traits.execution.decide(shape, setup, all_to_all)
