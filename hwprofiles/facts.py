"""What a profile's header says of its deployment: the model's family and layers, the GPUs, the serving engine.

Place in the data flow: the engine's rules (specplan.engines: how a step runs,
the engine's own caps) are engine-neutral and cannot read a profile; the
scenario and engine layers read these facts off the profile's provenance
header once and hand them over:

    model_facts(profile)     ModelFacts(name, family, layers) from the `model:` line, None without one
                             (an inline, CSV or roofline profile that names no model)
    device_facts(profile)    DeviceFacts(gpu, memory_gib, tp, dp, ep) from the `device:` and
                             `parallelism:` lines, None where the GPU is not named
    profile_engine(profile)  the engine row a measured built-in was read for (its `backend:` line;
                             NO_ENGINE unless the source is NVIDIA AIConfigurator)
    serving_engine(name, version, profile)   the row a scenario's `engine.name` / `engine.version` name
                             (`auto`: the profile's engine; no version: the profile's, else the newest)
    cap_facts(profile, ...)  the deployment's CapFacts for an engine's caps (specplan.engines.caps), None
                             where the profile names no model or no GPU
    memory_model(profile)    MemoryModel: the KV tokens one replica holds at the memory fraction its
                             header states (`kv_capacity_tokens`), sized at another fraction under an
                             engine's memory rule (specplan.engines.caps.MemoryRule: SGLang's fraction
                             less the weights, vLLM's less the profiled peak) through the `kv_memory` line
                             (GPU memory, what is not KV, the weights); None without the first, no
                             re-sizing without the second
    attention_ranks(profile) (ranks, line) where the `parallelism:` (else `device:`) line names a DP size

The family decides which public kernel count prices an eager step
(specplan.engines.eager): `deepseek-v4` (a DeepSeek-V4 attention module),
`moe` (a mixture of experts otherwise), `dense`. A GPU whose line gives no
memory ("NVIDIA B300 x 8") takes the capacity AIConfigurator's system file
states for it (nvidia-smi's figure).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from specplan.engines import NO_ENGINE, CapFacts, EngineTraits, backend_traits, engine_traits
from specplan.engines.caps import PROFILED_PEAK, MemoryRule
from specplan.engines.steps import AllToAllBackend, ModelFamily
from specplan.errors import SpecplanError
from specplan.hwprofiles.profile import StepProfile

AIC_SOURCE = "NVIDIA AIConfigurator"
MIB_PER_GIB = 1024.0
# GPU memory where the device line gives none: aiconfigurator-core 0.12.0 systems/<system>.yaml mem_capacity
# (nvidia-smi's MiB as the file states it)
GPU_MEMORY_GIB = {"GB300": 284_208 / MIB_PER_GIB, "B300": 275_040 / MIB_PER_GIB, "GB200": 189_471 / MIB_PER_GIB,
                  "B200": 180.0, "H200": 141.0, "H100": 80.0, "A100": 80.0}


@dataclass(frozen=True)
class ModelFacts:
    """The model a profile was measured for: its name, family and decoder layers."""

    name: str
    family: ModelFamily
    layers: int


@dataclass(frozen=True)
class DeviceFacts:
    """The GPUs one replica of the profile runs on: GPU name, memory per GPU and the parallelism."""

    gpu: str
    memory_gib: float
    tp: int = 1
    dp: int = 1
    ep: int = 1

    @property
    def a100(self) -> bool:
        return self.gpu == "A100"


def provenance_of(profile: StepProfile) -> dict[str, Any]:
    return getattr(profile, "provenance", {}) or {}


def model_facts(profile: StepProfile) -> ModelFacts | None:
    """The `model:` line as facts: '... (43 layers, ...)' or '(hidden 4096, layers 32, ...)'."""
    line = str(provenance_of(profile).get("model", ""))
    match = re.search(r"(\d+) layers|layers (\d+)", line)
    if not match:
        return None
    layers = int(match.group(1) or match.group(2))
    name = line.split(" (")[0].strip()
    if "DeepSeek-V4" in line:
        family: ModelFamily = "deepseek-v4"
    elif re.search(r"\bMoE\b|experts", line):
        family = "moe"
    else:
        family = "dense"
    return ModelFacts(name, family, layers)


def device_facts(profile: StepProfile) -> DeviceFacts | None:
    """The `device:` and `parallelism:` lines as facts (None when the line names no known GPU)."""
    provenance = provenance_of(profile)
    device = str(provenance.get("device", ""))
    gpu = next((name for name in GPU_MEMORY_GIB if re.search(rf"\b{name}\b", device, re.IGNORECASE)), None)
    if gpu is None:
        return None
    stated = re.search(r"(\d+)\s*GB\b", device)
    memory = float(stated.group(1)) if stated else GPU_MEMORY_GIB[gpu]
    parallel = str(provenance.get("parallelism", "")) or device
    sizes = {key: int(value) for key, value in re.findall(r"\b(TP|DP|EP)(\d+)", parallel)}
    if "TP" not in sizes:
        tensor = re.search(r"tensor parallel (\d+)", device)
        sizes["TP"] = int(tensor.group(1)) if tensor else 1
    return DeviceFacts(gpu, memory, sizes.get("TP", 1), sizes.get("DP", 1), sizes.get("EP", 1))


def profile_engine(profile: StepProfile) -> EngineTraits:
    """The row of the engine a measured built-in was read for (NO_ENGINE when it is not from AIConfigurator)."""
    provenance = provenance_of(profile)
    if not str(provenance.get("source", "")).startswith(AIC_SOURCE):
        return NO_ENGINE
    return backend_traits(str(provenance.get("backend", "")))


def serving_engine(name: str, version: str | None, profile: StepProfile) -> EngineTraits:
    """The serving engine's row: `name` at `version`, or for `auto` the profile's engine (at `version` where
    one is given: auto resolves first, then the version)."""
    if name == "auto":
        read_for = profile_engine(profile)
        if version is None:
            return read_for
        if read_for.name == "none":
            raise SpecplanError(f"a version needs an engine: profile {profile.name} names none (no `backend:` line "
                                "of a measured built-in); set engine.name (vllm, sglang or trtllm)")
        return engine_traits(read_for.name, version)
    if version is None:
        read_for = profile_engine(profile)
        version = read_for.version if read_for.name == name else None
    return engine_traits(name, version)


def cap_facts(profile: StepProfile, ranks: int, query_tokens: int, all_to_all: AllToAllBackend,
              kv_pool_tokens: int | None, overrides: dict[str, float]) -> CapFacts | None:
    """The facts an engine's caps read for a deployment of `profile` (`kv_pool_tokens`: one rank's KV pool;
    `overrides`: what the scenario sets, by the engine's knob names). The GPUs of one replica are its TP x DP
    (the `--tp` of an SGLang line with DP attention)."""
    model, device = model_facts(profile), device_facts(profile)
    if model is None or device is None:
        return None
    return CapFacts(gpu_memory_gib=device.memory_gib, tp=device.tp * device.dp, dp=ranks, model=model.family,
                    query_tokens=query_tokens, all_to_all=all_to_all, a100=device.a100, kv_pool_tokens=kv_pool_tokens,
                    overrides=overrides)


@dataclass(frozen=True)
class MemoryModel:
    """A profile's memory model: one replica's KV tokens at `fraction` of GPU memory and, where the header
    gives its `kv_memory` line, one GPU's memory, the GiB of it that are not KV (weights, activations,
    overheads) and the weights alone, which size the pool at another fraction under an engine's rule."""

    tokens: int
    fraction: float
    gpu_gib: float | None = None
    not_kv_gib: float | None = None
    weights_gib: float | None = None

    @property
    def resizable(self) -> bool:
        return self.tokens_per_gib is not None

    @property
    def tokens_per_gib(self) -> float | None:
        """The replica's KV tokens per GiB of pool on each GPU (what the stated pool holds at its fraction)."""
        if self.gpu_gib is None or self.not_kv_gib is None:
            return None
        left = self.fraction * self.gpu_gib - self.not_kv_gib
        return self.tokens / left if left > 0 and self.tokens > 0 else None

    def tokens_at(self, fraction: float, rule: MemoryRule = PROFILED_PEAK) -> int | None:
        """The replica's KV tokens at memory fraction `fraction` under the engine's `rule` (the stated figure
        where the header gives no breakdown); None where the model leaves no pool at that fraction."""
        per_gib = self.tokens_per_gib
        if per_gib is None or self.gpu_gib is None or self.not_kv_gib is None:
            return self.tokens
        if rule.kv_after == "profiled_peak" and fraction == self.fraction:
            return self.tokens
        left = rule.kv_gib(fraction, self.gpu_gib, self.weights, self.not_kv_gib)
        return math.floor(per_gib * left) if left > 0 else None

    @property
    def weights(self) -> float:
        """The weights per GPU in GiB (all that is not KV where the header does not split it)."""
        return self.weights_gib if self.weights_gib is not None else float(self.not_kv_gib or 0.0)

    @property
    def most_tokens(self) -> int | None:
        """The most KV tokens the replica's GPUs can hold at all: every GPU's whole memory less its weights
        (None without a breakdown)."""
        per_gib = self.tokens_per_gib
        if per_gib is None or self.gpu_gib is None:
            return None
        return math.floor(per_gib * max(self.gpu_gib - self.weights, 0.0))


