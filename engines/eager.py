"""What a step costs outside a CUDA graph: the larger of its kernels' time and the host's time to run them.

Place in the data flow: an engine's row carries an `EagerCost` (the host's
cost per kernel launch and the kernels each model family launches per layer,
each figure with its public source); the step price (phase 2) prices a step
by its `StepMode` (specplan.engines.modes):

    graph      kernel_ms                                     (the profile's time: a replay launches nothing)
    piecewise  max(kernel_ms, (a · L + L + 1) · t)           attention's a kernels per layer eager, L + 1 graph pieces
    eager      max(kernel_ms, k · L · t) + s · t             k kernels per layer, L layers, t per launch;
                                                             s host syncs (DeepEP normal: one per MoE layer)

t is what one kernel of an eager step costs the host. Where a family's steps wait on
the host inside every layer (DeepSeek-V4: routing metadata, top-k, DeepEP normal's
received counts, `.item()` in the indexer and the MoE), the host cannot run ahead of
the GPU and an op's whole eager dispatch is exposed: t is then the family's measured
eager cost per kernel (`KernelCount.eager_op_us`, from a public eager/graph pair), not
the launcher's microbenchmark. Elsewhere t is the launcher's (`per_launch_us`), and so is a step that
carries prompt tokens: the family's figure comes from a decode pair, and a prefill priced with it is
contradicted by a public step measurement (sgl-project/sglang PR #25052, V4-Flash on 4 x B200 DP4,
bench_one_batch_server: TTFT 66 ms for one 1,024-token prompt, where 28.5 us a kernel would make its eager
prefill step alone 240 ms; the launcher's 4.7 us gives 40 ms). No public measurement gives an extend step's
own host cost per kernel; a scenario may set one (`engine.cuda_graph.extend_op_us`, `EagerCost.extend_op_us`),
which replaces the extend figure only (benchmarks/extend_op.py brackets the serving cells with it).

A DeepEP normal-mode step's kernels differ too: its MoE block costs the
graph step's x `AllToAllRule.normal_over_low_latency` where no normal-mode
row of the public kernel table matches (`normal_mode_moe_ms`).

Figures, never fitted to an end-to-end run (benchmarks/eager_graph.py prints them beside a capture):

    per launch      4.7 us: Triton's own launcher, the low end of its 4.7-5.6 us (a no-op kernel,
                    GB200), meta-pytorch/tritonbench PR #1017; bracket 3.0 us (raw cuLaunchKernel)
                    to 9.1 us (Inductor's launcher). The engines issue most kernels from Python
                    (torch ops, Triton, TileLang, DeepGEMM's JIT), not raw cuLaunchKernel
    DeepSeek-V4     196 kernels per layer: a V4-Flash decode step after fusing launch-bound regions,
                    8,412 kernels / 43 layers (gty111/gLLM PR #264; 291 per layer before fusion,
                    12,508); bracket ~69 (lightseekorg/tokenspeed PR #1686: ~2,960 kernels per
                    V4.1-Flash DSpark decode step, if it keeps 43 layers) to 291. Attention's own
                    kernels, the eager part of a piecewise step: 8.7 per layer (374 launches per
                    token of sparse attention, slicing, index scoring and its GEMM over 43 layers,
                    Avarok-Cybersecurity/atlas PR #1147, another engine's V4.1-Flash)
    V4 eager op     28.5 us a kernel: sgl-project/sglang PR #24047 (V4-Flash, 8 x RTX PRO 6000, TP8, batch 1):
                    TPOT ~240 ms with --disable-cuda-graph, 97.5 ms with graphs; the eager step is
                    launch-bound (240 > 97.5), so 240 ms / (196 x 43 = 8,428 kernels) = 28.5 us; its
                    eager path synced with the host (.item(), .unique(), .nonzero() in the MoE and
                    attention, removed for capture). Bracket: 16.9 us if launches added to the kernels
                    instead ((240 - 97.5) / 8,428). Checked on #49369's sign (docs/guides/replication.md),
                    not fitted to it
    dense           10 per layer, a structural count (vLLM's LlamaDecoderLayer: two fused add +
                    RMSNorm, QKV, rotary, KV-cache write, attention, O, gate-up, SiLU-and-mul, down),
                    attention's 2 of them; not a measurement: benchmarks/profile_gpu.py's launch
                    capture (issue 40) measures it on a GPU
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from specplan.engines.modes import AllToAllRule, StepMode
from specplan.engines.steps import ModelFamily
from specplan.errors import SpecplanError


@dataclass(frozen=True)
class KernelCount:
    """Kernels one decode step launches per layer (`attention_per_layer`: the part a piecewise graph
    leaves eager; None where no public figure splits it), with its public bracket."""

    per_layer: float
    low_per_layer: float
    high_per_layer: float
    attention_per_layer: float | None
    source: str
    eager_op_us: float | None = None     # what one kernel of an eager step costs where the step syncs with the
    eager_op_source: str = ""            # host (None: the launcher's per_launch_us); module docstring
    eager_op_added_us: float | None = None   # the same public pair read with launches added to the kernels

    def op_us(self, cost: EagerCost, extending: bool = False) -> float:
        """The host's cost per kernel of an eager (or piecewise) step of this family: the family's eager op cost
        for a decode step (what its public pair measured); for a step carrying prompt tokens the scenario's
        extend figure where it sets one (`EagerCost.extend_op_us`), else the launcher's (module docstring:
        #25052's prefill contradicts the decode figure there)."""
        if extending:
            return cost.per_launch_us if cost.extend_op_us is None else cost.extend_op_us
        return cost.per_launch_us if self.eager_op_us is None else self.eager_op_us


