"""An engine's row (`EngineTraits`) and its parts: CUDA-graph rule, host cycle, scheduler, benchmark client,
launch, how a step runs (execution mode, all-to-all mode, eager cost), the engine's own caps and its tables in
AIConfigurator's database.

Each part is a small frozen value or object; a row bundles them. The engine
modules (vllm, sglang, trtllm) build their rows from these, and
specplan.engines.table looks rows up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from specplan.engines.caps import Caps
from specplan.engines.dp_scheduler import DpScheduler
from specplan.engines.eager import EagerCost
from specplan.engines.launch import Deployment
from specplan.engines.modes import AllToAllRule, ExecutionRule


@dataclass(frozen=True)
class GraphRule:
    """How an engine captures its decode forward as CUDA graphs, and which axis a step pads on.

    `axis` is what a captured size counts: `tokens` in the forward (a step of B tokens runs the
    graph of pad(B)) or `requests` in the batch (a step of R requests runs the graph of pad(R)).
    `default_sizes(top, speculative)` is the engine's own capture list up to `top`;
    `default_top(max_batch_requests, block_size, given)` its largest size when the user sets
    none (`given`: a capture list the user gave); `limit` what bounds the largest size: the
    step's token cap (`max_step_tokens`) or the batch's request slots (`max_batch_requests`).
    `past_slots(sizes, slots)`: the sizes the engine adds when its own list runs past the
    request slots (None: it adds none); `slots_source` where that habit is read.
    """

    axis: Literal["tokens", "requests"]
    default_sizes: Callable[[int, bool], list[int]]
    default_top: Callable[[int, int, tuple[int, ...]], int]
    limit: Literal["max_step_tokens", "max_batch_requests"]
    source: str
    past_slots: Callable[[list[int], int], list[int]] | None = None
    slots_source: str = ""


@dataclass(frozen=True)
class HostCycle:
    """Host time a speculating step pays beyond its kernels (specplan.simulator.engine.host).

    `spec_step_fraction`: a share of the plain decode step, from the engine's own MTP speed-up
    at batch 1; `spec_cycle_ms`: a fixed per-cycle figure measured on `cycle_model`, which
    replaces the fraction for that model's profiles.
    """

    spec_step_fraction: float
    spec_cycle_ms: float
    cycle_model: str
    fraction_source: str
    cycle_source: str


@dataclass(frozen=True)
class BenchClient:
    """What the engine's benchmark client measures and how it warms up (specplan.simulator.engine.records.bench_metrics).

    `prefix`: the summary keys' prefix (`<prefix>.<metric>`); `itl_per_token`: each streamed
    chunk's gap divided by its tokens and repeated once per token (SGLang's `adjust_itl`), or
    one gap per chunk (vLLM); `itl_percentiles`; `latency_name`: what the tool calls end-to-end
    latency; `extras`: also max ITL and the achieved concurrency; warm-ups: `warmup_at_once`
    (all together, else at the benchmark's concurrency), output capped at `warmup_output_cap`.
    """

    prefix: str
    itl_per_token: bool
    itl_percentiles: tuple[float, ...]
    latency_name: str
    extras: bool
    warmup_at_once: bool
    warmup_output_cap: int | None
    source: str


class Launcher(Protocol):
    """An engine's launch configuration for a planned deployment."""

    def files(self, deployment: Deployment) -> dict[str, str]:
        """File name → text (a launch script, an options file); empty when the engine cannot serve it."""
        ...

    def script(self, deployment: Deployment) -> str | None:
        """The launch script's text (None: this engine writes no script)."""
        ...


@dataclass(frozen=True)
class Scheduler:
    """The scheduler's habits: the token budget's rule, where prompt chunks run, which DP rank a request takes."""

    budget: Literal["truncate", "defer"]
    prefill_schedule: Literal["separate", "mixed"]
    dp_balance: Literal["round_robin", "fewest_requests", "least_loaded", "most_free_kv"]
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class KvOffload:
    """The engine's host-memory KV tier by default (specplan.simulator.engine.cluster.kv_tiers): its size as a multiple
    of the GPU prefix cache, where the engine states it that way."""

    host_ratio: float
    source: str


@dataclass(frozen=True)
class AicTables:
    """The engine in NVIDIA AIConfigurator's database, as the profile importer reads it (specplan.hwprofiles.aiconfigurator).

    `memory_fraction`: what the engine's memory fraction is a fraction of, in the package's terms
    (`memory_fraction_kind` of its KV estimate: `of_total` GPU memory, or `of_free` memory once the
    weights are loaded); `version`: the database version the built-in profiles read
    (hwprofiles/builtins.py; None: no built-in reads this engine's tables); `twin`: the engine whose
    table of the same database and GPU the physical rule holds each GEMM and MoE operator against, at
    that engine's own `version` (hwprofiles/aiconfigurator/physical_rule.py; None: no twin).
    """

    memory_fraction: Literal["of_total", "of_free"]
    version: str | None
    twin: str | None
    source: str


NO_TABLES = AicTables(memory_fraction="of_total", version=None, twin=None,
                      source="no engine: the package's default kind, no built-in, no twin")


@dataclass(frozen=True)
class EngineTraits:
    """One engine version's habits (specplan.engines lists who asks which).

    `execution`: how a step runs (graph, piecewise or eager: specplan.engines.modes);
    `all_to_all`: which all-to-all kernels a step runs and what normal mode costs; `eager`:
    the host's launch cost and kernels per layer (specplan.engines.eager); `caps`: the
    engine's own limits (specplan.engines.caps); `kv_offload`: its host KV tier's default size
    (`engine.prefix_cache.host.ratio` when the scenario gives none); `dp_scheduler`: how its scheduler runs
    data-parallel attention ranks together (specplan.engines.dp_scheduler: the prefill delayer, which
    steps with prompt chunks are priced per rank). None where
    no public rule is pinned. `aic`: the engine in AIConfigurator's database (memory-fraction kind, the
    built-ins' table version, the physical rule's twin engine).
    """

    name: str
    version: str
    label: str
    graphs: GraphRule
    host: HostCycle | None
    scheduler: Scheduler
    client: BenchClient | None
    launch: Launcher | None
    execution: ExecutionRule | None = None
    all_to_all: AllToAllRule | None = None
    eager: EagerCost | None = None
    caps: Caps | None = None
    kv_offload: KvOffload | None = None
    dp_scheduler: DpScheduler | None = None
    aic: AicTables = NO_TABLES
