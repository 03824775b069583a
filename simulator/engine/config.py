"""The engine's settings, read once from a scenario: what every decode core runs by.

`EngineConfig.from_scenario(scenario, profile, block_size)` is shared by the
simulator's replicas and the reference engine (validation/), so both take
the same limits from the same keys. It keeps the scenario's `engine:` block
as it was validated (`config.engine`: max_batch_requests, kv_capacity_tokens,
scheduling and host overheads, prefill, attention, ...) and adds only what
the block leaves to be resolved:

    block_size           γ, the drafter's block (0 without speculation)
    max_step_tokens      tokens one forward may hold (the scenario layer fills in the default:
                         the profile's largest measured B)
    graphs, graph_axis   CUDA-graph capture sizes (None: no graphs), and the axis they pad (tokens |
                         requests); under data-parallel attention ranks × each rank's own list
    spec_step_fraction   host time of a speculating step, a fraction of the plain step (engine.host)
    spec_cycle_ms        host time of a speculating step, fixed (engine.host: DeepSeek-V4's measured cycle)
    truncate_budget      the token budget cuts drafts at its edge (True) or defers whole requests
    dp                   data-parallel attention: ranks and each rank's KV cache, slots, token cap,
                         prompt chunk and how requests are sent to ranks (None: one KV cache)
    prefill_schedule     chunked prefill's schedule: separate (prefill steps apart, decode waits) or
                         mixed (chunks inside decode steps)
    serving              the serving engine's row of the traits table (specplan.engines)
    model                the model's family and layers (the profile's `model:` line; None: not named)
    cap_facts, caps      the deployment's facts for the engine's own caps, and the caps it runs under
                         (specplan.engines.caps; None where the row has no caps or the profile names no
                         model or GPU): request slots, the SWA pool, graph batch, all-to-all tokens
    batch_requests       the replica's request slots as the engine applies them (max_batch_requests, less
                         where the SWA pool admits fewer)

and a few readings of the block (`chunk_tokens`, `prefill_tokens_per_s`,
`padded_attention`, `profiled_queries`, `request_kv_limit`), each computed on
first use and kept (the engine's step reads them).

The serving engine's habits come from its row of the traits table
(specplan.engines), resolved once here (`serving`): `engine.name` (auto: the
engine a measured built-in was read for, none otherwise) at `engine.version`
(default: the profile's backend version). Every `auto` of the engine block
takes that row's habit: `engine.budget` its budget rule (vLLM truncates,
SGLang defers), `engine.prefill.schedule` its prefill schedule (SGLang runs
prefill batches apart, vLLM mixes chunks into decode steps),
`engine.dp_attention.balance` its DP dispatch (SGLang round_robin, vLLM
least_loaded, most_free_kv without an engine), `engine.cuda_graph.engine`
its capture rule and `engine.host.engine` its host cycle.

The engine's own caps apply where the scenario leaves them to it: a rank's
step tokens are capped by the all-to-all's per-rank tokens
(`engine.all_to_all.tokens_per_rank`, else the engine's default for the
backend, unless `dp_attention.max_step_tokens` is given; both given: the
smaller), SGLang's DeepSeek-V4 SWA pool caps the running requests
(`engine.swa_full_tokens_ratio` of each rank's KV), and SGLang's capture list
runs to its own `cuda_graph_max_bs` for the GPU and adds a rank's slot count.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from specplan.engines import NO_ENGINE, CapFacts, CapReport, EngineTraits, engine_traits
from specplan.engines.traits import GraphRule
from specplan.hwprofiles.facts import ModelFacts, cap_facts, model_facts, serving_engine
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.engine.host import spec_cycle_ms, spec_step_fraction
from specplan.simulator.engine.price.graphs import CaptureSizes, capture_sizes
from specplan.simulator.scenario import ChunkedPrefill, Engine, Scenario
from specplan.simulator.scenario.memory import engine_kv_pool, launch_knobs
from specplan.simulator.scenario.spec import CudaGraph


@dataclass(frozen=True)
class RankLimits:
    """Data-parallel attention: the ranks, and each rank's KV cache, request slots and token cap."""

    ranks: int
    kv_tokens: int
    requests: int
    step_tokens: int
    chunk_tokens: int = 0          # a rank's prompt chunk (chunked prefill)
    balance: str = "most_free_kv"  # how requests are sent to ranks (specplan.simulator.engine.cluster.ranks)