@dataclass(frozen=True)
class EagerCost:
    """The host's microseconds per kernel launch (taken, low, high) and each model family's kernels;
    `extend_op_us`: the host's cost per kernel of a step carrying prompt tokens where a scenario sets one
    (engine.cuda_graph.extend_op_us; None: the launcher's `per_launch_us`)."""

    per_launch_us: float
    low_us: float
    high_us: float
    launch_source: str
    kernels: dict[str, KernelCount] = field(default_factory=dict)
    extend_op_us: float | None = None

    def count(self, model: ModelFamily) -> KernelCount:
        if model not in self.kernels:
            raise SpecplanError(f"no public kernel count for {model} models (known: {', '.join(self.kernels)}); "
                                "an eager step of this model keeps engine.cuda_graph.eager_overhead_ms")
        return self.kernels[model]


def launch_bound_ms(cost: EagerCost, model: ModelFamily, layers: int,
                    scope: Literal["all", "attention"] = "all", per_launch_us: float | None = None,
                    extending: bool = False) -> float:
    """The host's time to launch one step's kernels: every kernel (eager) or attention's plus one graph
    replay per piece (piecewise). `per_launch_us` overrides the taken figure (a bracket's end); `extending`:
    the step carries prompt tokens (KernelCount.op_us)."""
    count = cost.count(model)
    us = count.op_us(cost, extending) if per_launch_us is None else per_launch_us
    if scope == "all":
        return count.per_layer * layers * us / 1000.0
    if count.attention_per_layer is None:
        raise SpecplanError(f"no public count of attention's kernels for {model} models: a piecewise step "
                            "cannot be priced by its launches")
    return (count.attention_per_layer * layers + layers + 1) * us / 1000.0


def eager_step_ms(kernel_ms: float, launch_ms: float, syncs: int = 0, per_launch_us: float = 0.0) -> float:
    """max(kernels, launches): the GPU runs behind the host or the host behind the GPU; each host sync
    (a wait on the GPU) costs the launch after it, which nothing hides."""
    return max(kernel_ms, launch_ms) + syncs * per_launch_us / 1000.0


def normal_mode_moe_ms(graph_moe_ms: float, rule: AllToAllRule) -> float:
    """A DeepEP normal-mode MoE block (dispatch + routed experts + combine) from the low-latency one."""
    return graph_moe_ms * rule.normal_over_low_latency


def mode_step_ms(mode: StepMode, kernel_ms: float, cost: EagerCost, rule: AllToAllRule, model: ModelFamily,
                 layers: int) -> float:
    """One step's forward by its mode; `kernel_ms`: its kernels' time (normal-mode MoE already in it)."""
    if mode.mode == "graph":
        return kernel_ms
    if mode.mode == "piecewise":
        return max(kernel_ms, launch_bound_ms(cost, model, layers, "attention"))
    syncs = rule.normal_syncs_per_layer * layers if mode.all_to_all == "normal" else 0
    return eager_step_ms(kernel_ms, launch_bound_ms(cost, model, layers), syncs, cost.count(model).op_us(cost))


PUBLIC_EAGER_COST = EagerCost(
    per_launch_us=4.7, low_us=3.0, high_us=9.1,
    launch_source="meta-pytorch/tritonbench PR #1017 (GB200): 3.0-3.3 us raw cuLaunchKernel, 4.7-5.6 us through "
                  "Triton's launcher, 6.8-9.1 us through Inductor's; taken: 4.7",
    kernels={
        "deepseek-v4": KernelCount(
            per_layer=196.0, low_per_layer=69.0, high_per_layer=291.0, attention_per_layer=8.7,
            source="gty111/gLLM PR #264 (V4-Flash TP4 decode step: 12,508 kernels, 8,412 after fusion, 43 layers); "
                   "low: lightseekorg/tokenspeed PR #1686 (~2,960 per V4.1-Flash DSpark step); attention: "
                   "Avarok-Cybersecurity/atlas PR #1147 (374 attention launches per token)",
            eager_op_us=28.5, eager_op_added_us=16.9,
            eager_op_source="sgl-project/sglang PR #24047 (V4-Flash TP8, batch 1: TPOT ~240 ms eager, 97.5 ms with "
                            "CUDA graphs; 240 ms / 8,428 kernels; bracket 16.9 us: (240 - 97.5) / 8,428)"),
        "dense": KernelCount(
            per_layer=10.0, low_per_layer=10.0, high_per_layer=10.0, attention_per_layer=2.0,
            source="structural count of vLLM's LlamaDecoderLayer ops (not measured)"),
    },
)