def memory_model(profile: StepProfile) -> MemoryModel | None:
    """The `kv_capacity_tokens` line ('10710487 (the package's memory model at 0.9 of GPU memory)') and the
    `kv_memory` line ('180.000 GiB per GPU, 25.607 GiB of it not KV at memory fraction 0.9 (weights 14.960,
    ...)'), None without the first."""
    provenance = provenance_of(profile)
    stated = re.match(r"\s*(\d+)", str(provenance.get("kv_capacity_tokens", "")))
    if not stated:
        return None
    at = re.search(r"at ([\d.]+) of GPU memory", str(provenance["kv_capacity_tokens"]))
    line = str(provenance.get("kv_memory", ""))
    split = re.match(r"\s*([\d.]+) GiB per GPU, ([\d.]+) GiB of it not KV", line)
    weights = re.search(r"\(weights ([\d.]+)", line)
    return MemoryModel(int(stated.group(1)), float(at.group(1)) if at else 0.9,
                       float(split.group(1)) if split else None, float(split.group(2)) if split else None,
                       float(weights.group(1)) if weights else None)


def attention_ranks(profile: StepProfile) -> tuple[int, str] | None:
    """The attention ranks a profile was measured with, where its header states them: (ranks, the line that says
    so: `parallelism:`, else `device:`; `TP8 EP8 DP1` is one rank); None where neither line names a DP size."""
    provenance = provenance_of(profile)
    for key in ("parallelism", "device"):
        line = str(provenance.get(key, ""))
        match = re.search(r"\bDP(\d+)\b", line)
        if match:
            return int(match.group(1)), f"{key}: {line.strip()}"
    return None