@dataclass(frozen=True)
class EngineConfig:
    """The scenario's engine block and what resolving it adds (see the module docstring)."""

    engine: Engine
    block_size: int
    max_step_tokens: int
    graphs: CaptureSizes | None = None
    graph_axis: str = "tokens"
    spec_step_fraction: float = 0.0
    spec_cycle_ms: float = 0.0
    truncate_budget: bool = False
    dp: RankLimits | None = None
    prefill_schedule: str = "mixed"
    serving: EngineTraits = NO_ENGINE
    model: ModelFacts | None = None
    cap_facts: CapFacts | None = None
    caps: CapReport | None = None
    batch_requests: int = 0

    def __post_init__(self) -> None:
        if not self.batch_requests:
            object.__setattr__(self, "batch_requests", self.engine.max_batch_requests)

    @cached_property
    def chunk_tokens(self) -> int | None:
        """Chunked prefill: prompt tokens per step at most (None: disaggregated)."""
        prefill = self.engine.prefill
        return prefill.chunk_tokens if isinstance(prefill, ChunkedPrefill) else None

    @cached_property
    def chunked(self) -> bool:
        return isinstance(self.engine.prefill, ChunkedPrefill)

    @cached_property
    def prefill_tokens_per_s(self) -> float | None:
        """Disaggregated prefill: the prefill stage's rate (None: chunked)."""
        prefill = self.engine.prefill
        return None if isinstance(prefill, ChunkedPrefill) else prefill.tokens_per_s

    @cached_property
    def stage_first_token(self) -> bool:
        """The fixed-rate prefill stage emits the first token (`engine.prefill.first_token: prefill`)."""
        return self.engine.prefill.stage_first_token

    @cached_property
    def padded_attention(self) -> bool:
        return self.engine.attention == "padded"

    @cached_property
    def profiled_queries(self) -> int | None:
        """Padded attention: verify queries per request the profile was measured at (None: not priced)."""
        return self.engine.attention_profiled_queries if self.padded_attention else None

    @cached_property
    def request_kv_limit(self) -> int:
        """The most KV one request may reserve: the whole cache, or one rank's."""
        total = resolved(self.engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
        return total if self.dp is None else min(total, self.dp.kv_tokens)

    @classmethod
    def from_scenario(cls, scenario: Scenario, profile: StepProfile, block_size: int) -> EngineConfig:
        """The settings of a loaded scenario (its max_step_tokens resolved); `profile` is its step-time
        profile, whose provenance names the serving engine when `engine.name` is auto."""
        engine = scenario.engine
        serving = serving_traits(engine, profile)
        max_step_tokens = resolved(engine.max_step_tokens, "engine.max_step_tokens")
        graph = engine.cuda_graph
        rule = None if graph is None else graph_rule(graph, serving)
        a2a_tokens = all_to_all_tokens(engine, serving, profile, block_size)
        dp = rank_limits(engine, max_step_tokens, serving, a2a_tokens)
        facts = deployment_facts(engine, serving, profile, block_size, max_step_tokens, dp)
        caps = None if facts is None or serving.caps is None else serving.caps.report(facts)
        dp, batch_requests = swa_limited(engine, dp, caps)
        engine_top = None if caps is None or graph is None or graph.engine not in ("auto", serving.name) \
            else caps.graph_cap
        return cls(
            engine=engine,
            block_size=block_size,
            max_step_tokens=max_step_tokens,
            graphs=None if graph is None or rule is None else rank_graphs(
                graph, rule, engine, block_size, max_step_tokens, dp, None if engine_top is None else
                int(engine_top.value)),
            graph_axis="tokens" if rule is None else rule.axis,
            spec_step_fraction=spec_step_fraction(engine.host, serving, profile) if block_size else 0.0,
            spec_cycle_ms=spec_cycle_ms(engine.host, serving, profile) if block_size else 0.0,
            truncate_budget=budget_truncates(engine.budget, serving),
            dp=dp,
            prefill_schedule=prefill_schedule(engine, serving),
            serving=serving,
            model=model_facts(profile),
            cap_facts=facts,
            caps=caps,
            batch_requests=batch_requests,
        )


def serving_traits(engine: Engine, profile: StepProfile) -> EngineTraits:
    """The serving engine's row: `engine.name` at `engine.version`, or the profile's engine for `auto`."""
    return serving_engine(engine.name, engine.version, profile)


def graph_rule(graph: CudaGraph, serving: EngineTraits) -> GraphRule:
    """Whose capture rule: the block's engine when it names one, else the serving engine's."""
    return serving.graphs if graph.engine == "auto" else engine_traits(graph.engine).graphs


def rank_graphs(graph: CudaGraph, rule: GraphRule, engine: Engine, block_size: int, max_step_tokens: int,
                dp: RankLimits | None, engine_top: int | None = None) -> CaptureSizes:
    """The capture list; under data-parallel attention each rank captures its own sizes (its
    max_num_seqs and token cap), and the ranks step in lockstep at one padded size: ranks × the
    rank's list (a step of B tokens pads to ranks · pad(⌈B / ranks⌉)). `engine_top`: the engine's own
    largest size for this GPU (SGLang's cuda_graph_max_bs), where its caps know it."""
    if dp is None:
        return capture_sizes(graph, rule, engine.max_batch_requests, block_size, max_step_tokens, engine_top)
    per_rank = capture_sizes(graph, rule, dp.requests, block_size, dp.step_tokens, engine_top)
    return CaptureSizes([dp.ranks * int(s) for s in per_rank.sizes], per_rank.eager_overhead_ms)


def rank_limits(engine: Engine, max_step_tokens: int, serving: EngineTraits,
                a2a_tokens: int | None = None) -> RankLimits | None:
    """Per-rank caps of data-parallel attention (the totals split evenly where the scenario is silent; a
    rank's step tokens also capped by the all-to-all's tokens per rank, `a2a_tokens`)."""
    dp = engine.dp_attention
    if dp is None or dp.ranks == 1:
        return None
    n = dp.ranks
    total = resolved(engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
    chunk = engine.prefill.chunk_tokens if isinstance(engine.prefill, ChunkedPrefill) else 0
    balance = serving.scheduler.dp_balance if dp.balance == "auto" else dp.balance
    given = engine.all_to_all.tokens_per_rank if engine.all_to_all is not None else None
    step_tokens = dp.max_step_tokens or a2a_tokens or max_step_tokens // n
    if dp.max_step_tokens and given:
        step_tokens = min(dp.max_step_tokens, given)
    return RankLimits(ranks=n, kv_tokens=dp.kv_capacity_tokens or total // n,
                      requests=dp.max_batch_requests or max(1, engine.max_batch_requests // n),
                      step_tokens=step_tokens,
                      chunk_tokens=dp.chunk_tokens or max(1, chunk // n), balance=balance)


def all_to_all_tokens(engine: Engine, serving: EngineTraits, profile: StepProfile, block_size: int) -> int | None:
    """The most tokens one rank's decode dispatch carries: `engine.all_to_all.tokens_per_rank`, else the
    engine's default for the backend (none in DeepEP's normal mode, which carries a prefill's tokens)."""
    a2a = engine.all_to_all
    if a2a is None or a2a.backend == "none" or a2a.mode == "normal":
        return None
    if a2a.tokens_per_rank is not None:
        return a2a.tokens_per_rank
    ranks = 1 if engine.dp_attention is None else engine.dp_attention.ranks
    facts = cap_facts(profile, ranks, 1 + block_size, a2a.backend, None, {})
    if facts is None or serving.caps is None:
        return None
    cap = serving.caps.report(facts).get(f"{a2a.backend}_tokens_per_rank")
    return None if cap is None else int(cap.value)


def deployment_facts(engine: Engine, serving: EngineTraits, profile: StepProfile, block_size: int,
                     max_step_tokens: int, dp: RankLimits | None) -> CapFacts | None:
    """The deployment's facts for the engine's caps, with the limits the scenario sets under the engine's own
    knob names (so the caps report what the run runs under) and one rank's KV pool at the engine's memory
    fraction (the profile's memory model, else the scenario's KV: the simulator's own KV rule runs on
    engine.kv_capacity_tokens either way)."""
    if serving.caps is None:
        return None
    ranks = 1 if dp is None else dp.ranks
    kv = resolved(engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
    slots = engine.max_batch_requests if dp is None else dp.requests
    step_tokens = max_step_tokens if dp is None else dp.step_tokens
    backend = "none" if engine.all_to_all is None else engine.all_to_all.backend
    overrides = launch_knobs(engine, serving.caps.knobs, slots, step_tokens, dp is not None)
    pool = engine_kv_pool(engine, serving, profile, block_size) or kv
    return cap_facts(profile, ranks, 1 + block_size, backend, pool // ranks, overrides)


def swa_limited(engine: Engine, dp: RankLimits | None, caps: CapReport | None) -> tuple[RankLimits | None, int]:
    """The request slots as the engine applies them: a rank's (or the replica's) slots, less where the SWA pool
    (SGLang, DeepSeek-V4) admits fewer requests."""
    swa = None if caps is None else caps.get("swa_pool")
    slots = engine.max_batch_requests
    if swa is None:
        return dp, slots
    if dp is None:
        return None, max(1, min(slots, swa.requests_per_rank))
    return dataclasses.replace(dp, requests=max(1, min(dp.requests, swa.requests_per_rank))), slots


def prefill_schedule(engine: Engine, serving: EngineTraits) -> str:
    """`engine.prefill.schedule` resolved: the serving engine's schedule when it says `auto`."""
    prefill = engine.prefill
    schedule = prefill.schedule if isinstance(prefill, ChunkedPrefill) else "mixed"
    return serving.scheduler.prefill_schedule if schedule == "auto" else schedule


def budget_truncates(rule: str, serving: EngineTraits) -> bool:
    """`engine.budget` resolved: the serving engine's rule when it says `auto`."""
    return (serving.scheduler.budget if rule == "auto" else rule) == "truncate"


def resolved(value: int | None, key: str) -> int:
    """A value the scenario layer fills in when it loads a scenario (a Scenario built otherwise lacks it)."""
    if value is None:
        raise ValueError(f"{key} is not resolved: build the Scenario with scenario_from_mapping")
    return value
