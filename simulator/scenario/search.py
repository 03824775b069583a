"""The `search:` block: the deployment space a capacity plan searches (schema and expansion only).

    search:
      hardware:                                   # GPU types and parallelism: one entry per replica shape
        - {label: H200, profile: builtin:h200-llama3.1-8b-vllm, gpus_per_replica: 1, gpu_hour_usd: 3.5,
           prefill_profile: builtin:h200-llama3.1-8b-vllm-prefill}
        - {label: B200, profile: builtin:b200-llama3.1-8b-vllm, gpu_hour_usd: 5.0,
           prefill_profile: builtin:b200-llama3.1-8b-vllm-prefill}
      serving:                                    # aggregated, and disaggregated at prefill:decode ratios
        - {mode: aggregated, chunk_tokens: 2048}
        - {mode: aggregated, label: HiCache, prefix_cache: {block_tokens: 64, layout: llama3-8b,
           host: {ratio: 2, gbytes_per_s: 64}}}
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
A point's mapping is the base scenario with the options' keys set on it,
nothing they state dropped, so a point and a plain scenario written for the
same deployment are the same simulation (one point key): an aggregated
option keeps the base's chunked prefill at its own chunk, its prefix cache
whole (host tier, layout, value bytes), the base's where it states none;
the hardware option's prefill profile prices aggregated prefill batches
(engine.prefill.profile) as well as a prefill pool, and its dp_attention
is the point's (`own_prefill_profile`, `with_own_dp_attention`). The
base's engine settings of one deployment (engine.kv_capacity_tokens,
memory_fraction, all_to_all) hold only at options that run the base's
decode profile; another GPU type or parallelism takes its own profile's
pool at its engine's own fraction, unless the option states its own
(`option_engine`; `search_notes` says what an option did not inherit, and
`SearchPoint.stated_paths` names the option's key in a refusal). Labels
name what a serving option states, or its own label; two options whose
deployments would share a label are refused.
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
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from specplan.hwprofiles import load_profile, profile_file
from specplan.hwprofiles.facts import memory_model
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.schema import Tagged, Word, num, to_plain
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
    prefill_profile: str | None = num(None, doc="the prefill-step profile: a disaggregated point's prefill pool "
                                      "runs on it, and an aggregated point's prefill batches are priced on it "
                                      "(engine.prefill.profile) where a prefill replica is the decode replica's "
                                      "shape (prefill_gpus_per_replica unset or equal)")
    prefill_gpus_per_replica: int | None = num(None, ge=1, doc="GPUs one prefill replica occupies (default: "
                                               "gpus_per_replica)", unit="GPUs")
    dp_attention: dict[str, Any] | None = num(
        None, doc="data-parallel attention on this GPU type at this parallelism: engine.dp_attention's keys "
        "(ranks, balance, ...), set at this option's points (default: the base scenario's engine.dp_attention "
        "where the option runs the base's decode profile, none otherwise)", example={"ranks": 8})
    kv_capacity_tokens: int | None = num(
        None, ge=1, doc="KV tokens one decode replica of this option holds (engine.kv_capacity_tokens at its "
        "points); default: the base scenario's where the option runs the base's decode profile at the base's "
        "memory fraction, else this profile's memory model at the engine's memory fraction (the base's where the "
        "profile has no memory model); more than this option's GPUs can hold at all is refused",
        unit="tokens", example=30_000_000)
    memory_fraction: float | None = num(
        None, gt=0, le=1, doc="engine.memory_fraction at this option's points (SGLang --mem-fraction-static, vLLM "
        "--gpu-memory-utilization); default: the base scenario's where the option runs the base's decode profile, "
        "else the engine's own rule for this GPU and parallelism", unit="share of GPU memory", example=0.835)
    all_to_all: dict[str, Any] | None = num(
        None, doc="the MoE's all-to-all at this option's points: engine.all_to_all's keys (backend, mode, "
        "tokens_per_rank); default: the base scenario's engine.all_to_all where the option runs the base's decode "
        "profile, none otherwise", example={"backend": "deepep", "mode": "low_latency"})
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
    label: str | None = num(None, doc="the option's name in its deployments' labels (default: its mode, and its "
                            "prefix cache and host tier where it has them)", example="aggregated + HiCache")
    chunk_tokens: int | None = num(None, ge=1, doc="prompt tokens one decode step may carry (default: the base "
                                   "scenario's engine.prefill.chunk_tokens, else 2048)")
    prefix_cache: Annotated[PrefixCacheSpec | None, Word("none")] = num(
        None, doc="an LRU prefix cache per replica, every key of engine.prefix_cache (host tier, layout, "
        "kv_value_bytes included); default: the base scenario's engine.prefix_cache; none: no prefix cache")

    def labels(self) -> list[tuple[str, float | None]]:
        return [(self.label or f"aggregated{cache_words(self.prefix_cache)}", None)]


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
    prefix_cache: Annotated[PrefixCacheSpec | None, Word("none")] = num(
        None, doc="an LRU block cache per prefill replica (default: the base scenario's cluster.prefill."
        "prefix_cache; none: no cache)")
    label: str | None = num(None, doc="the option's name in its deployments' labels, before each ratio (default: "
                            "disaggregated, and its prefix cache where it has one)", example="PD")

    def validate(self, path: str) -> None:
        if isinstance(self.prefix_cache, PrefixCacheSpec) and self.prefix_cache.host is not None:
            raise ScenarioError(f"{path}.prefix_cache.host", "a host tier is modelled behind a decode replica's own "
                                "cache (aggregated serving), not a prefill pool's")
        if not self.prefill_per_decode:
            raise ScenarioError(f"{path}.prefill_per_decode", "needs at least one prefill:decode ratio")
        if len(set(self.prefill_per_decode)) != len(self.prefill_per_decode):
            raise ScenarioError(f"{path}.prefill_per_decode", "ratios must be distinct")
        if (self.model is None) == (self.kv_bytes_per_token is None):
            raise ScenarioError(path, "give exactly one of 'model' or 'kv_bytes_per_token' (KV bytes per token)")

    def labels(self) -> list[tuple[str, float | None]]:
        name = self.label or f"disaggregated{cache_words(self.prefix_cache)}"
        return [(f"{name} {ratio:g}:1", ratio) for ratio in self.prefill_per_decode]


def cache_words(cache: PrefixCacheSpec | str | None) -> str:
    """What a serving option's label says of the prefix cache it states: nothing where it states none (the base
    scenario's is kept)."""
    if cache == "none":
        return " + no prefix cache"
    if not isinstance(cache, PrefixCacheSpec):
        return ""
    host = cache.host
    if host is None:
        return " + prefix cache"
    size = (f"{host.capacity_tokens:,} tokens" if host.capacity_tokens is not None else
            f"{host.capacity_gb:g} GB" if host.capacity_gb is not None else
            f"{host.ratio:g}x" if host.ratio is not None else "")
    return f" + prefix cache + host tier {size}".rstrip()


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
        check_serving_labels(f"{path}.serving", self.serving)


