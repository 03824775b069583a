"""vLLM's own caps (specplan.engines.caps): request slots, the token budget, the graph's reach, memory.

Sources (vllm-project/vllm):

    max_num_seqs            `vllm serve` on a GPU of at least 70 GiB that is not an A100: 1024; else 256
                            (vllm/engine/arg_utils.py, get_batch_defaults, OPENAI_API_SERVER); each DP rank
                            runs its own engine core with the whole figure
    max_num_batched_tokens  8192 on the same GPUs, else 2048 (the same table); a decode step of R requests
                            verifies R x (1 + k) tokens, and vLLM cuts drafts at the budget's edge
    graph reach             max_cudagraph_capture_size = min(max_num_seqs x (1 + k) x 2, 512, the budget)
                            tokens (specplan.engines.vllm_capture): a uniform decode batch past it runs eager
    gpu_memory_utilization  0.9 (vllm/config/cache.py); the KV pool is gpu_memory_utilization x GPU less the
                            profiled peak: weights + activation peak + non-torch memory
                            (vllm/v1/worker/gpu_worker.py determine_available_memory)
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.engines.caps import (
    PROFILED_PEAK,
    CapFacts,
    CapReport,
    CapValue,
    MemoryRule,
    knob,
    kv_pool_cap,
)
from specplan.engines.vllm_capture import default_max_capture

KNOBS = ("max_num_seqs", "max_num_batched_tokens", "max_cudagraph_capture_size", "gpu_memory_utilization")
DEFAULTS = "vllm/engine/arg_utils.py get_batch_defaults"


@dataclass(frozen=True)
class VLLMCaps:
    """vLLM's caps (module docstring for each figure's source)."""

    gpu_memory_utilization: float = 0.9
    large_gpu_gib: float = 70.0
    knobs: tuple[str, ...] = KNOBS
    memory_rule: MemoryRule = PROFILED_PEAK

    def settings(self, facts: CapFacts) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) as launched: the overrides, else the GPU's defaults."""
        large = facts.gpu_memory_gib >= self.large_gpu_gib and not facts.a100
        return (int(knob(facts, "max_num_seqs", 1024 if large else 256, self.knobs)),
                int(knob(facts, "max_num_batched_tokens", 8192 if large else 2048, self.knobs)))

    def request_slots(self, facts: CapFacts) -> int | None:
        return self.settings(facts)[0]

    def report(self, facts: CapFacts) -> CapReport:
        seqs, budget = self.settings(facts)
        q = facts.query_tokens
        reach = int(knob(facts, "max_cudagraph_capture_size", min(default_max_capture(seqs, q - 1), budget),
                         self.knobs))
        caps = [CapValue("max_num_seqs", seqs, "requests (rank)", seqs, "admission", DEFAULTS),
                CapValue("max_num_batched_tokens", budget, "tokens (rank)", budget // q, "admission", DEFAULTS),
                *kv_pool_cap(facts, "the profile's memory model at gpu_memory_utilization"),
                CapValue("max_cudagraph_capture_size", reach, "tokens (rank)", reach // q, "graph",
                         "vllm/config/vllm.py _set_cudagraph_sizes")]
        return CapReport(tuple(caps))

    def mem_fraction_static(self, facts: CapFacts) -> float:
        return float(knob(facts, "gpu_memory_utilization", self.gpu_memory_utilization, self.knobs))
