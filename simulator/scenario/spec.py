"""The scenario contract (docs/reference/scenario.md) as frozen dataclasses: hardware, cluster, engine, policy, the whole.

The drafter's and the workload's sections are defined beside their models
(`specplan.simulator.drafters.spec`, `specplan.traces.spec`), the study blocks (sweep, SLA)
in `specplan.simulator.scenario.study`; `Scenario` ties them together.
`specplan.simulator.core.schema.build` validates a mapping against these classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from specplan.engines import engine_traits
from specplan.errors import SpecplanError
from specplan.hwprofiles.inline import LinearProfile, TableProfile
from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Tagged, Word, num
from specplan.simulator.drafters.spec import DrafterSpec
from specplan.simulator.scenario.deployment import PrefillPoolSpec, PrefixCacheSpec
from specplan.simulator.scenario.policy import validate_policy
from specplan.simulator.scenario.search import SearchSpec
from specplan.simulator.scenario.study import SlaSpec, SweepSpec
from specplan.traces.spec import MixtureLength, SessionArrivals, TraceArrivals, WorkloadSpec


@dataclass(frozen=True)
class Horizon:
    """How long to simulate: seconds of arrivals/running, or a number of arrivals (one of the two)."""

    duration_s: float | None = num(None, gt=0, doc="simulated seconds of arrivals (open loop) or of running "
                                   "(closed loop); this or `requests`, not both (--set of one drops the other)", example=60)
    warmup_s: float = num(0.0, ge=0, doc="seconds at the start left out of every metric (the measurement window "
                          "is (warmup_s, end])")
    requests: int | None = num(None, ge=1, doc="stop after this many arrivals instead of after a duration (not with duration_s)",
                               unit="requests")

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
    """The decode replicas' GPUs: the step-time profile they run at, and how many GPUs one replica takes."""

    profile: str | Annotated[LinearProfile | TableProfile, Tagged("kind")] = num(
        doc="step-time profile: `builtin:NAME`, a profile CSV path (relative to the scenario), or an inline "
            "`{kind: linear, ...}` / `{kind: table, ...}`", example="builtin:h200-llama3.1-8b-vllm")
    gpus_per_replica: int = num(1, ge=1, doc="GPUs one decode replica occupies (the per-GPU figures divide by "
                                "every GPU)", unit="GPUs")


@dataclass(frozen=True)
class Cluster:
    """The decode replicas, how requests are routed to them, and an optional prefill pool in front."""

    replicas: int = num(1, ge=1, doc="decode replicas (each `hardware.gpus_per_replica` GPUs)", unit="replicas")
    router: Literal["round_robin", "least_loaded", "random", "session"] = num(
        "round_robin", doc="how an arriving request picks its decode replica (random: its own named stream; "
                           "session: a consistent hash of its conversation over replicas and attention ranks, so a "
                           "session's turns meet their cached prefix)")
    prefill: PrefillPoolSpec | None = num(None, doc="a pool of prefill GPUs priced from a prefill profile, its KV "
                                          "sent to the decode replicas over a link (replaces engine.prefill)")


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
    tokens_per_s: float = num(gt=0, doc="prompt tokens the prefill stage computes per second (a FIFO stage "
                              "that costs no GPUs)", unit="tokens/s", example=40000)
    first_token: Literal["decode", "prefill"] = num(
        "decode", doc="where a request's first token comes from: decode, the first decode step once a slot holds "
                      "the request (TTFT includes the wait for it); prefill, the stage's end (an early TensorRT-LLM "
                      "disaggregated server)")

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
    chunk_tokens: int = num(ge=1, doc="prompt tokens of one chunk: one decode step's (mixed) or one prefill "
                            "batch's (separate)", example=2048)
    schedule: Literal["auto", "separate", "mixed"] = num(
        "auto", doc="how prompt chunks share the engine (specplan.simulator.engine.phases): mixed, into decode "
                    "steps within one token budget (vLLM V1); separate, a prefill batch on its own step while that "
                    "rank's decodes wait (SGLang); auto, separate for SGLang profiles, else mixed")
    profile: str | None = num(None, doc="the prefill (context-phase) profile that prices a separate prefill "
                              "batch: a built-in name or a file (default: the decode profile at its tokens)",
                              example="b200-deepseek-v4-flash-tp4-sglang-prefill")

    @property
    def stage_first_token(self) -> bool:
        """No stage apart from the engine's steps: a request's last prompt chunk emits its first token."""
        return False