def check_serving_labels(path: str, serving: tuple[Serving, ...]) -> None:
    """Two serving options whose deployments would carry the same label are refused: a label names one
    deployment (two aggregated options that differ by their prefix cache, say, need their own labels)."""
    seen: dict[str, int] = {}
    for i, option in enumerate(serving):
        for name, _ratio in option.labels():
            if name in seen:
                raise ScenarioError(f"{path}[{i}].label", f"its deployments would be labelled {name!r}, as "
                                    f"search.serving[{seen[name]}]'s are: give each serving option its own label")
            seen[name] = i


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
    option_index: int = 0
    runs_base_profile: bool = True

    def mapping(self, decode_replicas: int) -> dict[str, Any]:
        if decode_replicas < 1:
            raise ScenarioError("search", f"decode replicas must be >= 1, got {decode_replicas}")
        return self.build(decode_replicas)

    def stated_paths(self) -> dict[str, str]:
        """How a refusal at this point names an engine key its hardware option sets: by the option's key
        (`search.hardware[i].kv_capacity_tokens` for the scenario path `engine.kv_capacity_tokens`)."""
        where = f"search.hardware[{self.option_index}]"
        option = self.hardware
        paths = {f"engine.{key}": f"{where}.{key}" for key in ("kv_capacity_tokens", "memory_fraction")
                 if getattr(option, key) is not None}
        if not self.runs_base_profile:  # its KV pool is its own (or its profile's): the option names it
            paths["engine.kv_capacity_tokens"] = f"{where}.kv_capacity_tokens"
        for block in ("dp_attention", "all_to_all"):
            stated = getattr(option, block)
            if isinstance(stated, dict):
                paths[f"engine.{block}"] = f"{where}.{block}"
                paths.update({f"engine.{block}.{key}": f"{where}.{block}.{key}" for key in stated})
        return paths

    def prefill_replicas(self, decode_replicas: int) -> int:
        return 0 if self.prefill_per_decode is None else max(1, math.ceil(self.prefill_per_decode * decode_replicas))

    def gpus(self, decode_replicas: int) -> int:
        prefill_gpus = self.hardware.prefill_gpus_per_replica or self.hardware.gpus_per_replica
        return (decode_replicas * self.hardware.gpus_per_replica
                + self.prefill_replicas(decode_replicas) * prefill_gpus)


