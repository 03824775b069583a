"""Synthetic step-time curves for GPUs not at hand: a roofline with CUDA-graph padding.

Each part of a forward costs the larger of its memory time (bytes over
achievable HBM bandwidth) and its compute time (FLOPs over achievable dense
bf16 FLOP/s):

    weights   bytes = weights touched (for MoE: the experts B tokens route to)
              FLOPs = 2 · active params · B
    attention bytes = KV context read + the B new tokens' KV written
              FLOPs = 4 · heads · head_dim · layers · context · (tokens per request)

plus a fixed per-step cost (graph launch, sampling). The batch is padded to
vLLM-style capture sizes first, so the curve is a staircase. The result is a
labelled synthetic `StepProfile` with a context axis (total KV tokens).
Sanity bound checked by the tests: an 8B bf16 step on an H200 never beats
its weight read (16.1 GB at 4.8 TB/s ≥ 3.35 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.engines.vllm import capture_sizes as vllm_capture_sizes
from specplan.hwprofiles.grid import staircase
from specplan.hwprofiles.modelshape import ModelShape
from specplan.hwprofiles.profile import StepProfile

CONTEXT_GRID_TOKENS = (0, 16384, 65536, 262144, 1048576)


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet peaks and the fractions a well-tuned engine achieves."""

    name: str
    hbm_tb_per_s: float
    bf16_dense_tflop_per_s: float
    memory_efficiency: float = 0.85
    compute_efficiency: float = 0.70
    step_overhead_ms: float = 0.15

    @property
    def bytes_per_ms(self) -> float:
        return self.hbm_tb_per_s * 1e12 * self.memory_efficiency / 1e3

    @property
    def flop_per_ms(self) -> float:
        return self.bf16_dense_tflop_per_s * 1e12 * self.compute_efficiency / 1e3


GPUS = {
    "h100": GpuSpec("NVIDIA H100 SXM 80GB", 3.35, 989.0),
    "h200": GpuSpec("NVIDIA H200 SXM 141GB", 4.8, 989.0),
    "b200": GpuSpec("NVIDIA B200 180GB", 8.0, 2250.0),
}


def weight_bytes_touched(shape: ModelShape, tokens: np.ndarray, bytes_per_value: int = 2) -> np.ndarray:
    """Weight bytes one forward reads; MoE reads only the experts its B tokens route to.

    With uniform routing, the expected number of distinct experts hit by B
    tokens choosing top-k of E is E·(1 − (1 − k/E)^B).
    """
    b = np.asarray(tokens, dtype=float)
    total = shape.params() * bytes_per_value
    if not shape.is_moe:
        return np.full(b.shape, float(total))
    e, k = shape.moe_experts, shape.moe_top_k
    experts_hit = e * (1.0 - (1.0 - k / e) ** b)
    expert_bytes = 3 * shape.hidden * shape.ffn * bytes_per_value * shape.layers
    return total - (e - experts_hit) * expert_bytes


def roofline_step_ms(
    shape: ModelShape, gpu: GpuSpec, tokens: np.ndarray, context_tokens: float, tokens_per_request: int = 4
) -> np.ndarray:
    """Unpadded step time (ms) at each B in `tokens` with `context_tokens` total KV context."""
    b = np.asarray(tokens, dtype=float)
    weights_ms = np.maximum(weight_bytes_touched(shape, b) / gpu.bytes_per_ms,
                            2.0 * shape.params(active=True) * b / gpu.flop_per_ms)
    kv_bytes = shape.kv_bytes_per_token() * (context_tokens + b)
    queries_per_request = np.minimum(b, tokens_per_request)
    attn_flop = 4.0 * shape.heads * shape.head_dim * shape.layers * context_tokens * queries_per_request
    attention_ms = np.maximum(kv_bytes / gpu.bytes_per_ms, attn_flop / gpu.flop_per_ms)
    return gpu.step_overhead_ms + weights_ms + attention_ms


def roofline_profile(
    shape: ModelShape, gpu_key: str, max_tokens: int = 512, context_grid: tuple[int, ...] = CONTEXT_GRID_TOKENS,
    name: str | None = None,
) -> StepProfile:
    """A synthetic CUDA-graph profile: roofline at each capture size, as a padded staircase.

    The default name is `synthetic-<gpu>-<shape>`: it must never be mistaken for a measurement.
    """
    gpu = GPUS[gpu_key]
    buckets = vllm_capture_sizes(max_tokens)
    bucket_ms = np.stack([roofline_step_ms(shape, gpu, np.array(buckets), c) for c in context_grid])
    tokens, table = staircase(buckets, bucket_ms)
    return StepProfile(
        name=name or f"synthetic-{gpu_key}-{shape.name}",
        tokens=tokens,
        step_ms_table=table,
        context_tokens=np.array(context_grid, dtype=np.int64),
        provenance=roofline_provenance(shape, gpu, buckets),
    )


def roofline_provenance(shape: ModelShape, gpu: GpuSpec, buckets: list[int]) -> dict[str, str]:
    return {
        "device": f"{gpu.name} (SYNTHETIC roofline, not measured)",
        "model": shape.describe(),
        "dtype": "bfloat16 weights and KV cache",
        "source": "synthetic roofline: hwprofiles/roofline.py (regenerate: python -m specplan.hwprofiles.builtins)",
        "synthetic": "yes",
        "derivation": (
            f"per step: {gpu.step_overhead_ms} ms fixed + max(weight bytes / (HBM {gpu.hbm_tb_per_s} TB/s x "
            f"{gpu.memory_efficiency}), 2 x active params x B / ({gpu.bf16_dense_tflop_per_s} TFLOP/s dense "
            f"bf16 x {gpu.compute_efficiency})) + max(KV bytes of (context + B) tokens / bandwidth, "
            "attention FLOPs / compute); B padded up to the next capture size"
        ),
        "capture_mode": "cudagraph (padded to the next captured size)",
        "buckets": " ".join(str(b) for b in buckets),
        "context_axis": "total KV context tokens of the batch",
        "statistic": "analytic (no repeats)",
    }
