"""The `search:` block: the deployment space a capacity plan searches (schema and expansion only).

    search:
      hardware:                                   # GPU types and parallelism: one entry per replica shape
        - {label: H200, profile: builtin:h200-llama3.1-8b-vllm, gpus_per_replica: 1, gpu_hour_usd: 3.5,
           prefill_profile: builtin:h200-llama3.1-8b-vllm-prefill}
        - {label: B200, profile: builtin:b200-llama3.1-8b-vllm, gpu_hour_usd: 5.0,
           prefill_profile: builtin:b200-llama3.1-8b-vllm-prefill}
      serving:                                    # aggregated, and disaggregated at prefill:decode ratios
        - {mode: aggregated, chunk_tokens: 2048}
        - {mode: disaggregated, prefill_per_decode: [0.25, 0.5], link: {gbps: 400, latency_ms: 0.5},
           model: llama3-8b, max_batch_tokens: 8192}
      variants:                                   # drafter / policy variants, merged as sweep.variants are
        - {label: MTP-1, drafter: {family: mtp, block_size: 1}, policy: {name: mtp-1}}
        - {label: DSpark async, drafter: {family: dspark}, policy: {name: dspark-async}}
      block_sizes: [5, 7]                         # optional: γ for the variants that speculate beyond one token

Place in the data flow: the scenario layer validates the block (one line,
naming the key, for a bad space) and `search_points` expands it into
`SearchPoint`s, each a labelled candidate deployment whose `mapping(n)`
is a plain scenario mapping with n decode replicas (and, disaggregated,
ceil(ratio · n) prefill replicas on the hardware entry's prefill profile).
The planner (specplan.simulator.study) finds each point's fewest GPUs; this
module prices none and simulates nothing. `usd_per_hour` and
`usd_per_million_tokens` turn a point's GPU count and throughput into the
figures a plan ranks by.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from specplan.hwprofiles import profile_file
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Tagged, num
from specplan.simulator.scenario.deployment import KvLink, PrefixCacheSpec
from specplan.simulator.scenario.merge import deep_merge, strip_study_blocks

DRAFTING_FAMILIES = ("mtp", "eagle3", "dflash", "dspark")


@dataclass(frozen=True)
class HardwareOption:
    """One replica shape: a GPU type at a parallelism, as a decode profile (and a prefill profile)."""

    label: str = num(doc="the option's name in tables", example="H200")
    profile: str | dict[str, Any] = num(doc="the decode profile of this GPU type at this parallelism",
                                        example="builtin:h200-llama3.1-8b-vllm")
    gpus_per_replica: int = num(1, ge=1, doc="GPUs one decode replica occupies", unit="GPUs")
    gpu_hour_usd: float | None = num(None, gt=0, doc="price of one GPU-hour (give it on every option or none)",
                                     unit="USD per GPU-hour")
    prefill_profile: str | None = num(None, doc="the prefill-step profile for disaggregated serving")
    prefill_gpus_per_replica: int | None = num(None, ge=1, doc="GPUs one prefill replica occupies (default: "
                                               "gpus_per_replica)", unit="GPUs")
    drafter_latency: dict[str, str | dict[str, Any]] = num(
        {}, doc="drafting cost on this GPU type at this parallelism, per drafter family: a drafter profile "
        "(`builtin:NAME` or a CSV path) or a drafter.latency mapping; replaces the variant's drafter.latency",
        example={"mtp": "builtin:b200-deepseek-v4-flash-tp4-sglang-mtp"})

    def validate(self, path: str) -> None:
        for family in self.drafter_latency:
            if family not in DRAFTING_FAMILIES:
                raise ScenarioError(f"{path}.drafter_latency.{family}", "unknown drafter family (expected one of "
                                    f"{', '.join(DRAFTING_FAMILIES)})")


@dataclass(frozen=True)
class AggregatedServing:
    """Prefill chunks inside the decode steps."""

    KIND: ClassVar[str] = "aggregated"
    TAG: ClassVar[str] = "mode"
    chunk_tokens: int = num(2048, ge=1, doc="prompt tokens one decode step may carry")
    prefix_cache: PrefixCacheSpec | None = num(None, doc="an LRU prefix cache per replica")

    def labels(self) -> list[tuple[str, float | None]]:
        return [("aggregated", None)]


@dataclass(frozen=True)
class DisaggregatedServing:
    """A prefill pool of ceil(ratio · decode replicas) replicas in front of the decode pool."""

    KIND: ClassVar[str] = "disaggregated"
    TAG: ClassVar[str] = "mode"
    prefill_per_decode: tuple[float, ...] = num(gt=0, doc="prefill replicas per decode replica, each ratio a "
                                                "candidate", unit="ratio", example=[0.5, 1])
    link: KvLink = num(doc="each prefill replica's link to the decode pool", example={"gbps": 400})
    model: str | None = num(None, doc="a model shape giving the KV bytes per token (or kv_bytes_per_token)")
    kv_bytes_per_token: int | None = num(None, ge=1, doc="bytes of KV one token moves", unit="bytes")
    max_batch_tokens: int = num(8192, ge=1, doc="new prompt tokens one prefill step computes at most")
    router: Literal["round_robin", "least_loaded", "random", "cache_aware", "pull"] = num(
        "round_robin", doc="how a prompt picks its prefill replica")
    prefix_cache: PrefixCacheSpec | None = num(None, doc="an LRU block cache per prefill replica")

    def validate(self, path: str) -> None:
        if not self.prefill_per_decode:
            raise ScenarioError(f"{path}.prefill_per_decode", "needs at least one prefill:decode ratio")
        if len(set(self.prefill_per_decode)) != len(self.prefill_per_decode):
            raise ScenarioError(f"{path}.prefill_per_decode", "ratios must be distinct")
        if (self.model is None) == (self.kv_bytes_per_token is None):
            raise ScenarioError(path, "give exactly one of 'model' or 'kv_bytes_per_token' (KV bytes per token)")

    def labels(self) -> list[tuple[str, float | None]]:
        return [(f"disaggregated {ratio:g}:1", ratio) for ratio in self.prefill_per_decode]


Serving = Annotated[AggregatedServing | DisaggregatedServing, Tagged("mode")]


@dataclass(frozen=True)
class SearchSpec:
    """The space: hardware × serving × variants (× block sizes); see the module docstring."""

    hardware: tuple[HardwareOption, ...] = num(doc="the GPU types and parallelisms to try",
                                               example=[{"label": "H200", "profile": "builtin:h200-llama3.1-8b-vllm",
                                                         "gpu_hour_usd": 3.5}])
    serving: tuple[Serving, ...] = num((AggregatedServing(),), doc="serving modes to try: aggregated (chunked "
                                       "prefill) and disaggregated at prefill:decode ratios")
    variants: tuple[dict[str, Any], ...] = num((), doc="drafter / policy variants, each a labelled partial "
                                               "scenario (default: the sweep's variants)")
    block_sizes: tuple[int, ...] = num((), ge=1, doc="block sizes to try for each speculating variant",
                                       unit="tokens")

    def validate(self, path: str) -> None:
        check_entries(f"{path}.hardware", [h.label for h in self.hardware], "hardware option")
        check_entries(f"{path}.variants", [v.get("label") for v in self.variants], "variant")
        if not self.serving:
            raise ScenarioError(f"{path}.serving", "needs at least one serving mode")
        priced = [h.gpu_hour_usd is not None for h in self.hardware]
        if any(priced) and not all(priced):
            i = priced.index(False)
            raise ScenarioError(f"{path}.hardware[{i}].gpu_hour_usd", "give a price for every hardware option or none")
        if any(isinstance(s, DisaggregatedServing) for s in self.serving):
            for i, option in enumerate(self.hardware):
                if option.prefill_profile is None:
                    raise ScenarioError(f"{path}.hardware[{i}].prefill_profile",
                                        f"disaggregated serving needs a prefill profile for {option.label!r}")
        if len(set(self.block_sizes)) != len(self.block_sizes):
            raise ScenarioError(f"{path}.block_sizes", "block sizes must be distinct")


def check_entries(path: str, labels: list[Any], what: str) -> None:
    if path.endswith("hardware") and not labels:
        raise ScenarioError(path, "needs at least one hardware option")
    seen: set[str] = set()
    for i, label in enumerate(labels):
        if not isinstance(label, str) or not label:
            raise ScenarioError(f"{path}[{i}].label", f"every {what} needs a non-empty label")
        if label in seen:
            raise ScenarioError(f"{path}[{i}].label", f"duplicate label {label!r}")
        seen.add(label)


@dataclass(frozen=True)
class SearchPoint:
    """One candidate deployment; `mapping(n)` is its scenario at n decode replicas."""

    label: str
    hardware: HardwareOption
    serving: AggregatedServing | DisaggregatedServing
    prefill_per_decode: float | None
    variant: str
    block_size: int | None
    build: Callable[[int], dict[str, Any]]

    def mapping(self, decode_replicas: int) -> dict[str, Any]:
        if decode_replicas < 1:
            raise ScenarioError("search", f"decode replicas must be >= 1, got {decode_replicas}")
        return self.build(decode_replicas)

    def prefill_replicas(self, decode_replicas: int) -> int:
        return 0 if self.prefill_per_decode is None else max(1, math.ceil(self.prefill_per_decode * decode_replicas))

    def gpus(self, decode_replicas: int) -> int:
        prefill_gpus = self.hardware.prefill_gpus_per_replica or self.hardware.gpus_per_replica
        return (decode_replicas * self.hardware.gpus_per_replica
                + self.prefill_replicas(decode_replicas) * prefill_gpus)


def search_points(raw: dict[str, Any], search: SearchSpec) -> list[SearchPoint]:
    """Every point of the space, in the order hardware × serving × variants × block sizes."""
    body = {k: v for k, v in strip_study_blocks(raw).items() if k != "search"}
    variants = list(search.variants) or [{"label": str(body.get("policy", {}).get("name", "base"))}]
    points = []
    for option in search.hardware:
        for serving in search.serving:
            for serving_label, ratio in serving.labels():
                for variant in variants:
                    for gamma in block_sizes_for(variant, body, search.block_sizes):
                        label = " / ".join(x for x in (option.label, serving_label, variant["label"],
                                                         None if gamma is None else f"γ={gamma}") if x)
                        build = point_builder(body, option, serving, ratio, variant, gamma)
                        points.append(SearchPoint(label, option, serving, ratio, variant["label"], gamma, build))
    return points


def block_sizes_for(variant: dict[str, Any], body: dict[str, Any], sizes: tuple[int, ...]) -> list[int | None]:
    """The γ values a variant is tried at: the search's block sizes when it drafts more than one token."""
    drafter = deep_merge(body.get("drafter", {}), variant.get("drafter", {}))
    speculates = drafter.get("family", "none") != "none" and drafter.get("block_size", 1) != 1
    return list(sizes) if sizes and speculates else [None]