def search_points(raw: dict[str, Any], search: SearchSpec, base_dir: Path | None = None) -> list[SearchPoint]:
    """Every point of the space, in the order hardware × serving × variants × block sizes (`base_dir`: the
    folder a relative profile path is read from)."""
    body = search_body(raw)
    variants = list(search.variants) or [{"label": str(body.get("policy", {}).get("name", "base"))}]
    points = []
    for index, option in enumerate(search.hardware):
        modelled = memory_modelled(option.profile, base_dir)
        runs_base = runs_base_profile(option, body)
        for serving in search.serving:
            for serving_label, ratio in serving.labels():
                for variant in variants:
                    for gamma in block_sizes_for(variant, body, search.block_sizes):
                        label = " / ".join(x for x in (option.label, serving_label, variant["label"],
                                                         None if gamma is None else f"γ={gamma}") if x)
                        build = point_builder(body, option, serving, ratio, variant, gamma, modelled)
                        points.append(SearchPoint(label, option, serving, ratio, variant["label"], gamma, build,
                                                  index, runs_base))
    return points


def search_body(raw: dict[str, Any]) -> dict[str, Any]:
    """The base scenario a search's points are built on: the scenario without its study blocks."""
    return {k: v for k, v in strip_study_blocks(raw).items() if k != "search"}


OPTION_ENGINE_KEYS = ("kv_capacity_tokens", "memory_fraction", "all_to_all")


def runs_base_profile(option: HardwareOption, body: dict[str, Any]) -> bool:
    """Whether the option runs the base scenario's own decode profile (the deployment its engine keys were
    written for)."""
    hardware = body.get("hardware")
    return isinstance(hardware, dict) and option.profile == hardware.get("profile")


def option_engine(option: HardwareOption, body: dict[str, Any], modelled: bool) -> dict[str, Any]:
    """engine.kv_capacity_tokens, memory_fraction and all_to_all at an option's points (None: unset): the
    option's own; else the base scenario's where the option runs the base's decode profile (its KV pool only at
    the base's fraction), and the base's KV pool where the option's profile has no memory model to size one
    (`modelled`); else unset: the profile's pool at the engine's own fraction, no all-to-all backend."""
    base = base_engine(body)
    same = runs_base_profile(option, body)
    fraction = option.memory_fraction if option.memory_fraction is not None else (
        base.get("memory_fraction") if same else None)
    a2a = option.all_to_all if option.all_to_all is not None else (base.get("all_to_all") if same else None)
    kv = option.kv_capacity_tokens
    if kv is None and (not modelled or (same and option.memory_fraction is None)):
        kv = base.get("kv_capacity_tokens")
    return {"kv_capacity_tokens": kv, "memory_fraction": fraction, "all_to_all": copy.deepcopy(a2a)}


def base_engine(body: dict[str, Any]) -> dict[str, Any]:
    engine = body.get("engine")
    return engine if isinstance(engine, dict) else {}


def memory_modelled(profile: Any, base_dir: Path | None) -> bool:
    """Whether a decode profile has a memory model (a `kv_capacity_tokens` line: the measured built-ins), so
    that a point on it sizes its own KV pool; False for an inline profile or one that does not load (refused
    where the point loads)."""
    if not isinstance(profile, str):
        return False
    spec = profile
    if not profile.startswith("builtin:") and base_dir is not None and not Path(profile).is_absolute():
        spec = str(base_dir / profile)
    try:
        return memory_model(load_profile(spec)) is not None
    except SpecplanError:
        return False


