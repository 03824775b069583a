"""How each step runs, as its engine decides it (a CUDA graph, a piecewise graph or eager), and what that adds.

Place in the data flow: one rule object per engine, chosen when its core is
assembled (`step_modes`), asked by the step price (specplan.simulator.engine.price.pricer)
each time it quotes a step: `decide` gives the step's `StepMode`
(specplan.engines.modes: the mode, its reason code, the all-to-all mode) and
`charge` what that mode adds to the step's kernels (`ModeCharge`). The quote
carries the mode, the decode core puts it in the step's plan, and steps.csv and
the summary report it. The step loop never tests a mode: which rule runs is
decided here, once.

    Unmodelled    no `engine.cuda_graph` block: no capture list to decide by; every step is priced at
                  the profile's time for its own size (mode `unmodelled`)
    CaptureModes  a capture list, but no engine rule to read it with (a row without one: TensorRT-LLM,
                  no engine; or a profile that names no model): a step replays its graph within the
                  list and runs eager past it, paying `engine.cuda_graph.eager_overhead_ms`; a separate
                  prefill batch runs eager at its kernels' time
    EngineModes   the serving engine's rule (`specplan.engines.step_mode`) over the step's shape per
                  attention rank (`StepShape`, built from the step's `StepLoad`) and the deployment
                  (`ModeSetup`, resolved once here): SGLang's min-reduced graph votes, vLLM's full /
                  piecewise / none by tokens and uniformity, DeepEP's mode

What a mode adds (specplan.engines.eager, each figure public, none fitted):

    graph      nothing: the profile's time (at the padded size)
    piecewise  the forward lasts at least the host's launches of attention's kernels and the graph pieces
    eager      at least every kernel's launch: kernels per layer x layers x the host's cost per kernel (DeepSeek-V4:
               its eager dispatch, sglang PR #24047, as its steps sync with the host; else the launcher's),
               plus one host sync per layer in DeepEP's normal mode. A step carrying prompt tokens (piecewise or
               eager) pays the launcher's cost per kernel, or `engine.cuda_graph.extend_op_us` where the scenario
               sets it (refused where no family here is priced by its launches)
    normal     a decode step's MoE block (dispatch + experts + combine) x 348 / 264 where DeepEP runs
               normal mode (the profile's parts table splits the block out; DeepGEMM PR #383)

A model family without a public kernel count (`moe`: DeepSeek-V3, Qwen3-MoE) keeps
today's price: a decode step run eager pays `eager_overhead_ms`, a prefill batch its
kernels, a piecewise step its graph's time.

vLLM's mode depends on a step's tokens B only through its capture list's largest
size: whether a step carries prompt tokens, whether its requests verify ragged
lengths (a policy that sets lengths per request) and DeepEP's mode are known when
the step is quoted, so its mode within the list is decided once per kind of step,
and past the largest size every step runs eager. SGLang's mode does not depend on
B at all: the busiest rank's requests and whether any rank extends decide it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple, Protocol

import numpy as np

from specplan.engines import ModeSetup, StepMode, StepShape, step_mode
from specplan.engines.eager import EagerCost, KernelCount, launch_bound_ms
from specplan.engines.modes import AllToAllRule
from specplan.hwprofiles.facts import ModelFacts
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.price.rank_load import StepLoad

UNMODELLED = StepMode("unmodelled", "no_graph_model", None, "none")
NO_LIMIT = 1 << 62
CACHE_SIZE = 4096   # shapes remembered per engine (a DP step's shape varies: the cache is cleared when full)


class ModeCharge(NamedTuple):
    """What running a step in its mode adds to its kernels' time (ms): the forward lasts at least `floor_ms`
    (the host's launches), then `extra_ms` (host syncs, or the assumed eager surcharge) is added; `moe_scale`
    adds that share of the MoE block (DeepEP's normal mode over low-latency, less one)."""

    floor_ms: float = 0.0
    extra_ms: float = 0.0
    moe_scale: float = 0.0

    @property
    def free(self) -> bool:
        return not (self.floor_ms or self.extra_ms or self.moe_scale)


NO_CHARGE = ModeCharge()


class StepModes(Protocol):
    """An engine's rule for its steps' modes (module docstring)."""

    axis: str
    largest: int              # the largest captured size on the axis (NO_LIMIT without graphs)
    beyond: StepMode | None   # token axis: the mode past the largest size (None: the same mode at every B)
    needs_moe_split: bool     # some mode's price reads the profile's MoE block

    def decide(self, decode_requests: int, query_tokens: int, prefill_tokens: int, load: StepLoad | None) -> StepMode:
        """The step's mode (on the token axis: within the capture list)."""
        ...

    def charge(self, mode: StepMode, extending: bool) -> ModeCharge:
        """What the mode adds to a step's kernels; `extending`: the step computes prompt tokens."""
        ...


class Unmodelled:
    """No capture list: nothing to decide, nothing added (module docstring)."""

    axis = "tokens"
    largest = NO_LIMIT
    beyond: StepMode | None = None
    needs_moe_split = False

    def decide(self, decode_requests: int, query_tokens: int, prefill_tokens: int, load: StepLoad | None) -> StepMode:
        return UNMODELLED

    def charge(self, mode: StepMode, extending: bool) -> ModeCharge:
        return NO_CHARGE


class CaptureModes:
    """A capture list and no engine rule: graph within it, eager past it (module docstring)."""

    needs_moe_split = False

    def __init__(self, config: EngineConfig) -> None:
        assert config.graphs is not None
        self.axis = config.graph_axis
        self.largest = config.graphs.largest
        self.overhead = ModeCharge(extra_ms=config.graphs.eager_overhead_ms)
        self.graph = StepMode("graph", "decode_graph", None, "none")
        self.eager = StepMode("eager", "above_capture", None, "none")
        self.prefill = StepMode("eager", "prefill_eager", None, "none")
        self.beyond = self.eager if self.axis == "tokens" else None

    def decide(self, decode_requests: int, query_tokens: int, prefill_tokens: int, load: StepLoad | None) -> StepMode:
        if load is not None and load.prefilling:
            return self.prefill
        if self.axis == "requests" and decode_requests > self.largest:
            return self.eager
        return self.graph

    def charge(self, mode: StepMode, extending: bool) -> ModeCharge:
        """A decode step run eager pays the surcharge, prompt chunks in it or not (as past the list on the token
        axis); a separate prefill batch runs at its kernels' time."""
        return self.overhead if mode.mode == "eager" and mode is not self.prefill else NO_CHARGE


class EngineModes:
    """The serving engine's rule over each step's shape per rank (module docstring)."""

    def __init__(self, config: EngineConfig, setup: ModeSetup, model: ModelFacts, all_to_all: AllToAllRule,
                 ragged: bool) -> None:
        assert config.graphs is not None and config.serving.execution is not None
        self.traits, self.setup, self.all_to_all, self.ragged = config.serving, setup, all_to_all, ragged
        self.ranks = 1 if config.dp is None else config.dp.ranks
        self.axis: str = config.serving.execution.axis
        self.largest = config.graphs.largest
        self.layers, self.family = model.layers, model.family
        cost = config.serving.eager
        graph = config.engine.cuda_graph
        if cost is not None and graph is not None and graph.extend_op_us is not None:
            cost = replace(cost, extend_op_us=graph.extend_op_us)
        self.cost: EagerCost | None = cost if cost is not None and model.family in cost.kernels else None
        if self.cost is not None and graph is not None and graph.eager_overhead_ms is not None:
            raise ScenarioError("engine.cuda_graph.eager_overhead_ms", f"{config.serving.label} prices an eager "
                                f"{model.family} step by its kernel launches (public figures: "
                                "specplan.engines.eager), so an assumed surcharge would not move it; remove the key")
        self.overhead_ms = config.graphs.eager_overhead_ms
        self.needs_moe_split = setup.all_to_all == "deepep" and setup.deepep_mode == "normal"
        self.beyond = None if self.axis == "requests" else StepMode(  # one all-to-all mode per deployment
            "eager", "above_capture", None, all_to_all.resolve(setup.all_to_all, setup.deepep_mode, False))
        self.modes: dict[tuple, StepMode] = {}
        self.charges: dict[tuple[StepMode, bool], ModeCharge] = {}

    def decide(self, decode_requests: int, query_tokens: int, prefill_tokens: int, load: StepLoad | None) -> StepMode:
        if self.axis == "tokens":
            return self.token_mode(query_tokens, prefill_tokens > 0 or (load is not None and extends(load)))
        if load is None:
            key: tuple = (decode_requests, query_tokens, prefill_tokens > 0)
        else:
            key = (load.anchors.tobytes(), (load.prefill + load.fixed > 0).tobytes(), query_tokens)
        mode = self.modes.get(key)
        if mode is None:
            if len(self.modes) >= CACHE_SIZE:
                self.modes.clear()
            mode = self.modes[key] = self.request_mode(decode_requests, query_tokens, prefill_tokens, load)
        return mode

    def request_mode(self, decode_requests: int, query_tokens: int, prefill_tokens: int,
                     load: StepLoad | None) -> StepMode:
        """SGLang's rule at the step's own shape: per rank its decoding requests and prompt tokens."""
        anchors: tuple[int, ...]
        prefill: tuple[int, ...]
        if load is None:
            anchors, prefill = (decode_requests,), (prefill_tokens,)
        else:
            anchors = tuple(int(a) for a in load.anchors)
            prefill = tuple(int(p + f) for p, f in zip(load.prefill, load.fixed, strict=True))
        if not any(anchors) and not any(prefill):
            anchors = (1, *anchors[1:])   # an empty step (every row held or cut) replays the smallest graph
        return step_mode(self.traits, StepShape(anchors, tuple(a * query_tokens for a in anchors), prefill,
                                                query_tokens), self.setup)

    def token_mode(self, query_tokens: int, extending: bool) -> StepMode:
        """vLLM's rule at a step of this kind within the capture list: a uniform decode step of one request per
        rank, ragged (two requests, one a token short) where the policy sets lengths per request, a prompt token
        on the first rank where the step carries prompt tokens."""
        ragged = self.ragged and query_tokens > 1
        key = (query_tokens, ragged, extending)
        mode = self.modes.get(key)
        if mode is None:
            requests = 2 if ragged else 1
            verify = requests * query_tokens - (1 if ragged else 0)
            prefill = (1 if extending else 0,) + (0,) * (self.ranks - 1)
            shape = StepShape((requests,) * self.ranks, (verify,) * self.ranks, prefill, query_tokens)
            mode = self.modes[key] = step_mode(self.traits, shape, self.setup)
        return mode

    def charge(self, mode: StepMode, extending: bool) -> ModeCharge:
        key = (mode, extending)
        charge = self.charges.get(key)
        if charge is None:
            charge = self.charges[key] = self.price(mode, extending)
        return charge

    def price(self, mode: StepMode, extending: bool) -> ModeCharge:
        """The module docstring's table, for one mode."""
        moe = self.all_to_all.normal_over_low_latency - 1.0 if mode.all_to_all == "normal" and not extending else 0.0
        if mode.mode == "graph":
            return ModeCharge(moe_scale=moe)
        cost = self.cost
        if cost is None:  # no public kernel count: the assumed surcharge, as before modes were priced
            extra = self.overhead_ms if mode.mode == "eager" and not extending else 0.0
            return ModeCharge(extra_ms=extra, moe_scale=moe)
        if mode.mode == "piecewise":
            count = cost.count(self.family)
            floor = 0.0 if count.attention_per_layer is None else launch_bound_ms(cost, self.family, self.layers,
                                                                                   "attention", extending=extending)
            return ModeCharge(floor_ms=floor, moe_scale=moe)
        syncs = self.all_to_all.normal_syncs_per_layer * self.layers if mode.all_to_all == "normal" else 0
        return ModeCharge(floor_ms=launch_bound_ms(cost, self.family, self.layers, extending=extending),
                          extra_ms=syncs * cost.count(self.family).op_us(cost, extending) / 1000.0, moe_scale=moe)


def extends(load: StepLoad) -> bool:
    return bool(load.prefill.any() or load.fixed.any())


def mode_setup(config: EngineConfig, model: ModelFacts) -> ModeSetup:
    """The deployment's facts the engine's rule reads, resolved once: the family, each rank's capture list,
    the all-to-all backend and DeepEP's mode, a rank's request slots."""
    assert config.graphs is not None
    ranks = 1 if config.dp is None else config.dp.ranks
    capture = tuple(int(s) // ranks for s in config.graphs.sizes)
    a2a = config.engine.all_to_all
    slots = config.batch_requests if config.dp is None else config.dp.requests
    return ModeSetup(model=model.family, capture=capture, all_to_all="none" if a2a is None else a2a.backend,
                     deepep_mode="auto" if a2a is None else a2a.mode, max_requests=slots)


def step_modes(config: EngineConfig, ragged: bool = False) -> StepModes:
    """The engine's mode rule (module docstring); `ragged`: the policy sets each request's length per step.
    `engine.cuda_graph.extend_op_us` is refused where the rule prices no step by its launches."""
    modes = engine_modes(config, ragged)
    graph = config.engine.cuda_graph
    if graph is not None and graph.extend_op_us is not None and launch_count(modes) is None:
        model = "a profile naming no model" if config.model is None else f"{config.model.family} models"
        raise ScenarioError("engine.cuda_graph.extend_op_us", f"{config.serving.label} does not price an extend "
                            f"step by its kernel launches for {model} (a public kernel count and the engine's "
                            "mode rule: DeepSeek-V4 under vLLM or SGLang), so it would move nothing; remove the key")
    return modes


def launch_count(modes: StepModes) -> tuple[EagerCost, KernelCount] | None:
    """The host's cost and the family's public kernel count where the mode rule prices steps by their kernel
    launches (a DeepSeek-V4 engine row); None elsewhere (the one test `engine.cuda_graph.extend_op_us` is
    refused by, and the attribution's extend ablations apply by)."""
    if not isinstance(modes, EngineModes) or modes.cost is None:
        return None
    return modes.cost, modes.cost.count(modes.family)


def engine_modes(config: EngineConfig, ragged: bool) -> StepModes:
    if config.graphs is None:
        return Unmodelled()
    serving, model = config.serving, config.model
    rule, a2a = serving.execution, serving.all_to_all
    if rule is None or a2a is None or model is None or rule.axis != config.graph_axis:
        return CaptureModes(config)
    setup = mode_setup(config, model)
    if setup.all_to_all == "deepep" and setup.deepep_mode == "auto" and not a2a.auto_per_step:
        raise ScenarioError("engine.all_to_all.mode", f"{serving.label} picks one DeepEP mode per deployment "
                            "(--all2all-backend deepep_low_latency or deepep_high_throughput): name low_latency "
                            "or normal")
    return EngineModes(config, setup, model, a2a, ragged)


def apply_charge(verify: np.ndarray, charge: ModeCharge, moe_ms: np.ndarray | None) -> np.ndarray:
    """A forward's time at each B with its mode's charge (`moe_ms`: the MoE block at each B, for normal mode)."""
    if charge.moe_scale and moe_ms is not None:
        verify = verify + charge.moe_scale * moe_ms
    if charge.floor_ms:
        verify = np.maximum(verify, charge.floor_ms)
    return verify + charge.extra_ms if charge.extra_ms else verify

