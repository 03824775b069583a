"""The scenario contract (DESIGN.md §3) as frozen dataclasses: hardware, cluster, engine, policy, the whole.

The drafter's and the workload's sections are defined beside their models
(`specplan.simulator.drafters.spec`, `specplan.traces.spec`), the study blocks (sweep, SLA)
in `specplan.simulator.scenario.study`; `Scenario` ties them together.
`specplan.simulator.core.schema.build` validates a mapping against these classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from specplan.hwprofiles.inline import LinearProfile, TableProfile
from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Tagged, num
from specplan.simulator.drafters.spec import DrafterSpec
from specplan.simulator.scenario.deployment import PrefillPoolSpec, PrefixCacheSpec
from specplan.simulator.scenario.policy import validate_policy
from specplan.simulator.scenario.search import SearchSpec
from specplan.simulator.scenario.study import SlaSpec, SweepSpec
from specplan.traces.spec import MixtureLength, TraceArrivals, WorkloadSpec


@dataclass(frozen=True)
class Horizon:
    """How long to simulate: seconds of arrivals/running, or a number of arrivals (one of the two)."""

    duration_s: float | None = num(None, gt=0)
    warmup_s: float = num(0.0, ge=0)
    requests: int | None = num(None, ge=1)

    def validate(self, path: str) -> None:
        if self.duration_s is None and self.requests is None:
            raise ScenarioError(path, "give 'duration_s' or 'requests'")
        if self.duration_s is not None and self.requests is not None:
            raise ScenarioError(path, "give 'duration_s' or 'requests', not both (arrivals would stop at one "
                                "while the run measures to the other)")
        if self.duration_s is not None and self.warmup_s >= self.duration_s:
            raise ScenarioError(
                f"{path}.warmup_s", f"must be shorter than duration_s ({self.duration_s:g}), got {self.warmup_s:g}"
            )


@dataclass(frozen=True)
class Hardware:
    profile: str | Annotated[LinearProfile | TableProfile, Tagged("kind")]
    gpus_per_replica: int = num(1, ge=1)


@dataclass(frozen=True)
class Cluster:
    replicas: int = num(1, ge=1)
    router: Literal["round_robin", "least_loaded", "random"] = "round_robin"
    prefill: PrefillPoolSpec | None = None   # a prefill pool of GPUs (specplan.simulator.scenario.deployment)


@dataclass(frozen=True)
class DisaggregatedPrefill:
    """Prefill on separate workers: a FIFO stage at tokens_per_s, its KV at the decode engine when it ends.

    `first_token` is where the client's first token comes from:
    `decode` (the default, as a prefill pool has it): the decode engine's first step for the
    request, so TTFT = queueing + prefill + the wait for a decode slot + that step (SGLang's PD
    mode, Dynamo and vLLM's disaggregated proxies stream from the decode side, which holds the
    request before its KV arrives); `prefill`: the stage's end, before a decode slot holds the
    request (an early TensorRT-LLM disaggregated server streamed the context server's token first).
    """

    KIND: ClassVar[str] = "disaggregated"
    TAG: ClassVar[str] = "mode"
    tokens_per_s: float = num(gt=0)
    first_token: Literal["decode", "prefill"] = "decode"

    @property
    def stage_first_token(self) -> bool:
        """The stage emits each request's first token, outside any engine step."""
        return self.first_token == "prefill"


@dataclass(frozen=True)
class ChunkedPrefill:
    """Prompts computed in chunks of at most chunk_tokens by the decode engine itself (aggregated serving).

    `schedule` is how the engine's scheduler places a chunk (specplan.simulator.engine.phases):
    `mixed` (vLLM V1: one token budget, chunks ride in decode steps), `separate` (SGLang without
    --enable-mixed-chunk: a prefill batch runs whenever prompts wait, decode waits for it), `auto`
    (separate for profiles read for SGLang, mixed otherwise). `profile` prices the prefill steps of
    `separate` (a context-phase profile over new tokens and pairs, e.g. a `*-prefill` built-in);
    without it they are priced on the decode profile at their tokens.
    """

    KIND: ClassVar[str] = "chunked"
    TAG: ClassVar[str] = "mode"
    chunk_tokens: int = num(ge=1)
    schedule: Literal["auto", "separate", "mixed"] = "auto"
    profile: str | None = None

    @property
    def stage_first_token(self) -> bool:
        """No stage apart from the engine's steps: a request's last prompt chunk emits its first token."""
        return False


Prefill = Annotated[DisaggregatedPrefill | ChunkedPrefill, Tagged("mode")]
NO_PREFILL_STAGE = DisaggregatedPrefill(tokens_per_s=1e12)   # the default: prefill costs no time


@dataclass(frozen=True)
class CudaGraph:
    """Decode steps replay CUDA graphs captured at fixed sizes (specplan.simulator.engine.graphs)."""

    engine: Literal["vllm", "sglang"] = "vllm"      # vllm: sizes are tokens; sglang: sizes are requests
    capture_sizes: tuple[int, ...] | None = num(None, ge=1)   # default: the engine's own list
    max_capture_size: int | None = num(None, ge=1)  # vLLM max_cudagraph_capture_size / SGLang cuda_graph_max_bs
    eager_overhead_ms: float = num(2.0, ge=0)       # a step beyond the largest size runs eager and pays this


@dataclass(frozen=True)
class Host:
    """Host time of speculating steps by engine (specplan.simulator.engine.host)."""

    engine: Literal["auto", "vllm", "sglang", "none"] = "auto"   # auto: the measured built-in's backend
    spec_step_fraction: float | None = num(None, ge=0)           # overrides the engine's figure
    spec_cycle_ms: float | None = num(None, ge=0)                # a speculating step's fixed host time (ms)


@dataclass(frozen=True)
class DpAttention:
    """Data-parallel attention over wide EP: each rank its own KV cache, request slots and token cap.

    Defaults split the engine's totals evenly (kv_capacity_tokens, max_batch_requests and
    max_step_tokens divided by `ranks`).
    """

    ranks: int = num(ge=1)
    kv_capacity_tokens: int | None = num(None, ge=1)     # per rank
    max_batch_requests: int | None = num(None, ge=1)     # per rank (vLLM max_num_seqs of a DP engine)
    max_step_tokens: int | None = num(None, ge=1)        # per rank (max_num_batched_tokens, DeepEP's dispatch cap)
    chunk_tokens: int | None = num(None, ge=1)           # per rank: prompt tokens of a rank's chunk (chunked prefill)
    # which rank a request goes to (specplan.simulator.engine.ranks): round_robin (SGLang's default
    # --load-balance-method), fewest_requests (SGLang total_requests / shortest_queue), least_loaded (vLLM's
    # DP client: 4 x waiting + running), most_free_kv (at admission, the rank with the most free KV), auto
    # (round_robin for SGLang profiles, least_loaded for vLLM's, most_free_kv otherwise)
    balance: Literal["auto", "round_robin", "fewest_requests", "least_loaded", "most_free_kv"] = "auto"


@dataclass(frozen=True)
class Engine:
    max_batch_requests: int = num(ge=1)
    kv_capacity_tokens: int = num(ge=1)
    prefill: Prefill = NO_PREFILL_STAGE
    scheduling_overhead_ms: float = num(0.0, ge=0)
    max_step_tokens: int | None = num(None, ge=1)
    # host work every step pays whatever the policy (nothing overlaps it): a + b·requests
    host_overhead_ms: float = num(0.0, ge=0)
    host_overhead_per_request_ms: float = num(0.0, ge=0)
    # KV context a step's profile lookup uses: Σ per-request KV (varlen attention kernels), or
    # per phase (decode, prompt chunks) requests × the phase's longest KV (attention padded to the
    # longest sequence within separate decode and prefill kernels); specplan.simulator.engine.batch.attention_context
    attention: Literal["varlen", "padded"] = "varlen"
    # aggregated serving (chunked prefill): an LRU prefix cache per replica (capacity default: kv_capacity_tokens)
    prefix_cache: PrefixCacheSpec | None = None
    # padded attention also pads the verify queries to the step's longest block: with the queries
    # per request the profile's attention was measured at, the decode phase's context is priced
    # × (1 + the longest ℓ the step can verify) / attention_profiled_queries (None: not priced)
    attention_profiled_queries: int | None = num(None, ge=1)

    cuda_graph: CudaGraph | None = None
    dp_attention: DpAttention | None = None
    host: Host = field(default_factory=Host)
    # the token budget's rule: truncate (vLLM: a request's drafts are cut at the budget edge) or defer
    # (whole requests wait for the next step); auto: truncate for vLLM-sourced built-ins, else defer
    budget: Literal["auto", "truncate", "defer"] = "auto"

    def validate(self, path: str) -> None:
        if self.prefix_cache is not None and not isinstance(self.prefill, ChunkedPrefill):
            raise ScenarioError(f"{path}.prefix_cache", "a replica's prefix cache needs chunked prefill (aggregated "
                                "serving); for disaggregated serving put it in cluster.prefill.prefix_cache")
        dp = self.dp_attention
        if dp is not None and dp.chunk_tokens is not None and not isinstance(self.prefill, ChunkedPrefill):
            raise ScenarioError(f"{path}.dp_attention.chunk_tokens", "a rank's prompt chunk needs chunked prefill "
                                "(engine.prefill: {mode: chunked, ...})")


@dataclass(frozen=True)
class PolicySpec:
    name: str = "none"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    """A whole what-if question: hardware, cluster, engine, drafter, policy, workload."""

    name: str
    seed: int = num(ge=0)
    horizon: Horizon = num()
    hardware: Hardware = num()
    engine: Engine = num()
    workload: WorkloadSpec = num()
    cluster: Cluster = field(default_factory=Cluster)
    drafter: DrafterSpec = field(default_factory=DrafterSpec)
    policy: PolicySpec = field(default_factory=PolicySpec)
    description: str = ""
    sweep: SweepSpec | None = None
    sla: SlaSpec | None = None
    search: SearchSpec | None = None     # a deployment space for plans (specplan.simulator.scenario.search)
    source: str = field(default="<mapping>", compare=False)

    def validate(self, path: str) -> None:
        validate_policy(self.policy, self.drafter, "policy")
        validate_domains(self.workload, self.drafter.acceptance.domains, "workload")
        if self.cluster.prefill is not None:
            validate_pool_engine(self.engine)


def validate_domains(workload: WorkloadSpec, mix: dict[str, float], path: str) -> None:
    """Every domain the workload names must be in drafter.acceptance.domains (load-time check)."""
    active = [d for d, share in mix.items() if share > 0]
    arrivals = workload.arrivals
    if isinstance(arrivals, TraceArrivals) and arrivals.domain is not None and arrivals.domain not in active:
        raise ScenarioError(f"{path}.arrivals.domain",
                            f"'{arrivals.domain}' is not in drafter.acceptance.domains (active: {', '.join(active)})")
    for key in ("prompt_tokens", "output_tokens"):
        spec = getattr(workload, key)
        if not isinstance(spec, MixtureLength):
            continue
        for name in spec.components:
            if name not in DOMAINS:
                raise ScenarioError(f"{path}.{key}.components.{name}", f"unknown domain (valid: {', '.join(DOMAINS)})")
            if name not in mix:
                raise ScenarioError(f"{path}.{key}.components.{name}",
                                    f"domain not in drafter.acceptance.domains (active: {', '.join(active)})")
        for name in active:
            if name not in spec.components:
                raise ScenarioError(f"{path}.{key}.components", f"no length distribution for domain '{name}' of the mix")


def validate_pool_engine(engine: Engine) -> None:
    """A prefill pool replaces the fixed-rate prefill stage: engine.prefill must not say otherwise."""
    prefill = engine.prefill
    if isinstance(prefill, ChunkedPrefill):
        raise ScenarioError("engine.prefill", "chunked prefill runs inside the decode replicas; with a "
                            "cluster.prefill pool remove engine.prefill")
    if prefill.tokens_per_s != NO_PREFILL_STAGE.tokens_per_s:
        raise ScenarioError("engine.prefill.tokens_per_s", "the fixed-rate prefill stage and a cluster.prefill "
                            "pool exclude each other; remove engine.prefill")
    if prefill.stage_first_token:
        raise ScenarioError("engine.prefill.first_token", "a cluster.prefill pool's requests get their first token "
                            "from their first decode step; remove engine.prefill")