TAKEN_INSTEAD = {"kv_capacity_tokens": "KV pool: its profile's memory model at the engine's memory fraction",
                 "memory_fraction": "memory fraction: the engine's own rule for this GPU and parallelism",
                 "all_to_all": "all-to-all: none"}


def search_notes(raw: dict[str, Any], search: SearchSpec, base_dir: Path | None = None) -> tuple[str, ...]:
    """One line per hardware option that does not take an engine key the base scenario states (it runs another
    deployment, or states its own memory fraction), and per option on another profile with no memory model,
    which keeps the base's KV pool."""
    body = search_body(raw)
    base = base_engine(body)
    notes = []
    for i, option in enumerate(search.hardware):
        modelled = memory_modelled(option.profile, base_dir)
        taken = option_engine(option, body, modelled)
        where = f"search.hardware[{i}] ({option.label})"
        dropped = [k for k in OPTION_ENGINE_KEYS if base.get(k) is not None and taken[k] is None]
        if dropped:
            keys = ", ".join(f"engine.{k}" for k in dropped)
            own = " / ".join(f"search.hardware[{i}].{k}" for k in dropped)
            notes.append(f"{where}: the base scenario's {keys} {'is' if len(dropped) == 1 else 'are'} for its own "
                         f"deployment ({profile_words(body.get('hardware', {}).get('profile'))}), not this "
                         f"option's; its points take their own ({'; '.join(TAKEN_INSTEAD[k] for k in dropped)}): "
                         f"set {own} to state this option's")
        if not modelled and option.kv_capacity_tokens is None and base.get("kv_capacity_tokens") is not None \
                and not runs_base_profile(option, body):
            notes.append(f"{where}: {profile_words(option.profile)} has no memory model, so its points keep the "
                         f"base scenario's engine.kv_capacity_tokens ({base['kv_capacity_tokens']:,}); set "
                         f"search.hardware[{i}].kv_capacity_tokens to state this option's own")
    return tuple(notes)


def profile_words(profile: Any) -> str:
    return f"profile {profile}" if isinstance(profile, str) else "an inline profile"


def block_sizes_for(variant: dict[str, Any], body: dict[str, Any], sizes: tuple[int, ...]) -> list[int | None]:
    """The γ values a variant is tried at: the search's block sizes when it drafts more than one token."""
    drafter = deep_merge(body.get("drafter", {}), variant.get("drafter", {}))
    speculates = drafter.get("family", "none") != "none" and drafter.get("block_size", 1) != 1
    return list(sizes) if sizes and speculates else [None]


def point_builder(body: dict[str, Any], option: HardwareOption, serving: Any, ratio: float | None,
                  variant: dict[str, Any], gamma: int | None, modelled: bool) -> Callable[[int], dict[str, Any]]:
    def build(decode_replicas: int) -> dict[str, Any]:
        raw = deep_merge(body, {k: v for k, v in variant.items() if k != "label"})
        own_engine = option_engine(option, raw, modelled)  # the base's (and the variant's) settings, before the swap
        raw["hardware"] = {"profile": copy.deepcopy(option.profile), "gpus_per_replica": option.gpus_per_replica}
        if gamma is not None:
            raw.setdefault("drafter", {})["block_size"] = gamma
        with_own_drafter(raw, option, body)
        cluster = raw.setdefault("cluster", {})
        cluster["replicas"] = decode_replicas
        engine = raw.setdefault("engine", {})
        with_own_dp_attention(engine, option, body)
        for key, value in own_engine.items():
            engine.pop(key, None)
            if value is not None:
                engine[key] = copy.deepcopy(value)
        if isinstance(serving, AggregatedServing):
            cluster.pop("prefill", None)
            engine["prefill"] = aggregated_prefill(body, option, serving)
            cache = serving_cache(serving.prefix_cache, engine.get("prefix_cache"))
            engine.pop("prefix_cache", None)
            if cache is not None:
                engine["prefix_cache"] = cache
        else:
            base_pool = body.get("cluster", {}).get("prefill")
            base_cache = base_pool.get("prefix_cache") if isinstance(base_pool, dict) else None
            engine.pop("prefill", None)
            engine.pop("prefix_cache", None)
            cluster["prefill"] = pool_mapping(option, serving, ratio, decode_replicas, base_cache)
        return raw

    return build