Prefill = Annotated[DisaggregatedPrefill | ChunkedPrefill, Tagged("mode")]
NO_PREFILL_STAGE = DisaggregatedPrefill(tokens_per_s=1e12)   # the default: prefill costs no time


@dataclass(frozen=True)
class CudaGraph:
    """Decode steps replay CUDA graphs captured at fixed sizes (specplan.simulator.engine.price.graphs)."""

    engine: Literal["auto", "vllm", "sglang", "trtllm"] = num(
        "auto", doc="whose capture rule (specplan.engines): vllm pads a step's tokens, sglang and trtllm its "
                    "requests; auto, the serving engine's (`engine.name`), vLLM's rule where none is known")
    capture_sizes: tuple[int, ...] | None = num(None, ge=1, doc="the captured sizes (default: the engine's own "
                                                "list)", unit="tokens (vllm) / requests (sglang)")
    max_capture_size: int | None = num(None, ge=1, doc="the largest captured size (vLLM "
                                       "max_cudagraph_capture_size, SGLang cuda_graph_max_bs)",
                                       unit="tokens (vllm) / requests (sglang)")
    eager_overhead_ms: float | None = num(None, ge=0, doc="what an eager decode step (beyond the largest size) pays "
                                          "on top of its kernels where no public kernel count prices it by its "
                                          "launches (an engine without a mode rule, a profile naming no model, an MoE "
                                          "model such as DeepSeek-V3); default 2.0, assumed: ~400 kernel launches of "
                                          "~5 µs. Refused where the engine prices an eager step by its launches "
                                          "(DeepSeek-V4 under vLLM or SGLang), which it would not move", unit="ms")
    extend_op_us: float | None = num(None, gt=0, doc="the host's cost per kernel of an eager or piecewise step that "
                                     "carries prompt tokens (an extend step), where the engine prices such a step "
                                     "by its kernel launches (DeepSeek-V4 under vLLM or SGLang); default: the "
                                     "launcher's 4.7 µs (tritonbench PR #1017). A decode step keeps its family's "
                                     "figure (V4: 28.5 µs, sglang PR #24047). Refused where no launch-priced family "
                                     "applies", unit="µs", example=9.1)


@dataclass(frozen=True)
class Host:
    """Host time of speculating steps by engine (specplan.simulator.engine.host)."""

    engine: Literal["auto", "vllm", "sglang", "trtllm", "none"] = num(
        "auto", doc="whose host time a speculating step pays (auto: the serving engine's, `engine.name`; "
                    "trtllm and none: no figure is known, none is paid)")
    spec_step_fraction: float | None = num(None, ge=0, doc="host time of a speculating step as a share of a plain "
                                           "step (overrides the engine's figure: vLLM 0.084, SGLang 0.049)",
                                           unit="share of a plain step")
    spec_cycle_ms: float | None = num(None, ge=0, doc="a speculating cycle's fixed host time beyond the verify "
                                      "and draft graphs (overrides the fraction; DeepSeek-V4 built-ins: SGLang "
                                      "1.089, vLLM 0.573, sglang #29960)", example=1.089)


