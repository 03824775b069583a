"""The MegaMoE carry rule: a public MegaMoE measurement at EP8 carried to another EP degree (and B200 to B300).

Place in the data flow: `build.public_rows` reads the public kernel table
(`public.load_measurements`) and, for a target that runs SGLang's fused
MegaMoE block where no row of its own GPU and EP degree exists, hands the
rows here; `carried_rows` returns rows at the target's GPU and EP degree,
derived from measured EP8 rows by the rule below, and `apply_public_rule`
then treats them as it treats a measured row (its 20% test, its log-token
interpolation). `CarryResult.line` is the header's `megamoe_carry` line.

THE RULE (EP8 -> EP ep, same GPU, same geometry, kernel and precision): the
block moves by the change of its roofline, nothing else:

    block_ep(t) = block_8(t) + max(R(ep, t), C(t)) - max(R(8, t), C(t))
    R(ep, t)    = X(ep, t) x expert_bytes / HBM,   X(ep, t) = (E / ep)(1 - (1 - k / E)^(ep x t))
    C(t)        = t x k x pair_flop / MMA peak

t is the tokens each rank sends into the layer (the table's tokens per
rank), E the routed experts (256 for V4-Flash), k the top-k (6), X the
experts a rank holds that at least one of the ep x t tokens of the step
routes to (uniform routing, the expectation physical.py's roofline uses),
expert_bytes one expert's gate, up and down weights at the block's
precision (hidden x 3 x ffn x 0.53125 bytes for MXFP4 with its scales:
13.4 MB for V4-Flash), pair_flop one token-expert pair's GEMM work (2 x
hidden x 3 x ffn), HBM and the MMA peak the GPU's datasheet figures
(hwprofiles/physical.py PEAKS: 8 TB/s and FP8 4,500 TFLOP/s on B200 and
B300; W4A8 issues at the FP8 rate). Why, part by part:

- weights: a rank at EP4 holds 64 of the 256 experts, twice EP8's 32, and
  streams every expert it is routed to from HBM once per step (at t = 64
  tokens per rank nearly every expert is hit at both degrees: +31.85
  experts, 426 MB, 53.2 us per layer);
- compute: at equal t a rank receives the same t x k token-expert pairs at
  any EP (ep x t tokens x k / ep ranks), so the MMA work C is unchanged; the
  pipelined kernel streams weights under its MMAs, so the extra read costs
  only what it adds above C (from ~1,000 tokens per rank on V4-Flash the
  block is compute-bound at both degrees and the rule adds nothing);
- all-to-all: the share of a rank's pairs sent off-rank falls from 7/8 to
  3/4 and the peers from 7 to 3; the fused kernel overlaps it with its
  GEMMs, and the rule leaves it unchanged (an over-estimate of at most the
  NVLink time of 1/8 of the pairs' payload).

B200 -> B300 (`GPU_CARRY`): the same Blackwell kernel, whose W4A8 block uses
HBM, NVLink and the FP8-rate tensor cores (FP4 weights x FP8 activations
issue at the FP8 rate; B300's larger FP4 peak serves FP4 x FP4 only); the
two GPUs' datasheet peaks of all three are equal (PEAKS), so B300's rows
are B200's, unscaled. The carry refuses a pair of GPUs whose peaks of those
three resources differ.

Checks of the rule's shape (kernel microbenchmarks, hwprofiles/public/
kernels.csv; never a serving figure; the rule has no fitted constant):
B200 EP8 carried to EP4 against GB300 measured at EP4, whose HBM equals
B200's: V4-Flash (moe_ep_benchmark_ep8_b200 -> moe_ep_benchmark_ep4_gb300)
at 8 / 64 / 512 tokens per rank 123.6 / 178.1 / 208.2 us against 129.0 /
177.2 / 197.5 us (-4%, +1%, +5%); V4-Pro (vllm_pr49636 -> the same GB300
table) 293.1 / 530.9 / 587.5 against 290.8 / 549.6 / 609.3 (+1%, -3%, -4%).
At 1,024 tokens per rank and beyond the carried B200 figure is 4-22% above
GB300's (Flash 1,024 / 2,048 / 4,096 / 8,192: 271.7 / 379.1 / 680.0 /
1,320.4 against 229.4 / 364.5 / 610.3 / 1,123.3 us): there the block is
compute-bound and GB300's faster tensor cores (FP8 5,000 against 4,500
TFLOP/s) and clocks show, as they should between two GPUs. The step
case sglang-25052-v4-flash-megamoe-w4a8-b200-step (4 x B200, DP4 +
MegaMoE) is the rule's out-of-sample check; nothing here was tuned to it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from specplan.hwprofiles.aiconfigurator.physical_rule import precision as weight_precision
from specplan.hwprofiles.aiconfigurator.public import Measurement, ProfileKey
from specplan.hwprofiles.physical import PEAKS, GpuPeaks

FROM_EP = 8
BLOCK = "moe_block"
# a GPU with no MegaMoE row of its own -> the GPU whose rows it takes (same kernel, equal peaks of what it uses)
GPU_CARRY = {"b300_sxm": "b200_sxm"}
# the tensor-core rate each MegaMoE precision issues at
MMA_RATE = {"w4a8": "fp8", "w4a4": "fp4"}
RULE = ("MegaMoE carry: a fused MegaMoE block measured at EP8 carried to EP{ep} on the same GPU by the change of its "
        "roofline: block(t) = block_EP8(t) + max(R({ep}, t), C(t)) - max(R(8, t), C(t)) at t tokens per rank, "
        "R(ep, t) = X(ep, t) x expert_bytes / HBM the weight read of the X(ep, t) = (E/ep)(1 - (1 - k/E)^(ep t)) "
        "experts hit on a rank (uniform routing), C(t) = t x k x pair_flop / MMA peak the GEMM work, unchanged "
        "with EP (t x k token-expert pairs per rank at any EP); the all-to-all is left at EP8's (the fused kernel "
        "overlaps it; its off-rank share falls from 7/8 to 3/4)")


@dataclass(frozen=True)
class ExpertShape:
    """What the roofline needs: routed experts E, top-k, one expert's weight bytes, one pair's GEMM FLOPs."""

    experts: int
    topk: int
    expert_bytes: float
    pair_flop: float


def expert_shape(moe_body: dict | None) -> ExpertShape | None:
    """E, top-k and one expert's weight bytes (gate, up, down at the MoE's precision) of a MoE operator's body."""
    if moe_body is None:
        return None
    inner = int(moe_body["inter_size"]) / int(moe_body["moe_tp_size"]) * (3 if moe_body.get("is_gated", True) else 2)
    per_element = weight_precision(str(moe_body["quant_mode"]))[1]
    hidden = int(moe_body["hidden_size"])
    return ExpertShape(int(moe_body["num_experts"]), int(moe_body["topk"]), hidden * inner * per_element,
                       2.0 * hidden * inner)