def aggregated_prefill(body: dict[str, Any], option: HardwareOption, serving: AggregatedServing) -> dict[str, Any]:
    """engine.prefill of an aggregated point: the base scenario's chunked prefill (its schedule kept), at the
    option's chunk, its prefill batches priced on the hardware option's own prefill profile."""
    base = body.get("engine", {}).get("prefill")
    prefill = copy.deepcopy(base) if isinstance(base, dict) and base.get("mode") == "chunked" else {"mode": "chunked"}
    prefill["chunk_tokens"] = serving.chunk_tokens or prefill.get("chunk_tokens", DEFAULT_CHUNK_TOKENS)
    profile = own_prefill_profile(option, prefill.get("profile"), body.get("hardware", {}).get("profile"))
    prefill.pop("profile", None)
    if profile is not None:
        prefill["profile"] = profile
    return prefill


DEFAULT_CHUNK_TOKENS = 2048


def own_prefill_profile(option: HardwareOption, base_profile: Any, base_target: Any) -> Any:
    """The profile an aggregated point prices its prefill batches on: the option's prefill_profile where a
    prefill replica is the decode replica's shape; else the base scenario's where the option runs the base's
    decode profile, or its own built-in in place of another target's (`B-prefill` becomes `T-prefill`) where
    one ships; else none (the decode profile at the batch's tokens)."""
    same_shape = option.prefill_gpus_per_replica in (None, option.gpus_per_replica)
    if option.prefill_profile is not None and same_shape:
        return option.prefill_profile
    if base_profile is None or option.profile == base_target:
        return copy.deepcopy(base_profile)
    return own_builtin(base_profile, option.profile, base_target) if isinstance(base_profile, str) else None


def with_own_dp_attention(engine: dict[str, Any], option: HardwareOption, body: dict[str, Any]) -> None:
    """engine.dp_attention at an option's points: the option's own, else the base scenario's where the option runs
    the base's decode profile (another GPU type or parallelism does not inherit the base's ranks)."""
    if option.dp_attention is not None:
        engine["dp_attention"] = copy.deepcopy(option.dp_attention)
    elif option.profile != body.get("hardware", {}).get("profile"):
        engine.pop("dp_attention", None)


def serving_cache(stated: PrefixCacheSpec | str | None, base: Any) -> dict[str, Any] | None:
    """A serving option's prefix cache as a scenario mapping, every key it states kept (its host tier, layout
    and value bytes included); the base scenario's where it states none; no cache for `none`."""
    if isinstance(stated, PrefixCacheSpec):
        return cache_mapping(stated)
    if stated == "none" or not isinstance(base, dict):
        return None
    return copy.deepcopy(base)


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
                 decode_replicas: int, base_cache: Any = None) -> dict[str, Any]:
    assert ratio is not None and option.prefill_profile is not None
    pool: dict[str, Any] = {
        "replicas": max(1, math.ceil(ratio * decode_replicas)), "profile": option.prefill_profile,
        "gpus_per_replica": option.prefill_gpus_per_replica or option.gpus_per_replica,
        "link": {"gbps": serving.link.gbps, "latency_ms": serving.link.latency_ms},
        "max_batch_tokens": serving.max_batch_tokens, "router": serving.router,
    }
    pool.update({"model": serving.model} if serving.model else {"kv_bytes_per_token": serving.kv_bytes_per_token})
    cache = serving_cache(serving.prefix_cache, base_cache)
    if cache is not None:
        pool["prefix_cache"] = cache
    return pool


def cache_mapping(cache: PrefixCacheSpec) -> dict[str, Any]:
    """Every key a prefix cache states (its host tier's included), as a scenario mapping; unset keys left out."""
    return drop_none(to_plain(cache))


def drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    return value


def usd_per_hour(gpus: int, gpu_hour_usd: float | None) -> float | None:
    return None if gpu_hour_usd is None else gpus * gpu_hour_usd


def usd_per_million_tokens(usd_hour: float | None, output_tokens_per_s: float) -> float | None:
    """$ per million output tokens at a throughput (None without a price or a throughput)."""
    if usd_hour is None or not output_tokens_per_s > 0:
        return None
    return usd_hour / (output_tokens_per_s * 3600.0) * 1e6
