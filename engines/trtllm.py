"""TensorRT-LLM's row: its CUDA-graph batch sizes, scheduler and the per-batch-size draft-length schedule.

Sources:

    graphs     tensorrt_llm/llmapi/llm_args.py (`CudaGraphConfig._generate_cuda_graph_batch_sizes`):
               sizes count requests; with padding (the configuration specplan models: a step is
               padded to the next captured size) 1, 2, 4, then multiples of 8 up to 128, then
               +64 up to max_batch_size; max_batch_size defaults to 128
    scheduler  the PyTorch backend's scheduler runs context (prefill) chunks in the same
               iteration as generation requests (in-flight batching: mixed), and whole requests that
               do not fit the token budget wait (defer); how attention-DP ranks are chosen is
               assumed (fewest requests): no public statement is pinned here
    launch     `trtllm-serve --extra_llm_api_options FILE`: speculative_config {max_draft_len,
               draft_len_schedule} (as `specplan tune` exports it); max_draft_len is the first
               (smallest batch bound's) length, which caps every later bucket
    aic        NVIDIA AIConfigurator's database: free_gpu_memory_fraction a share of the memory free
               after loading (`of_free`); no built-in reads its tables, and no twin

Host time: no public measurement of a TensorRT-LLM speculating cycle is known here, so a
profile read for it pays none (`engine.host.spec_cycle_ms` sets one). Benchmark client:
none modelled (compare TensorRT-LLM runs with a vLLM or SGLang client's definitions).
"""

from __future__ import annotations

from typing import Any

import yaml

from specplan.engines.launch import SCHEDULE_POLICY, Deployment
from specplan.engines.traits import AicTables, EngineTraits, GraphRule, Scheduler

DEFAULT_MAX_BATCH = 128


def capture_sizes(top: int, speculative: bool = False) -> list[int]:
    """TensorRT-LLM's padded capture list up to `top` requests."""
    sizes = [1, 2, 4, *range(8, 129, 8)]
    while sizes[-1] + 64 <= top:
        sizes.append(sizes[-1] + 64)
    return [s for s in sizes if s <= top]


def speculative_config(schedule: dict[int, int]) -> dict[str, Any]:
    """max_draft_len = the first (smallest batch bound's, largest) length; the schedule as given."""
    first = schedule[min(schedule)]
    if first == 0:
        return {"speculative_config": None}
    return {"speculative_config": {"max_draft_len": first, "draft_len_schedule": dict(schedule)}}


class Launch:
    """LLM-API options for a per-batch-size length schedule (no launch script)."""

    def script(self, deployment: Deployment) -> None:
        return None

    def files(self, deployment: Deployment) -> dict[str, str]:
        if deployment.schedule is None or deployment.policy != SCHEDULE_POLICY:
            return {}
        return {"trtllm.yaml": ("# TensorRT-LLM LLM API options (trtllm-serve --extra_llm_api_options FILE).\n"
                                "# draft_len_schedule: {batch-size upper bound: draft length}.\n"
                                + yaml.safe_dump(speculative_config(deployment.schedule), sort_keys=False))}


V1_2 = EngineTraits(
    name="trtllm", version="1.2", label="TensorRT-LLM 1.2",
    graphs=GraphRule(axis="requests", default_sizes=capture_sizes,
                     default_top=lambda max_batch, block, given: max(given) if given else DEFAULT_MAX_BATCH,
                     limit="max_batch_requests", source="tensorrt_llm/llmapi/llm_args.py CudaGraphConfig"),
    host=None,
    scheduler=Scheduler(budget="defer", prefill_schedule="mixed", dp_balance="fewest_requests",
                        sources={"prefill_schedule": "TensorRT-LLM PyTorch backend scheduler (in-flight batching)",
                                 "dp_balance": "assumed (no public statement pinned here)"}),
    client=None,
    launch=Launch(),
    aic=AicTables(memory_fraction="of_free", version=None, twin=None,
                  source="KvCacheConfig.free_gpu_memory_fraction is a share of the memory free once the model "
                         "is loaded; no built-in reads the database's trtllm tables"),
)

ROWS = (V1_2,)