def experts_hit(ep: int, tokens_per_rank: float, shape: ExpertShape) -> float:
    """X(ep, t): experts a rank holds that the step's ep x t tokens route to (expectation, uniform routing)."""
    untouched = (1.0 - shape.topk / shape.experts) ** (ep * tokens_per_rank)
    return shape.experts / ep * (1.0 - untouched)


def roofline_us(ep: int, tokens_per_rank: float, shape: ExpertShape, peaks: GpuPeaks, rate: str) -> float:
    """max(R(ep, t), C(t)): the block's weight read against its MMA work, µs per layer per rank."""
    read = experts_hit(ep, tokens_per_rank, shape) * shape.expert_bytes / peaks.hbm
    compute = tokens_per_rank * shape.topk * shape.pair_flop / peaks.flops(rate)
    return max(read, compute) * 1e6


def carry_us(ep: int, tokens_per_rank: float, shape: ExpertShape, peaks: GpuPeaks, rate: str) -> float:
    """What the rule adds to an EP8 measurement at t tokens per rank to give EP `ep` (µs per layer per rank)."""
    return (roofline_us(ep, tokens_per_rank, shape, peaks, rate)
            - roofline_us(FROM_EP, tokens_per_rank, shape, peaks, rate))


def same_resources(gpu: str, source: str, precision: str) -> bool:
    """Whether two GPUs' datasheet peaks agree on what the block uses: HBM, NVLink, its MMA rate."""
    a, b = PEAKS[gpu], PEAKS[source]
    rate = MMA_RATE.get(precision, "bf16")
    return (a.hbm, a.link, a.flops(rate)) == (b.hbm, b.link, b.flops(rate))


