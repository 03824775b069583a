"""Compiling a target: the estimator's decode operator list, its quantisation and the replica's KV capacity.

The package adapter (`package.py`) loads the database; this module asks the
package to build the model for a target (parallelism, the routed experts'
precision as the engine runs the checkpoint, the MoE backend) and keeps what
the pricing needs: the operator list (JSON), the engine block, the layer
count and the KV-cache capacity by the package's memory model.

The routed experts' precision. A checkpoint fixes how its experts are
stored; the engine and the GPU fix the kernel that runs them, and the
database files its MoE rows by that kernel's precision. Unless a target
names one (`moe_quant`), the choice is the package's own for the checkpoint
(`expert_dtype` in its config) and backend, with the package's SGLang remap
for DeepSeek-V4's FP4-expert checkpoints applied as its estimate path does
(`resolve_dsv4_moe_arch_mode`):

    checkpoint                          vLLM 0.24                 SGLang 0.5.14
    deepseek-ai/DeepSeek-V4-* (FP4)     w4a8_mxfp4_mxfp8          Blackwell: w4a8_mxfp4_mxfp8_trtllm
                                        (FlashInfer TRT-LLM)      (sglang_mxfp4_flashinfer_trtllm_moe);
                                                                  Hopper: w4a16_mxfp4_cutlass
    sgl-project/DeepSeek-V4-*-FP8       fp8_block                 fp8_block

Where the database has no row for the choice (FP4 experts of V4 geometry on
Hopper, under either engine; see builtins.py) pricing fails with a one-line
error naming the missing MoE key, rather than pricing other experts.

A target's `moe_backend` is what its engine runs, not a package switch:
aiconfigurator-core 0.12.0 has no MegaMoE module table of V4 geometry at a
version it serves (its B200 table, SGLang 0.5.16, is of another geometry;
the GB200/GB300 ones are filed under 0.5.10, which it does not serve), so a
`megamoe` target is compiled on the engine's default MoE path at the same
precision, and its MoE block must be set by a public MegaMoE measurement
(public.py; build.py refuses it otherwise).
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specplan.hwprofiles.aiconfigurator.operators import kind_of, walk
from specplan.hwprofiles.aiconfigurator.package import (
    database,
    one_line,
    package_version,
    quiet,
    require_aic,
)
from specplan.hwprofiles.aiconfigurator.targets import AicTarget, engine_tables, where
from specplan.hwprofiles.errors import ProfileError


@dataclass(frozen=True)
class CompiledTarget:
    """The target's decode operators as the estimator's JSON, its database and its KV capacity."""

    target: AicTarget
    ops: tuple[dict[str, Any], ...]
    engine: dict[str, Any]
    spec_schema: int
    num_layers: int
    kv_capacity_tokens: int
    model_summary: str
    kv_memory: KvMemory | None   # None where the engine sizes its pool as a fraction of free memory (TRT-LLM)


@dataclass(frozen=True)
class KvMemory:
    """The package's memory model of one GPU at the build's memory fraction: what it holds besides the KV
    pool (weights, activations, runtime and communication overheads, GiB), so the pool can be re-sized at
    another fraction (specplan.hwprofiles.facts.memory_model)."""

    gpu_gib: float
    fraction: float
    weights_gib: float
    activations_gib: float
    runtime_gib: float
    communication_gib: float

    @property
    def fixed_gib(self) -> float:
        return self.weights_gib + self.activations_gib + self.runtime_gib + self.communication_gib

    def line(self) -> str:
        """The header's `kv_memory` line (its two leading figures are what the reader parses)."""
        return (f"{self.gpu_gib:.3f} GiB per GPU, {self.fixed_gib:.3f} GiB of it not KV at memory fraction "
                f"{self.fraction:g} (weights {self.weights_gib:.3f}, activations {self.activations_gib:.3f}, runtime "
                f"{self.runtime_gib:.3f}, communication {self.communication_gib:.3f} GiB): the KV pool is the rest "
                "of the engine's memory fraction, so kv_capacity_tokens scales by (f x GPU - not KV) / "
                f"({self.fraction:g} x GPU - not KV) at fraction f (the package's memory model, "
                "sdk.memory.estimate_kv_cache)")