def point_builder(body: dict[str, Any], option: HardwareOption, serving: Any, ratio: float | None,
                  variant: dict[str, Any], gamma: int | None) -> Callable[[int], dict[str, Any]]:
    def build(decode_replicas: int) -> dict[str, Any]:
        raw = deep_merge(body, {k: v for k, v in variant.items() if k != "label"})
        raw["hardware"] = {"profile": copy.deepcopy(option.profile), "gpus_per_replica": option.gpus_per_replica}
        if gamma is not None:
            raw.setdefault("drafter", {})["block_size"] = gamma
        with_own_drafter(raw, option, body)
        cluster = raw.setdefault("cluster", {})
        cluster["replicas"] = decode_replicas
        engine = raw.setdefault("engine", {})
        if isinstance(serving, AggregatedServing):
            cluster.pop("prefill", None)
            engine["prefill"] = {"mode": "chunked", "chunk_tokens": serving.chunk_tokens}
            engine.pop("prefix_cache", None)
            if serving.prefix_cache is not None:
                engine["prefix_cache"] = cache_mapping(serving.prefix_cache)
        else:
            engine.pop("prefill", None)
            engine.pop("prefix_cache", None)
            cluster["prefill"] = pool_mapping(option, serving, ratio, decode_replicas)
        return raw

    return build