@dataclass(frozen=True)
class DpAttention:
    """Data-parallel attention over wide EP: each rank its own KV cache, request slots and token cap.

    Defaults split the engine's totals evenly (kv_capacity_tokens, max_batch_requests and
    max_step_tokens divided by `ranks`).
    """

    ranks: int = num(ge=1, doc="attention ranks (data-parallel size)", example=8)
    kv_capacity_tokens: int | None = num(None, ge=1, doc="KV tokens one rank holds (default: the engine's total "
                                         "/ ranks)")
    max_batch_requests: int | None = num(None, ge=1, doc="request slots of one rank (vLLM max_num_seqs of a DP "
                                         "engine; default: the engine's / ranks)", unit="requests")
    max_step_tokens: int | None = num(None, ge=1, doc="tokens one rank's step may hold (max_num_batched_tokens, "
                                      "DeepEP's dispatch cap; default: the engine's / ranks)")
    chunk_tokens: int | None = num(None, ge=1, doc="prompt tokens of one rank's chunk under chunked prefill "
                                   "(default: engine.prefill.chunk_tokens / ranks, as SGLang divides "
                                   "--chunked-prefill-size by --dp)")
    balance: Literal["auto", "round_robin", "fewest_requests", "least_loaded", "most_free_kv"] = num(
        "auto", doc="which rank a request goes to (specplan.simulator.engine.cluster.ranks): round_robin (SGLang's "
                    "default), fewest_requests (SGLang total_requests), least_loaded (vLLM: 4 x waiting + "
                    "running), most_free_kv (at admission); auto: round_robin for SGLang profiles, least_loaded "
                    "for vLLM's, most_free_kv otherwise")
    prefill_delayer: bool = num(False, doc="SGLang's prefill delayer (--enable-prefill-delayer, or "
                                "SGLANG_SCHEDULER_DECREASE_PREFILL_IDLE=1; off by default): while some ranks have a "
                                "new prompt to prefill and others none, no rank starts one, for up to "
                                "prefill_delay_passes steps in a row (specplan.engines.dp_scheduler); needs the "
                                "separate prefill schedule")
    decode_during_prefill: Literal["auto", "decode", "idle"] = num(
        "auto", doc="what a rank with decoding requests runs in a step where another rank runs a prefill batch "
                    "(separate prefill schedule): decode (its decode batch, in the same forward), idle (an idle "
                    "batch: its decoding requests wait); auto: the engine's rule, idle for SGLang under "
                    "speculative decoding (its scheduler keeps prefill and decode batches out of one DP step), "
                    "decode otherwise (specplan.engines.dp_scheduler)")
    prefill_delay_passes: int | None = num(None, ge=1, le=100_000, doc="the most steps in a row the prefill delayer "
                                           "holds new prompts back (--prefill-delayer-max-delay-passes; default: "
                                           "the engine's, 30 in SGLang)", unit="steps")


@dataclass(frozen=True)
class AllToAll:
    """The MoE's all-to-all kernels (specplan.engines.modes): which backend, DeepEP's mode, a rank's token cap."""

    backend: Literal["none", "deepep", "megamoe"] = num(
        "none", doc="the all-to-all backend of expert parallelism: none (the profile's all-reduce or gather), "
                    "deepep (SGLang --moe-a2a-backend deepep, vLLM --all2all-backend deepep_*), megamoe "
                    "(DeepGEMM's fused dispatch, experts and combine)")
    mode: Literal["auto", "normal", "low_latency"] = num(
        "auto", doc="DeepEP's mode: auto (SGLang: normal for a step where a rank prefills, low_latency for "
                    "decode; vLLM has none, name one), normal (no decode graph in SGLang; vLLM splits its graph "
                    "at the MoE under DP) or low_latency")
    tokens_per_rank: int | None = num(None, ge=1, le=1_048_576, doc="the most tokens one rank's decode dispatch "
                                      "carries (SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK, SGLang's MegaMoE "
                                      "cap); under DP attention it caps a rank's step with "
                                      "dp_attention.max_step_tokens (the smaller binds); default: the engine's "
                                      "(SGLang DeepEP 128, MegaMoE 1024)", unit="tokens")

    def validate(self, path: str) -> None:
        if self.backend != "deepep" and self.mode != "auto":
            raise ScenarioError(f"{path}.mode", f"a DeepEP mode needs backend deepep (got backend {self.backend})")