def check_model(model: str) -> None:
    """Refuse a model id the package has no config for (it would try to download one)."""
    if Path(model).is_dir():
        if not (Path(model) / "config.json").is_file():
            raise ProfileError(f"--model: {model} has no config.json")
        return
    require_aic()
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.common import DefaultHFModels

    if model not in DefaultHFModels:
        close = difflib.get_close_matches(model, sorted(DefaultHFModels), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ProfileError(
            f"--model: aiconfigurator-core {package_version()} ships no config for {model!r}{hint}; "
            "give one of its model ids or a directory holding config.json"
        )


def compile_target(target: AicTarget, max_tokens: int, query_tokens: int, memory_fraction: float) -> CompiledTarget:
    """Build the target's operator list and KV capacity; every failure is a one-line ProfileError."""
    check_model(target.model)
    model, spec = engine_spec(target)
    capacity, memory = kv_capacity_tokens(target, max_tokens, query_tokens, memory_fraction, moe_quant_mode(target))
    return CompiledTarget(
        target=target, ops=tuple(spec["generation_ops"]), engine=spec["engine"],
        spec_schema=int(spec["schema_version"]), num_layers=int(model._num_layers),
        kv_capacity_tokens=capacity, model_summary=summarize_model(model, spec["generation_ops"]), kv_memory=memory,
    )


def engine_spec(target: AicTarget) -> tuple[Any, dict[str, Any]]:
    """(the package's model, its engine spec: generation and context operator lists) for the target's
    parallelism and expert precision, as the estimator builds them; a failure is one ProfileError line."""
    db = database(target.system, target.backend, target.backend_version)
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.engine import build_engine_spec_json
    from aiconfigurator_core.sdk.models import get_model

    config = build_model_config(
        tp_size=target.tp, pp_size=1, attention_dp_size=target.dp,
        moe_tp_size=target.gpus // target.ep, moe_ep_size=target.ep, moe_quant_mode=moe_quant_mode(target),
    )
    with quiet(), one_line(f"build {target.model} for {where(target)}"):
        model = get_model(target.model, config, target.backend)
        spec = json.loads(build_engine_spec_json(
            model, model_path=target.model, system=target.system, backend=target.backend,
            backend_version=target.backend_version, kv_block_size=None, systems_path=None, nextn=0,
            database=db,
        ))
    return model, spec


def moe_quant_mode(target: AicTarget) -> str | None:
    """The routed experts' precision the target is priced at (module docstring); None: the package's default."""
    if target.moe_quant:
        require_aic()
        # aiconfigurator-core is the optional 'aic' extra
        from aiconfigurator_core.sdk.common import MoEQuantMode

        if target.moe_quant not in MoEQuantMode.__members__:
            close = difflib.get_close_matches(target.moe_quant, list(MoEQuantMode.__members__), n=3, cutoff=0.5)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ProfileError(f"--moe-quant: {target.moe_quant!r} is not a MoE precision of aiconfigurator-core{hint}")
        return target.moe_quant
    if Path(target.model).is_dir():
        return None
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.models import resolve_dsv4_moe_arch_mode

    with quiet():
        mode = resolve_dsv4_moe_arch_mode(target.model, target.system, target.backend, None)
    return None if mode is None else str(mode.name)


def kv_capacity_tokens(target: AicTarget, max_tokens: int, query_tokens: int, memory_fraction: float,
                       moe_quant: str | None = None) -> tuple[int, KvMemory | None]:
    """KV-cache tokens one replica holds, by the package's memory model (weights, activations, overheads), and
    that model's figures for one GPU."""
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.memory import estimate_kv_cache

    kind = engine_tables(target.backend).memory_fraction
    with quiet(), one_line(f"size the KV cache of {target.model} on {where(target)}"):
        estimate = estimate_kv_cache(
            target.model, target.system, target.backend, target.backend_version,
            max_num_tokens=max_tokens, max_batch_size=math.ceil(max_tokens / query_tokens),
            memory_fraction_kind=kind,
            memory_fraction_value=memory_fraction, tp_size=target.tp, attention_dp_size=target.dp,
            moe_tp_size=target.gpus // target.ep, moe_ep_size=target.ep, moe_quant_mode=moe_quant,
        )
    tokens = int(estimate["total_kv_size_tokens"]) * target.dp
    if tokens <= 0:
        raise ProfileError(f"{target.model} does not fit on {where(target)}: no memory left for a KV cache")
    return tokens, kv_memory(estimate, memory_fraction) if kind == "of_total" else None


def kv_memory(estimate: dict[str, Any], fraction: float) -> KvMemory:
    """The estimate's per-GPU breakdown in GiB."""
    parts = estimate["memory_breakdown"]
    gib = 1024.0**3
    return KvMemory(gpu_gib=estimate["total_gpu_capacity_bytes"] / gib, fraction=fraction,
                    weights_gib=parts["weights_bytes"] / gib, activations_gib=parts["activations_bytes"] / gib,
                    runtime_gib=parts["runtime_overhead_bytes"] / gib,
                    communication_gib=parts["comm_overhead_bytes"] / gib)


def summarize_model(model: Any, ops: list[dict[str, Any]]) -> str:
    cfg = model.config
    parts = [f"{model._num_layers} layers"]
    attention = ""
    for op in walk(ops):
        kind, body = kind_of(op), op[kind_of(op)]
        if kind == "Embedding":
            parts.append(f"hidden {body['hidden_size']}, vocab {body['vocab_size']}")
        elif kind == "GenerationAttention" and not attention:
            attention = f"{body['n']} query / {body['n_kv']} KV heads per GPU, head_dim {body['head_size']}"
            parts.append(attention)
        elif kind == "MlaModuleGeneration" and not attention:
            attention = f"MLA, {body['num_heads']} heads per GPU"
            parts.append(attention)
        elif kind == "Dsv4Generation" and not attention:
            attention = dsv4_summary(ops)
            parts.append(attention)
        elif kind == "Moe":
            parts.append(f"MoE {body['num_experts']} experts top-{body['topk']}, expert ffn {body['inter_size']}")
    parts.append(f"aiconfigurator-core model class {type(model).__name__}, nextn {getattr(cfg, 'nextn', 0)}")
    return ", ".join(dict.fromkeys(parts))


def dsv4_summary(ops: list[dict[str, Any]]) -> str:
    bodies = [inner["Dsv4Generation"] for inner in walk(ops) if kind_of(inner) == "Dsv4Generation"]
    layers = " + ".join(f"{b['attn_kind'].upper()} x {b['scale_factor']:g}" for b in bodies)
    first = bodies[0]
    return (f"DeepSeek-V4 attention ({layers} layers; sliding window {first['window_size']}, top-k "
            f"{first['index_topk']}, indexer {first['index_n_heads']} heads), {first['num_heads']} heads per GPU, mHC")


def engine_handle(compiled: CompiledTarget, ops: list[dict[str, Any]]) -> Any:
    """A compiled estimator whose decode operator list is `ops` (no context phase)."""
    aic = require_aic()
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.engine import EngineHandle

    spec = {"schema_version": compiled.spec_schema, "engine": compiled.engine,
            "context_ops": [], "generation_ops": ops}
    with quiet():
        return EngineHandle(bytes(aic.engine_spec_bincode_from_json(json.dumps(spec))))