def with_own_drafter(raw: dict[str, Any], option: HardwareOption, body: dict[str, Any]) -> None:
    """The candidate's drafting priced on its own hardware: the option's drafter_latency for the family, else the
    option's own built-in in place of another target's (TP8's `NAME-mtp` becomes TP4's), where one exists."""
    drafter = raw.get("drafter")
    if not isinstance(drafter, dict):
        return
    family = str(drafter.get("family", "none"))
    given = option.drafter_latency.get(family)
    if given is not None:
        drafter["latency"] = {"kind": "profile", "path": given} if isinstance(given, str) else copy.deepcopy(given)
        return
    latency = drafter.get("latency")
    if isinstance(latency, dict) and latency.get("kind") == "profile":
        own = own_builtin(str(latency.get("path", "")), option.profile, body.get("hardware", {}).get("profile"))
        if own is not None:
            drafter["latency"] = {**latency, "path": own}


def own_builtin(drafter: str, target: Any, base_target: Any) -> str | None:
    """`builtin:T-SUFFIX` for a drafter `builtin:B-SUFFIX` of another built-in target B, where T-SUFFIX ships."""
    if not (drafter.startswith("builtin:") and isinstance(target, str) and target.startswith("builtin:")):
        return None
    for other in (base_target, target):
        if isinstance(other, str) and other.startswith("builtin:") and drafter.startswith(f"{other}-"):
            own = target + drafter.removeprefix(other)
            exists = profile_file(own)
            return own if exists is not None and exists.is_file() else None
    return None


