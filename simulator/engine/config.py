"""The engine's settings, read once from a scenario: what every decode core runs by.

`EngineConfig.from_scenario(scenario, profile, block_size)` is shared by the
simulator's replicas and the reference engine (validation/), so both take
the same limits from the same keys:

    max_batch_requests   running requests at most
    kv_capacity_tokens   KV-cache tokens at most (the KV rule: specplan.simulator.engine.decode)
    chunk_tokens         chunked prefill: prompt tokens per step at most (None: disaggregated)
    prefill_tokens_per_s disaggregated prefill: the prefill stage's rate (None: chunked)
    max_step_tokens      tokens one forward may hold (the scenario layer fills in the default:
                         the profile's largest measured B)
    block_size           γ, the drafter's block (0 without speculation)
    scheduling_overhead_ms, host_overhead_ms, host_overhead_per_request_ms, padded_attention
    profiled_queries     padded attention: verify queries per request the profile was measured at
    graphs               CUDA-graph capture sizes (None: no graphs), and the axis they pad (tokens | requests);
                         under data-parallel attention ranks × each rank's own list
    spec_step_fraction   host time of a speculating step, a fraction of the plain step (engine.host)
    truncate_budget      the token budget cuts drafts at its edge (True) or defers whole requests
    ranks, rank_kv_tokens, rank_requests, rank_step_tokens
                         data-parallel attention: ranks and each rank's KV cache, slots and token cap

`engine.budget: auto` is `truncate` for profiles read for vLLM (its
scheduler's rule) and `defer` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.engine.graphs import CaptureSizes, capture_sizes
from specplan.simulator.engine.host import profile_engine, spec_step_fraction
from specplan.simulator.scenario import ChunkedPrefill, Scenario
from specplan.simulator.scenario.spec import CudaGraph, Engine


@dataclass(frozen=True)
class EngineConfig:
    """The decode engine's limits and fixed costs (see the module docstring)."""

    max_batch_requests: int
    kv_capacity_tokens: int
    chunk_tokens: int | None
    prefill_tokens_per_s: float | None
    max_step_tokens: int
    block_size: int
    scheduling_overhead_ms: float
    host_overhead_ms: float
    host_overhead_per_request_ms: float
    padded_attention: bool
    profiled_queries: int | None = None
    graphs: CaptureSizes | None = None
    graph_axis: str = "tokens"
    spec_step_fraction: float = 0.0
    truncate_budget: bool = False
    ranks: int = 1                      # attention ranks (data-parallel attention); 1: one KV cache
    rank_kv_tokens: int = 0             # per rank, when ranks > 1
    rank_requests: int = 0
    rank_step_tokens: int = 0

    @property
    def request_kv_limit(self) -> int:
        """The most KV one request may reserve: the whole cache, or one rank's."""
        return min(self.kv_capacity_tokens, self.rank_kv_tokens) if self.ranks > 1 else self.kv_capacity_tokens

    @property
    def chunked(self) -> bool:
        return self.chunk_tokens is not None

    @classmethod
    def from_scenario(cls, scenario: Scenario, profile: StepProfile, block_size: int) -> EngineConfig:
        """The settings of a loaded scenario (its max_step_tokens resolved); `profile` is its step-time
        profile, whose source decides the `auto` host time and budget rule."""
        engine = scenario.engine
        prefill = engine.prefill
        chunked = isinstance(prefill, ChunkedPrefill)
        max_step_tokens = resolved(engine.max_step_tokens, "engine.max_step_tokens")
        graph = engine.cuda_graph
        return cls(
            max_batch_requests=engine.max_batch_requests,
            kv_capacity_tokens=engine.kv_capacity_tokens,
            chunk_tokens=prefill.chunk_tokens if isinstance(prefill, ChunkedPrefill) else None,
            prefill_tokens_per_s=None if chunked else getattr(prefill, "tokens_per_s", None),
            max_step_tokens=max_step_tokens,
            block_size=block_size,
            scheduling_overhead_ms=engine.scheduling_overhead_ms,
            host_overhead_ms=engine.host_overhead_ms,
            host_overhead_per_request_ms=engine.host_overhead_per_request_ms,
            padded_attention=engine.attention == "padded",
            profiled_queries=engine.attention_profiled_queries if engine.attention == "padded" else None,
            graphs=None if graph is None else rank_graphs(graph, engine, block_size, max_step_tokens),
            graph_axis="requests" if graph is not None and graph.engine == "sglang" else "tokens",
            spec_step_fraction=spec_step_fraction(engine.host, profile) if block_size else 0.0,
            truncate_budget=budget_truncates(engine.budget, profile),
            **rank_limits(engine, max_step_tokens),
        )


def rank_graphs(graph: CudaGraph, engine: Engine, block_size: int, max_step_tokens: int) -> CaptureSizes:
    """The capture list; under data-parallel attention each rank captures its own sizes (its
    max_num_seqs and token cap), and the ranks step in lockstep at one padded size: ranks × the
    rank's list (a step of B tokens pads to ranks · pad(⌈B / ranks⌉))."""
    limits = rank_limits(engine, max_step_tokens)
    if not limits:
        return capture_sizes(graph, engine.max_batch_requests, block_size, max_step_tokens)
    n = limits["ranks"]
    per_rank = capture_sizes(graph, limits["rank_requests"], block_size, limits["rank_step_tokens"])
    return CaptureSizes([n * int(s) for s in per_rank.sizes], per_rank.eager_overhead_ms)


def rank_limits(engine: Engine, max_step_tokens: int) -> dict[str, int]:
    """Per-rank caps of data-parallel attention (the totals split evenly where the scenario is silent)."""
    dp = engine.dp_attention
    if dp is None or dp.ranks == 1:
        return {}
    n = dp.ranks
    return {"ranks": n,
            "rank_kv_tokens": dp.kv_capacity_tokens or engine.kv_capacity_tokens // n,
            "rank_requests": dp.max_batch_requests or max(1, engine.max_batch_requests // n),
            "rank_step_tokens": dp.max_step_tokens or max_step_tokens // n}


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
