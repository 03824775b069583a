"""CUDA graphs: a decode step replays the graph captured at the next size up, and pays for that size.

Engines capture their decode forward as CUDA graphs at a fixed list of
sizes and pad every step to the next captured size; past the largest the
step runs outside the graph (eager) and pays the kernel launches a graph
replay hides. Whose rule, and on which axis, is the serving engine's row of
the traits table (specplan.engines, `GraphRule`, with its sources), or
`engine.cuda_graph.engine` when it names one:

    tokens    (vLLM) sizes are tokens in the forward (B): a step of B tokens is priced at pad(B);
              the largest size is bounded by `max_step_tokens`
    requests  (SGLang, TensorRT-LLM) sizes are requests: a step of R requests and B tokens is
              priced at ceil(B · pad(R) / R) tokens (the padded rows carry the step's mean width;
              for fixed lengths exactly pad(R) · (1 + ℓ)); the largest size is bounded by
              `max_batch_requests`

How a step outside the graph is priced is its mode's
(specplan.simulator.engine.step_modes): by its kernel launches where the
serving engine's rule and the model's kernel count are known, else
`eager_overhead_ms` on top of its kernels: an assumed figure (default 2.0
ms, a parameter), about 400 kernel launches of a 32-layer decoder at ~5 µs
of CPU launch each, which the graph replay removes. SGLang's list runs to
its own `cuda_graph_max_bs` where the engine's caps know it (the GPU's
class), and captures a rank's slot count past it (`GraphRule.past_slots`).
Not modelled: vLLM's rounding of sizes to multiples of 1 +
num_speculative_tokens for full graphs of uniform decode batches (give
`capture_sizes` to model it).

`CaptureSizes` turns a list into the index maps the step pricer
(specplan.simulator.engine.price.forwards) applies once to its dense verify table
(token axis) or per quote (request axis).
"""

from __future__ import annotations

import math

import numpy as np

from specplan.engines.traits import GraphRule
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.scenario.spec import CudaGraph

ASSUMED_EAGER_MS = 2.0   # engine.cuda_graph.eager_overhead_ms unset: ~400 kernel launches of ~5 µs (module docstring)


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


def capture_sizes(graph: CudaGraph, rule: GraphRule, max_batch_requests: int, block_size: int,
                  max_step_tokens: int, engine_top: int | None = None) -> CaptureSizes:
    """The capture list of an `engine.cuda_graph` block under `rule`, the engine's own where the block is silent.

    An engine that captures its slot count past its own list (`rule.past_slots`: SGLang) runs that list up to
    its largest size (`max_capture_size`, else `engine_top`, the engine's default for the GPU where known),
    then adds the slots and drops what lies past them."""
    given = tuple(graph.capture_sizes or ())
    limit = max_step_tokens if rule.limit == "max_step_tokens" else max_batch_requests
    default_top = rule.default_top(max_batch_requests, block_size, given)
    if rule.past_slots is not None and not given:
        sizes = rule.past_slots(rule.default_sizes(graph.max_capture_size or engine_top or default_top,
                                                   block_size > 0), limit)
    else:
        top = min(graph.max_capture_size or default_top, limit)
        sizes = [s for s in (list(given) or rule.default_sizes(top, block_size > 0)) if s <= top]
    if not sizes:
        top = min(graph.max_capture_size or default_top, limit)
        raise ScenarioError("engine.cuda_graph.capture_sizes", f"no capture size fits: the largest allowed is {top} "
                            f"{rule.axis} ({rule.limit})")
    return CaptureSizes(sizes, ASSUMED_EAGER_MS if graph.eager_overhead_ms is None else graph.eager_overhead_ms)


def padded_tokens(tokens: np.ndarray, requests: int, padded_requests: int) -> np.ndarray:
    """SGLang: B tokens over R requests padded to pad(R) requests of the same mean width."""
    if padded_requests == requests or requests == 0:
        return tokens
    return -((-tokens * padded_requests) // requests)


def widest_padded(max_step_tokens: int, sizes: CaptureSizes) -> int:
    """The most tokens an SGLang-padded step can price (the dense table must reach it)."""
    worst = max((sizes.pad(r) / r for r in range(1, sizes.largest + 1)), default=1.0)
    return math.ceil(max_step_tokens * worst)
