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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from specplan.engines import NO_ENGINE, EngineTraits, engine_traits
from specplan.engines.traits import GraphRule
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.engine.graphs import CaptureSizes, capture_sizes
from specplan.simulator.engine.host import profile_traits, spec_cycle_ms, spec_step_fraction
from specplan.simulator.scenario import ChunkedPrefill, Engine, Scenario
from specplan.simulator.scenario.spec import CudaGraph


@dataclass(frozen=True)
class RankLimits:
    """Data-parallel attention: the ranks, and each rank's KV cache, request slots and token cap."""

    ranks: int
    kv_tokens: int
    requests: int
    step_tokens: int
    chunk_tokens: int = 0          # a rank's prompt chunk (chunked prefill)
    balance: str = "most_free_kv"  # how requests are sent to ranks (specplan.simulator.engine.ranks)


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
        dp = rank_limits(engine, max_step_tokens, serving)
        return cls(
            engine=engine,
            block_size=block_size,
            max_step_tokens=max_step_tokens,
            graphs=None if graph is None or rule is None else rank_graphs(graph, rule, engine, block_size,
                                                                           max_step_tokens, dp),
            graph_axis="tokens" if rule is None else rule.axis,
            spec_step_fraction=spec_step_fraction(engine.host, serving, profile) if block_size else 0.0,
            spec_cycle_ms=spec_cycle_ms(engine.host, serving, profile) if block_size else 0.0,
            truncate_budget=budget_truncates(engine.budget, serving),
            dp=dp,
            prefill_schedule=prefill_schedule(engine, serving),
            serving=serving,
        )


def serving_traits(engine: Engine, profile: StepProfile) -> EngineTraits:
    """The serving engine's row: `engine.name` at `engine.version`, or the profile's engine for `auto`."""
    if engine.name == "auto":
        return profile_traits(profile)
    version = engine.version
    if version is None:
        read_for = profile_traits(profile)
        version = read_for.version if read_for.name == engine.name else None
    return engine_traits(engine.name, version)


def graph_rule(graph: CudaGraph, serving: EngineTraits) -> GraphRule:
    """Whose capture rule: the block's engine when it names one, else the serving engine's."""
    return serving.graphs if graph.engine == "auto" else engine_traits(graph.engine).graphs


def rank_graphs(graph: CudaGraph, rule: GraphRule, engine: Engine, block_size: int, max_step_tokens: int,
                dp: RankLimits | None) -> CaptureSizes:
    """The capture list; under data-parallel attention each rank captures its own sizes (its
    max_num_seqs and token cap), and the ranks step in lockstep at one padded size: ranks × the
    rank's list (a step of B tokens pads to ranks · pad(⌈B / ranks⌉))."""
    if dp is None:
        return capture_sizes(graph, rule, engine.max_batch_requests, block_size, max_step_tokens)
    per_rank = capture_sizes(graph, rule, dp.requests, block_size, dp.step_tokens)
    return CaptureSizes([dp.ranks * int(s) for s in per_rank.sizes], per_rank.eager_overhead_ms)


def rank_limits(engine: Engine, max_step_tokens: int, serving: EngineTraits) -> RankLimits | None:
    """Per-rank caps of data-parallel attention (the totals split evenly where the scenario is silent)."""
    dp = engine.dp_attention
    if dp is None or dp.ranks == 1:
        return None
    n = dp.ranks
    total = resolved(engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
    chunk = engine.prefill.chunk_tokens if isinstance(engine.prefill, ChunkedPrefill) else 0
    balance = serving.scheduler.dp_balance if dp.balance == "auto" else dp.balance
    return RankLimits(ranks=n, kv_tokens=dp.kv_capacity_tokens or total // n,
                      requests=dp.max_batch_requests or max(1, engine.max_batch_requests // n),
                      step_tokens=dp.max_step_tokens or max_step_tokens // n,
                      chunk_tokens=dp.chunk_tokens or max(1, chunk // n), balance=balance)


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