@dataclass(frozen=True)
class CarryResult:
    rows: list[Measurement]
    line: str


def carried_rows(rows: list[Measurement], key: ProfileKey, shape: ExpertShape | None) -> CarryResult:
    """Rows at the key's GPU and EP carried from measured EP8 rows (module docstring), and the header line.

    Nothing is carried where the key runs no MegaMoE kernel, its attention is not data-parallel over the
    experts (dp != ep), a row of its own GPU and EP exists, or no EP8 row of its geometry is measured.
    """
    if key.kernel is None or key.kernel[0] != "deep_gemm_megamoe" or key.dp != key.ep or shape is None:
        return CarryResult([], "")
    kernel, precision = key.kernel
    block = [r for r in rows if (r.model, r.part, r.kernel, r.precision) == (key.model, BLOCK, kernel, precision)]
    if any((r.gpu, r.ep) == (key.system, key.ep) for r in block):
        return CarryResult([], "")
    source_gpu = key.system if any(r.gpu == key.system for r in block) else GPU_CARRY.get(key.system, "")
    if not source_gpu or (source_gpu != key.system and not same_resources(key.system, source_gpu, precision)):
        return CarryResult([], "")
    measured = [r for r in block if (r.gpu, r.ep) == (source_gpu, FROM_EP)]
    if not measured:
        return CarryResult([], "")
    peaks, rate = PEAKS[key.system], MMA_RATE.get(precision, "bf16")
    out = [replace(r, source=f"{r.source} carried to EP{key.ep}", gpu=key.system, ep=key.ep,
                   latency_us=round(r.latency_us + carry_us(key.ep, r.tokens_per_rank, shape, peaks, rate), 1),
                   note=f"{r.note}; EP8 carried to EP{key.ep} by megamoe_carry.py")
           for r in measured]
    return CarryResult(out, describe(key, source_gpu, shape, measured, out))


def describe(key: ProfileKey, source_gpu: str, shape: ExpertShape, measured: list[Measurement],
             carried: list[Measurement]) -> str:
    counts = sorted({r.tokens_per_rank for r in measured})
    points = ", ".join(
        f"{t}: {np.mean([r.latency_us for r in measured if r.tokens_per_rank == t]):.1f} -> "
        f"{np.mean([r.latency_us for r in carried if r.tokens_per_rank == t]):.1f}" for t in counts)
    sources = ", ".join(sorted({r.source for r in measured}))
    gpu = (f"; {source_gpu}'s rows taken unscaled for {key.system} (the same kernel; equal datasheet HBM, NVLink "
           f"and {MMA_RATE.get(key.kernel[1] if key.kernel else '', 'bf16')} tensor-core peaks, "
           "hwprofiles/physical.py)" if source_gpu != key.system else "")
    return (f"{RULE.format(ep=key.ep)}{gpu}; here E {shape.experts}, top-{shape.topk}, expert_bytes "
            f"{shape.expert_bytes / 1e6:.2f} MB, HBM {PEAKS[key.system].hbm / 1e12:g} TB/s; from {sources} "
            f"({source_gpu}, EP8), us per layer per rank at tokens per rank {points}; hwprofiles/aiconfigurator/"
            "megamoe_carry.py; the step case sglang-25052-v4-flash-megamoe-w4a8-b200-step is its out-of-sample "
            "check, never tuned to")
