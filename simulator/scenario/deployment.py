"""The `cluster.prefill:` block: a prefill pool of GPUs in front of the decode replicas.

    cluster:
      replicas: 4                                  # decode replicas (hardware.profile, gpus_per_replica)
      prefill:
        replicas: 2
        gpus_per_replica: 1
        profile: builtin:h200-llama3.1-8b-vllm-prefill   # a prefill-step profile (phase: prefill)
        max_batch_tokens: 8192                     # new prompt tokens one prefill step computes at most
        router: cache_aware                        # round_robin | least_loaded | random | cache_aware | pull
        link: {gbps: 400, latency_ms: 0.5}         # each prefill replica's link to the decode pool
        model: llama3-8b                           # KV bytes per token from the model's shape (or kv_bytes_per_token)
        prefix_cache: {block_tokens: 512}          # optional: an LRU block cache per prefill replica

The pool's model lives in `specplan.simulator.engine.cluster.prefill`; this module
only states and checks the block. Every GPU of both pools counts in the
per-GPU figures (`gpus_prefill`, `gpus_decode`, `gpus_total`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from specplan.hwprofiles.inline import LinearProfile, TableProfile
from specplan.hwprofiles.kv_layout import layout_names
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Tagged, num


@dataclass(frozen=True)
class KvLink:
    """A prefill replica's link to the decode pool: transfers queue on it, FIFO."""

    gbps: float = num(gt=0, doc="the link's bandwidth", example=400)
    latency_ms: float = num(0.0, ge=0, doc="per transfer, on top of bytes / bandwidth")


@dataclass(frozen=True)
class HostTier:
    """A host-memory KV tier behind a replica's GPU prefix cache (SGLang HiCache, vLLM CPU KV offload).

    Computed blocks are written to it as they are made (write-through); a
    prompt's blocks found there (after its GPU hits) are loaded back over the
    rank's host link, and the step that computes the prompt's first chunk
    waits for the load (specplan.simulator.engine.cluster.kv_tiers).
    """

    gbytes_per_s: float = num(gt=0, doc="one attention rank's host-to-GPU bandwidth (PCIe 5.0 x16: ~64 GB/s a "
                              "direction; NVLink-C2C: 450 GB/s a direction; a TP group with sharded KV: its links "
                              "together)", unit="GB/s", example=64)
    ratio: float | None = num(None, gt=0, doc="host tier size over the GPU prefix cache's (default: the serving "
                              "engine's, SGLang --hicache-ratio 2; vLLM states its offload size in bytes: give "
                              "this or capacity_tokens)", unit="factor")
    capacity_tokens: int | None = num(None, ge=1, doc="host tier size in tokens, per replica (overrides ratio)")
    capacity_gb: float | None = num(None, gt=0, doc="host tier size in GB of host memory, per replica: tokens = "
                                    "GB / the layout's bytes per cached token (overrides ratio; InferenceX gives "
                                    "its DRAM budget so)", unit="GB", example=1200)
    latency_ms: float = num(0.0, ge=0, doc="per load, on top of bytes / bandwidth")


@dataclass(frozen=True)
class PrefixCacheSpec:
    """An LRU cache of KV blocks keyed by the trace's block hashes (Mooncake's `hash_ids`)."""

    block_tokens: int = num(512, ge=1, doc="tokens per cached block (the trace's hash_ids are per block)")
    capacity_tokens: int | None = num(None, ge=1, doc="tokens the cache holds (default: a prefill pool's profile "
                                      "KV capacity less one batch; a replica's kv_capacity_tokens, split evenly "
                                      "over its data-parallel attention ranks, each rank its own cache)")
    host: HostTier | None = num(None, doc="a host-memory tier behind a replica's cache (engine.prefix_cache only)")
    layout: str | None = num(None, doc="the model's KV layout, for the bytes a host load moves and DeepSeek-V4's "
                             "window rule: a model shape (llama3-8b, ...) or deepseek-v4-flash / deepseek-v4-pro",
                             example="deepseek-v4-flash")
    kv_value_bytes: int = num(2, ge=1, doc="bytes per KV value (2: bf16; 1: fp8, as the DeepSeek-V4 built-ins run)")
    window_tails: int | None = num(None, ge=1, doc="DeepSeek-V4: sequences whose sliding-window tail is kept (the "
                                   "SWA pool; default: engine.max_batch_requests)", unit="sequences")

    def validate(self, path: str) -> None:
        if self.host is not None and self.host.capacity_tokens is not None and self.host.capacity_gb is not None:
            raise ScenarioError(f"{path}.host", "give capacity_tokens or capacity_gb, not both")
        if self.host is not None and self.layout is None:
            raise ScenarioError(f"{path}.layout", "a host tier needs the model's KV layout (the bytes it moves): "
                                f"one of {', '.join(layout_names())}")
        if self.layout is not None and self.layout not in layout_names():
            raise ScenarioError(f"{path}.layout", f"unknown KV layout '{self.layout}' (valid: "
                                f"{', '.join(layout_names())})")


@dataclass(frozen=True)
class PrefillPoolSpec:
    """Prefill replicas priced from a prefill-step profile; see the module docstring."""

    replicas: int = num(ge=1, doc="prefill replicas", unit="replicas", example=2)
    link: KvLink = num(doc="each prefill replica's link to the decode pool (transfers queue FIFO)",
                       example={"gbps": 400, "latency_ms": 0.5})
    profile: str | Annotated[LinearProfile | TableProfile, Tagged("kind")] = num(
        "builtin:h200-llama3.1-8b-vllm-prefill", doc="a prefill-step profile (its header says phase: prefill), "
        "step_ms(new tokens, attention pairs)")
    gpus_per_replica: int = num(1, ge=1, doc="GPUs one prefill replica occupies", unit="GPUs")
    max_batch_tokens: int = num(8192, ge=1, doc="new prompt tokens one prefill step computes at most (a longer "
                                "prompt is cut into chunks)")
    router: Literal["round_robin", "least_loaded", "random", "cache_aware", "pull"] = num(
        "round_robin", doc="how a prompt picks its prefill replica (cache_aware: the longest cached prefix; pull: "
                           "one shared queue)")
    model: str | None = num(None, doc="a model shape (name or YAML file) giving the KV bytes per token; or give "
                            "kv_bytes_per_token", example="llama3-8b")
    kv_bytes_per_token: int | None = num(None, ge=1, doc="bytes of KV one token moves over the link (instead of "
                                         "model)", unit="bytes")
    kv_value_bytes: int = num(2, ge=1, doc="bytes per KV value when computed from model (2: bf16)")
    prefix_cache: PrefixCacheSpec | None = num(None, doc="an LRU block cache per prefill replica (needed by "
                                               "cache_aware routing)")

    def validate(self, path: str) -> None:
        if (self.model is None) == (self.kv_bytes_per_token is None):
            raise ScenarioError(path, "give exactly one of 'model' (a shape name or YAML file: KV bytes per "
                                "token from its layers, KV heads and head size) or 'kv_bytes_per_token'")
        if self.router == "cache_aware" and self.prefix_cache is None:
            raise ScenarioError(f"{path}.router", "cache_aware routing needs a 'prefix_cache' block")
        if self.prefix_cache is not None and self.prefix_cache.host is not None:
            raise ScenarioError(f"{path}.prefix_cache.host", "a host tier is modelled behind a replica's own cache "
                                "(engine.prefix_cache), not a prefill pool's")

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica
