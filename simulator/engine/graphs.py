"""CUDA graphs: a decode step replays the graph captured at the next size up, and pays for that size.

Engines capture their decode forward as CUDA graphs at a fixed list of
sizes and pad every step to the next captured size; past the largest the
step runs outside the graph (eager) and pays the kernel launches a graph
replay hides. Two engines, two axes (`engine.cuda_graph.engine`):

    vllm    sizes are tokens in the forward (B). Default list, from
            vllm/config/compilation.py and vllm/config/vllm.py
            (`_set_cudagraph_sizes`): 1, 2, 4, multiples of 8 below 256,
            then multiples of 16 up to `max_cudagraph_capture_size`, whose
            default is min(max_num_seqs · (1 + num_speculative_tokens) · 2, 512);
            sizes above `max_num_batched_tokens` are dropped (here: above
            `max_step_tokens`). A step of B tokens is priced at pad(B).
    sglang  sizes are requests (batch size), from
            sglang/srt/model_executor/cuda_graph_runner.py
            (`get_batch_sizes_to_capture`): with speculative decoding
            1..8, 10..32 by 2, 40..160 by 16 (without: 1, 2, 4, 8, 16..160 by 8),
            plus 168..256 by 8 on GPUs over 80 GB, then capped at
            `cuda_graph_max_bs` (default here: the engine's max_batch_requests).
            A step of R requests and B tokens is priced at
            ceil(B · pad(R) / R) tokens: the padded rows carry the step's mean
            width (for fixed lengths exactly pad(R) · (1 + ℓ)).

`eager_overhead_ms` is what a step outside the graph pays on top of its
kernels: an assumed figure (default 2.0 ms, a parameter), about 400 kernel
launches of a 32-layer decoder at ~5 µs of CPU launch each, which the
graph replay removes. Not modelled: vLLM's rounding of sizes to multiples
of 1 + num_speculative_tokens for full graphs of uniform decode batches
(give `capture_sizes` to model it), and SGLang's eager mixed prefill batches.

`CaptureSizes` turns a list into the index maps the step pricer
(specplan.simulator.engine.price) applies once to its dense verify table
(vLLM) or per quote (SGLang).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specplan.simulator.core.errors import ScenarioError

VLLM_MAX_CAPTURE = 512


def vllm_capture_sizes(max_size: int) -> list[int]:
    """vLLM's default capture list up to `max_size` tokens."""
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, max_size + 1, 16)]
    return [s for s in sizes if s <= max_size]


def vllm_default_max(max_num_seqs: int, block_size: int) -> int:
    """vLLM's default max_cudagraph_capture_size: min(max_num_seqs · (1 + k) · 2, 512)."""
    return min(max_num_seqs * (1 + block_size) * 2, VLLM_MAX_CAPTURE)


def sglang_capture_sizes(speculative: bool, max_bs: int) -> list[int]:
    """SGLang's default capture batch sizes (a GPU over 80 GB, no DP) up to `max_bs` requests."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 161, 16)]
    else:
        sizes = [1, 2, 4, 8, *range(16, 161, 8)]
    sizes += list(range(168, 257, 8))
    return [s for s in sorted(set(sizes)) if s <= max_bs]


class CaptureSizes:
    """A sorted list of captured sizes and the eager surcharge beyond the largest."""

    def __init__(self, sizes: list[int], eager_overhead_ms: float) -> None:
        self.sizes = np.array(sorted(set(sizes)), dtype=np.int64)
        self.largest = int(self.sizes[-1])
        self.eager_overhead_ms = eager_overhead_ms

    def pad(self, n: int) -> int:
        """The captured size a step of n pads to (n itself beyond the largest: eager)."""
        if n > self.largest:
            return n
        return int(self.sizes[self.sizes.searchsorted(max(n, 1))])

    def pad_index(self, stop: int) -> np.ndarray:
        """pad(n) for n = 0..stop − 1 (n beyond the largest size maps to itself)."""
        n = np.arange(stop)
        at = self.sizes.searchsorted(np.maximum(n, 1)).clip(max=self.sizes.size - 1)
        return np.where(n > self.largest, n, self.sizes[at])

    def eager_ms(self, stop: int) -> np.ndarray:
        """The eager surcharge for n = 0..stop − 1."""
        return np.where(np.arange(stop) > self.largest, self.eager_overhead_ms, 0.0)


def capture_sizes(spec: Any, max_batch_requests: int, block_size: int, max_step_tokens: int) -> CaptureSizes:
    """The capture list of an `engine.cuda_graph` block, with each engine's default where it is silent."""
    given = list(spec.capture_sizes or ())
    if spec.engine == "vllm":  # a given list sets the largest size itself (as vLLM does)
        default_max = max(given) if given else vllm_default_max(max_batch_requests, block_size)
        top = min(spec.max_capture_size or default_max, max_step_tokens)
        sizes = given or vllm_capture_sizes(top)
    else:
        top = min(spec.max_capture_size or max_batch_requests, max_batch_requests)
        sizes = given or sglang_capture_sizes(block_size > 0, top)
    sizes = [s for s in sizes if s <= top]
    if not sizes:
        axis = "tokens (max_step_tokens)" if spec.engine == "vllm" else "requests (max_batch_requests)"
        raise ScenarioError("engine.cuda_graph.capture_sizes", f"no capture size fits: the largest allowed is {top} "
                            f"{axis}")
    return CaptureSizes(sizes, spec.eager_overhead_ms)


def padded_tokens(tokens: np.ndarray, requests: int, padded_requests: int) -> np.ndarray:
    """SGLang: B tokens over R requests padded to pad(R) requests of the same mean width."""
    if padded_requests == requests or requests == 0:
        return tokens
    return -((-tokens * padded_requests) // requests)


def widest_padded(max_step_tokens: int, sizes: CaptureSizes) -> int:
    """The most tokens an SGLang-padded step can price (the dense table must reach it)."""
    worst = max((sizes.pad(r) / r for r in range(1, sizes.largest + 1)), default=1.0)
    return math.ceil(max_step_tokens * worst)
