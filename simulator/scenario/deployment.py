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

The pool's model lives in `specplan.simulator.engine.prefill`; this module
only states and checks the block. Every GPU of both pools counts in the
per-GPU figures (`gpus_prefill`, `gpus_decode`, `gpus_total`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from specplan.hwprofiles.inline import LinearProfile, TableProfile
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.schema import Tagged, num


@dataclass(frozen=True)
class KvLink:
    """A prefill replica's link to the decode pool: transfers queue on it, FIFO."""

    gbps: float = num(gt=0)                  # gigabits per second
    latency_ms: float = num(0.0, ge=0)       # per transfer, on top of bytes / bandwidth


@dataclass(frozen=True)
class PrefixCacheSpec:
    """An LRU cache of KV blocks keyed by the trace's block hashes (Mooncake's `hash_ids`)."""

    block_tokens: int = num(512, ge=1)
    capacity_tokens: int | None = num(None, ge=1)   # default: the profile's KV capacity less one batch


@dataclass(frozen=True)
class PrefillPoolSpec:
    """Prefill replicas priced from a prefill-step profile; see the module docstring."""

    replicas: int = num(ge=1)
    link: KvLink = num()
    profile: str | Annotated[LinearProfile | TableProfile, Tagged("kind")] = "builtin:h200-llama3.1-8b-vllm-prefill"
    gpus_per_replica: int = num(1, ge=1)
    max_batch_tokens: int = num(8192, ge=1)
    router: Literal["round_robin", "least_loaded", "random", "cache_aware", "pull"] = "round_robin"
    model: str | None = None
    kv_bytes_per_token: int | None = num(None, ge=1)
    kv_value_bytes: int = num(2, ge=1)
    prefix_cache: PrefixCacheSpec | None = None

    def validate(self, path: str) -> None:
        if (self.model is None) == (self.kv_bytes_per_token is None):
            raise ScenarioError(path, "give exactly one of 'model' (a shape name or YAML file: KV bytes per "
                                "token from its layers, KV heads and head size) or 'kv_bytes_per_token'")
        if self.router == "cache_aware" and self.prefix_cache is None:
            raise ScenarioError(f"{path}.router", "cache_aware routing needs a 'prefix_cache' block")

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica
