"""Step-time curves derived from vidur's measured per-operator H100 timings.

vidur (microsoft/vidur at 7d47513, MIT) profiled every non-attention
operator of a decoder layer on real GPUs at num_tokens 1, 2, 4, 8, 16, 24,
…, 4096, per tensor-parallel degree: columns `time_stats.<op>.median` (ms)
for emb, input_layernorm, attn_pre_proj, attn_rope, attn_post_proj,
post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj, add.

A step at B tokens is built the way vidur's own ExecutionTime adds a block:

    layers  × Σ_ops median_op(B)            measured (the cliffs live here)
  + emb(B)                                   measured
  + LM head(B)                               estimate: mlp_up_proj(B) × vocab / (2·ffn)
                                             (the same GEMM family, scaled by output width)
  + layers × 2 all-reduces (TP > 1)          estimate: latency + ring bytes / NVLink bandwidth
  + layers × attention(B, context)           estimate from memory traffic: the files hold
                                             no attention kernels

Only the derived table is committed, with this attribution in its header.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.modelshape import ModelShape
from specplan.hwprofiles.profile import StepProfile

LAYER_OPS = (
    "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
    "mlp_up_proj", "mlp_act", "mlp_down_proj", "add",
)
SOURCE = "microsoft/vidur at 7d47513 (MIT license, Copyright (c) Microsoft Corporation)"
CONTEXT_GRID_TOKENS = (0, 16384, 65536, 262144, 1048576)


@dataclass(frozen=True)
class AttentionEstimate:
    """Attention and communication costs that vidur's operator files do not contain (H100 SXM)."""

    hbm_bytes_per_ms: float = 3.35e12 * 0.85 / 1e3
    kernel_floor_ms: float = 0.006
    allreduce_latency_ms: float = 0.008
    allreduce_bytes_per_ms: float = 360e9 / 1e3

    def attention_ms(self, shape: ModelShape, tp: int, tokens: np.ndarray, context_tokens: float) -> np.ndarray:
        """All layers: a kernel floor plus the KV bytes of context + new tokens per GPU over HBM."""
        kv_bytes_per_token_layer = 2 * shape.kv_heads * shape.head_dim * 2 / tp
        per_layer = self.kernel_floor_ms + kv_bytes_per_token_layer * (context_tokens + tokens) / self.hbm_bytes_per_ms
        return shape.layers * per_layer

    def allreduce_ms(self, shape: ModelShape, tp: int, tokens: np.ndarray) -> np.ndarray:
        """Two ring all-reduces of B × hidden bf16 activations per layer; zero without TP."""
        if tp == 1:
            return np.zeros(np.shape(tokens))
        ring_bytes = 2 * (tp - 1) / tp * tokens * shape.hidden * 2
        return shape.layers * 2 * (self.allreduce_latency_ms + ring_bytes / self.allreduce_bytes_per_ms)


def read_vidur_stat(path: str | Path, tp: int, stat: str = "median") -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Token counts and `time_stats.<op>.<stat>` per op at one TP degree.

    A token count measured more than once (the files repeat 4096) gets the
    mean of its rows.
    """
    rows = _read_rows(path)
    chosen = [r for r in rows if int(r["num_tensor_parallel_workers"]) == tp]
    if not chosen:
        degrees = sorted({r["num_tensor_parallel_workers"] for r in rows})
        raise ProfileError(f"{path}: no rows at tensor parallel {tp} (has {', '.join(degrees)})")
    tokens_all = np.array([int(r["num_tokens"]) for r in chosen])
    tokens = np.unique(tokens_all)
    owner = np.searchsorted(tokens, tokens_all)
    counts = np.bincount(owner, minlength=tokens.size)
    stats = {}
    for op in ("emb", *LAYER_OPS):
        values = np.array([float(r[f"time_stats.{op}.{stat}"]) for r in chosen])
        stats[op] = np.bincount(owner, weights=values, minlength=tokens.size) / counts
    return tokens, stats


def _read_rows(path: str | Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read vidur profile ({exc.strerror})") from None


def layer_ops_ms(stats: dict[str, np.ndarray]) -> np.ndarray:
    """Σ over one layer's measured operators (ms) at each token count."""
    return np.sum([stats[op] for op in LAYER_OPS], axis=0)


def measured_ms(shape: ModelShape, stats: dict[str, np.ndarray]) -> np.ndarray:
    """The measured part of a step: layers × Σ ops + embedding + LM head (scaled up_proj)."""
    lm_head = stats["mlp_up_proj"] * shape.vocab / (2 * shape.ffn)
    return shape.layers * layer_ops_ms(stats) + stats["emb"] + lm_head


def vidur_profile(
    path: str | Path, shape: ModelShape, tp: int, name: str,
    estimate: AttentionEstimate | None = None, context_grid: tuple[int, ...] = CONTEXT_GRID_TOKENS,
) -> StepProfile:
    """The derived profile: median step (and min/max spread) × a total-KV-context axis."""
    estimate = estimate or AttentionEstimate()
    tokens, medians = read_vidur_stat(path, tp, "median")
    extra = estimate.allreduce_ms(shape, tp, tokens)
    ctx_ms = np.stack([estimate.attention_ms(shape, tp, tokens, c) for c in context_grid]) + extra
    columns = {s: measured_ms(shape, read_vidur_stat(path, tp, s)[1]) + ctx_ms for s in ("min", "max")}
    return StepProfile(
        name=name,
        tokens=tokens,
        step_ms_table=measured_ms(shape, medians) + ctx_ms,
        context_tokens=np.array(context_grid, dtype=np.int64),
        provenance=_provenance(path, shape, tp, estimate),
        extra={"columns": {"min_ms": columns["min"], "max_ms": columns["max"]}},
    )


def _provenance(path: str | Path, shape: ModelShape, tp: int, est: AttentionEstimate) -> dict[str, str]:
    return {
        "device": f"NVIDIA H100 80GB x {tp} (tensor parallel {tp})",
        "model": shape.describe(),
        "dtype": "16-bit (vidur profiles in half precision; not recorded in its CSV)",
        "source": f"{SOURCE}, file {Path(path).name}; derived by hwprofiles/derive_vidur.py",
        "license": "MIT (vidur); derived table, not the raw timings",
        "derivation": (
            f"step(B) = {shape.layers} layers x sum of per-op medians ({', '.join(LAYER_OPS)}) + emb "
            f"+ LM head estimated as mlp_up_proj x vocab/(2*ffn) + attention estimate per layer "
            f"({est.kernel_floor_ms} ms floor + KV bytes of context+B / 3.35 TB/s x 0.85)"
            + (f" + 2 all-reduces per layer ({est.allreduce_latency_ms} ms + ring bytes / 360 GB/s)" if tp > 1 else "")
            + "; repeated token counts averaged"
        ),
        "capture_mode": "per-operator CUDA timings summed (no graph replay, no CPU overhead)",
        "context_axis": "total KV context tokens of the batch (attention estimate only)",
        "statistic": "median of vidur's repeats per operator, summed; min_ms/max_ms sum per-op min/max",
    }