@dataclass(frozen=True)
class Engine:
    """One replica's engine: batch and KV limits, prefill, the step's token budget and how the step is priced."""

    max_batch_requests: Annotated[int, Word("auto")] = num(
        ge=1, doc="requests one replica runs at once (vLLM max_num_seqs x DP ranks, SGLang max_running_requests); "
                  "auto: the serving engine's own default (SGLang DeepSeek-V4 256 server-wide, else its request "
                  "pool; vLLM 1024 per DP rank on GPUs of 70 GiB or more, else 256; specplan.engines.caps)",
        unit="requests", example=128)
    name: Literal["auto", "vllm", "sglang", "trtllm", "none"] = num(
        "auto", doc="the serving engine whose habits the replica runs by (specplan.engines: CUDA-graph rule, host "
                    "cycle, token budget, prefill schedule, DP dispatch); auto, the engine a measured built-in was "
                    "read for (its `backend:` provenance), none otherwise")
    version: str | None = num(None, doc="the engine's version (its traits-table row: the newest row at or below "
                              "it, said in one line where it has none of its own; under `auto` the profile's "
                              "engine first); default: the profile's backend version, else the engine's newest row",
                              example="0.5.14")
    kv_capacity_tokens: int | None = num(None, ge=1, doc="KV tokens one replica holds (a request reserves prompt + "
                                         "output + block); default: the profile's memory model at the engine's "
                                         "memory fraction (memory_fraction), required without one")
    memory_fraction: float | None = num(None, gt=0, le=1, doc="the share of each GPU's memory the engine takes "
                                        "(SGLang --mem-fraction-static: weights and the KV pool; vLLM "
                                        "--gpu-memory-utilization: weights, activations and the KV pool); "
                                        "default: the engine's own rule (SGLang's reserve rule for the GPU, "
                                        "parallelism, chunk and graphs; vLLM 0.9). It sizes the default "
                                        "kv_capacity_tokens through the profile's memory model as the engine "
                                        "counts it; never refused",
                                        unit="share of GPU memory", example=0.85)
    prefill: Prefill = num(NO_PREFILL_STAGE, doc="prefill on separate workers at a fixed rate (`disaggregated`) "
                           "or prompt chunks inside the decode steps (`chunked`); default: prefill costs nothing")
    scheduling_overhead_ms: float = num(0.0, ge=0, doc="paid per step by policies that decide from the current "
                                        "step's drafts synchronously")
    max_step_tokens: int | None = num(None, ge=1, doc="tokens one forward may hold (vLLM max_num_batched_tokens; "
                                      "default: the profile's largest measured B)")
    host_overhead_ms: float = num(0.0, ge=0, doc="host time every step pays whatever the policy (nothing overlaps "
                                  "it)")
    host_overhead_per_request_ms: float = num(0.0, ge=0, doc="host time every step pays per running request")
    sampling_ms_per_token: float = num(0.0, ge=0, doc="the sampler's time per verified token (logits processing, "
                                       "rejection sampling), priced with the verify forward at its B",
                                       unit="ms per token")
    attention: Literal["varlen", "padded"] = num(
        "varlen", doc="KV context a step is priced at: Σ per-request KV (varlen kernels), or per phase requests × "
                      "the longest KV (padded kernels)")
    prefix_cache: PrefixCacheSpec | None = num(None, doc="an LRU prefix cache per replica (chunked prefill only; "
                                               "capacity default: kv_capacity_tokens)")
    attention_profiled_queries: int | None = num(None, ge=1, doc="padded attention: the queries per request the "
                                                 "profile's attention was measured at (the decode phase is "
                                                 "priced × (1 + longest ℓ) / this)", unit="tokens per request")
    cuda_graph: CudaGraph | None = num(None, doc="decode steps replay CUDA graphs captured at fixed sizes (padded "
                                       "to the next one; eager beyond the largest)")
    dp_attention: DpAttention | None = num(None, doc="data-parallel attention over wide EP: each rank its own KV "
                                           "cache, request slots and token cap; default: the ranks a DP built-in's "
                                           "header states (parallelism: ... DP8), none otherwise")
    swa_full_tokens_ratio: float | None = num(None, gt=0, le=1, doc="DeepSeek-V4 under SGLang: the sliding-"
                                              "window pool's share of the full KV pool (the profile's memory "
                                              "model, else kv_capacity_tokens), which caps a rank's running "
                                              "requests (default: the engine's, 0.1 for DeepSeek-V4)",
                                              unit="share of the KV pool")
    all_to_all: AllToAll | None = num(None, doc="the MoE's all-to-all kernels: backend, DeepEP's mode and a "
                                      "rank's token cap (a step in DeepEP normal mode runs eager and pays its "
                                      "MoE at normal-mode cost; default: none)")
    host: Host = num(Host(), doc="host time of speculating steps by engine (on by default for measured "
                     "built-ins)")
    budget: Literal["auto", "truncate", "defer"] = num(
        "auto", doc="the token budget's rule: truncate (vLLM: drafts cut at the edge) or defer (whole requests "
                    "wait); auto: truncate for vLLM-sourced profiles, else defer")

    def validate(self, path: str) -> None:
        if self.version is not None:
            if self.name == "none":
                raise ScenarioError(f"{path}.version", f"a version needs an engine: {path}.name is none; set it "
                                    "(vllm, sglang or trtllm) or leave it auto on a measured built-in")
            if self.name != "auto":  # auto resolves from the profile first (load.check_serving_engine)
                check_version(self.name, self.version, f"{path}.version")
        if self.prefix_cache is not None and not isinstance(self.prefill, ChunkedPrefill):
            raise ScenarioError(f"{path}.prefix_cache", "a replica's prefix cache needs chunked prefill (aggregated "
                                "serving); for disaggregated serving put it in cluster.prefill.prefix_cache")
        dp = self.dp_attention
        if dp is not None and dp.chunk_tokens is not None and not isinstance(self.prefill, ChunkedPrefill):
            raise ScenarioError(f"{path}.dp_attention.chunk_tokens", "a rank's prompt chunk needs chunked prefill "
                                "(engine.prefill: {mode: chunked, ...})")


