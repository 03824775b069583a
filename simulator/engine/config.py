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

and a few readings of the block (`chunk_tokens`, `prefill_tokens_per_s`,
`padded_attention`, `profiled_queries`, `request_kv_limit`), each computed on
first use and kept (the engine's step reads them).

`engine.budget: auto` is `truncate` for profiles read for vLLM (its
scheduler's rule) and `defer` otherwise; `engine.prefill.schedule: auto` is
`separate` for profiles read for SGLang (its scheduler runs a prefill batch
whenever prompts wait) and `mixed` otherwise; `engine.dp_attention.balance:
auto` is SGLang's `round_robin` or vLLM's `least_loaded` by the profile's
engine, `most_free_kv` for any other profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.engine.graphs import CaptureSizes, capture_sizes
from specplan.simulator.engine.host import profile_engine, spec_cycle_ms, spec_step_fraction
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
        profile, whose source decides the `auto` host time and budget rule."""
        engine = scenario.engine
        max_step_tokens = resolved(engine.max_step_tokens, "engine.max_step_tokens")
        graph = engine.cuda_graph
        dp = rank_limits(engine, max_step_tokens, profile_engine(profile))
        return cls(
            engine=engine,
            block_size=block_size,
            max_step_tokens=max_step_tokens,
            graphs=None if graph is None else rank_graphs(graph, engine, block_size, max_step_tokens, dp),
            graph_axis="requests" if graph is not None and graph.engine == "sglang" else "tokens",
            spec_step_fraction=spec_step_fraction(engine.host, profile) if block_size else 0.0,
            spec_cycle_ms=spec_cycle_ms(engine.host, profile) if block_size else 0.0,
            truncate_budget=budget_truncates(engine.budget, profile),
            dp=dp,
            prefill_schedule=prefill_schedule(engine, profile),
        )


def rank_graphs(graph: CudaGraph, engine: Engine, block_size: int, max_step_tokens: int,
                dp: RankLimits | None) -> CaptureSizes:
    """The capture list; under data-parallel attention each rank captures its own sizes (its
    max_num_seqs and token cap), and the ranks step in lockstep at one padded size: ranks × the
    rank's list (a step of B tokens pads to ranks · pad(⌈B / ranks⌉))."""
    if dp is None:
        return capture_sizes(graph, engine.max_batch_requests, block_size, max_step_tokens)
    per_rank = capture_sizes(graph, dp.requests, block_size, dp.step_tokens)
    return CaptureSizes([dp.ranks * int(s) for s in per_rank.sizes], per_rank.eager_overhead_ms)


def rank_limits(engine: Engine, max_step_tokens: int, backend: str | None) -> RankLimits | None:
    """Per-rank caps of data-parallel attention (the totals split evenly where the scenario is silent)."""
    dp = engine.dp_attention
    if dp is None or dp.ranks == 1:
        return None
    n = dp.ranks
    total = resolved(engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
    chunk = engine.prefill.chunk_tokens if isinstance(engine.prefill, ChunkedPrefill) else 0
    return RankLimits(ranks=n, kv_tokens=dp.kv_capacity_tokens or total // n,
                      requests=dp.max_batch_requests or max(1, engine.max_batch_requests // n),
                      step_tokens=dp.max_step_tokens or max_step_tokens // n,
                      chunk_tokens=dp.chunk_tokens or max(1, chunk // n), balance=rank_balance(dp.balance, backend))


RANK_BALANCE_OF = {"sglang": "round_robin", "vllm": "least_loaded"}


def rank_balance(balance: str, backend: str | None) -> str:
    """`engine.dp_attention.balance` resolved: the engine's own dispatch for its profiles when it says `auto`."""
    if balance != "auto":
        return balance
    return RANK_BALANCE_OF.get(backend or "", "most_free_kv")


def prefill_schedule(engine: Engine, profile: StepProfile) -> str:
    """`engine.prefill.schedule` resolved: SGLang's separate prefill batches for its profiles when `auto`."""
    prefill = engine.prefill
    schedule = prefill.schedule if isinstance(prefill, ChunkedPrefill) else "mixed"
    if schedule == "auto":
        return "separate" if profile_engine(profile) == "sglang" else "mixed"
    return schedule


def budget_truncates(rule: str, profile: StepProfile) -> bool:
    """`engine.budget` resolved: vLLM's truncation for profiles read for vLLM when it says `auto`."""
    if rule == "auto":
        return profile_engine(profile) == "vllm"
    return rule == "truncate"


def resolved(value: int | None, key: str) -> int:
    """A value the scenario layer fills in when it loads a scenario (a Scenario built otherwise lacks it)."""
    if value is None:
        raise ValueError(f"{key} is not resolved: build the Scenario with scenario_from_mapping")
    return value