def pool_mapping(option: HardwareOption, serving: DisaggregatedServing, ratio: float | None,
                 decode_replicas: int) -> dict[str, Any]:
    assert ratio is not None and option.prefill_profile is not None
    pool: dict[str, Any] = {
        "replicas": max(1, math.ceil(ratio * decode_replicas)), "profile": option.prefill_profile,
        "gpus_per_replica": option.prefill_gpus_per_replica or option.gpus_per_replica,
        "link": {"gbps": serving.link.gbps, "latency_ms": serving.link.latency_ms},
        "max_batch_tokens": serving.max_batch_tokens, "router": serving.router,
    }
    pool.update({"model": serving.model} if serving.model else {"kv_bytes_per_token": serving.kv_bytes_per_token})
    if serving.prefix_cache is not None:
        pool["prefix_cache"] = cache_mapping(serving.prefix_cache)
    return pool


def cache_mapping(cache: PrefixCacheSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"block_tokens": cache.block_tokens}
    if cache.capacity_tokens is not None:
        out["capacity_tokens"] = cache.capacity_tokens
    return out


def usd_per_hour(gpus: int, gpu_hour_usd: float | None) -> float | None:
    return None if gpu_hour_usd is None else gpus * gpu_hour_usd


def usd_per_million_tokens(usd_hour: float | None, output_tokens_per_s: float) -> float | None:
    """$ per million output tokens at a throughput (None without a price or a throughput)."""
    if usd_hour is None or not output_tokens_per_s > 0:
        return None
    return usd_hour / (output_tokens_per_s * 3600.0) * 1e6