@dataclass(frozen=True)
class PolicySpec:
    """The verification policy: a registered name and its parameters (checked against the policy's Params)."""

    name: str = num("none", doc="the policy (none, mtp-1, static, length-schedule, threshold, goodput, "
                    "dspark-greedy, dspark-global, dspark-async, oracle)")
    params: dict[str, Any] = num({}, doc="the policy's parameters (see the policy.params sections below)")


@dataclass(frozen=True)
class Scenario:
    """A whole what-if question: hardware, cluster, engine, drafter, policy, workload."""

    name: str = num(doc="the scenario's name (in every output; a run's metrics.prom model_name)",
                    example="chat-dspark")
    seed: int = num(ge=0, doc="every random draw flows from it through named SeedSequence children", example=7)
    horizon: Horizon = num(doc="how long to simulate and what to leave out", example={"duration_s": 60,
                                                                                        "warmup_s": 5})
    hardware: Hardware = num(doc="the decode GPUs and their step-time profile",
                             example={"profile": "builtin:h200-llama3.1-8b-vllm"})
    engine: Engine = num(doc="one replica's engine: limits, prefill, how a step is priced",
                         example={"max_batch_requests": 128})
    workload: WorkloadSpec = num(doc="arrivals and request lengths",
                                 example={"arrivals": {"kind": "poisson", "rate_per_s": 6}})
    cluster: Cluster = num(Cluster(), doc="replicas, routing and a prefill pool")
    drafter: DrafterSpec = num(DrafterSpec(), doc="the drafter: family, block, acceptance, confidence head, "
                               "drafting cost (default: no speculation)")
    policy: PolicySpec = num(PolicySpec(), doc="the verification policy")
    description: str = num("", doc="free text shown in reports")
    sweep: SweepSpec | None = num(None, doc="variants × a load axis × seeds, for `specplan sweep`, `plan` and "
                                  "`tune`")
    sla: SlaSpec | None = num(None, doc="the SLA the comparisons and plans read when the command line gives none")
    search: SearchSpec | None = num(None, doc="a deployment space (GPUs, serving modes, variants) that makes "
                                    "`specplan plan` a search")
    source: str = field(default="<mapping>", compare=False, metadata={"internal": True})  # the file it came from
    # what loading resolved from the profile that a user should read (DP ranks taken from its header, a memory
    # model that disagrees with the engine's fraction): one line each, printed by `specplan run` and `check`
    notes: tuple[str, ...] = field(default=(), compare=False, metadata={"internal": True})

    def validate(self, path: str) -> None:
        validate_policy(self.policy, self.drafter, "policy")
        if isinstance(self.workload.arrivals, SessionArrivals) and self.horizon.duration_s is None:
            raise ScenarioError("horizon.duration_s", "session lanes run for a duration (the measured window after "
                                "the warm-up barrier); give duration_s instead of requests")
        validate_domains(self.workload, self.drafter.acceptance.domains, "workload")
        if self.cluster.prefill is not None:
            validate_pool_engine(self.engine)


def check_version(name: str, version: str, path: str) -> None:
    """An engine version the traits table can answer for (the newest row at or below it)."""
    try:
        engine_traits(name, version)
    except SpecplanError as err:
        raise ScenarioError(path, str(err)) from None


def validate_domains(workload: WorkloadSpec, mix: dict[str, float], path: str) -> None:
    """Every domain the workload names must be in drafter.acceptance.domains (load-time check)."""
    active = [d for d, share in mix.items() if share > 0]
    arrivals = workload.arrivals
    if isinstance(arrivals, (TraceArrivals, SessionArrivals)) and arrivals.domain is not None \
            and arrivals.domain not in active:
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
