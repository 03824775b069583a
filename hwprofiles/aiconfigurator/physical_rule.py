"""The physical rule: each operator against its roofline band and its twin in the other engine's table.

Place in the data flow: `build.py` prices every part from the database,
applies the public rules (`public.py`, `public_gemm.py`), then hands the
leaf curves to `apply_physical_rule`, which checks every operator and sets
the failing ones; `provenance.py` writes what it did and each part's
roofline (`roofline.PART` lines) so that `hwprofiles/physical.py` can check
the file again without aiconfigurator-core. `benchmarks/kernel_check.py`
prints the same checks.

THE RULE, the same for every GPU:

1. Band. Each operator at every B of the profile, at m = ceil(B / dp)
   tokens on its rank, within [0.8 x roofline, 8 x max(roofline, floor)]
   (hwprofiles/physical.py: FLOPs and bytes at the GPU's datasheet peaks, a
   3 us floor per kernel, 10 us per collective; `op_roof` gives each
   operator's FLOPs and bytes from its shape).
2. Twin. A GEMM or MoE operator is compared with the same operator (shape
   and precision) in the other engine's table of the same database and GPU
   (the twin each engine's row names, `EngineTraits.aic`: vLLM <-> SGLang,
   each at its built-ins' table version), where both are measured (source
   `silicon`), at m = 1, 2, 4, ... tokens per rank: more than 2x slower than
   its twin at any of them fails. A precision is one kernel family on one
   GPU whichever engine calls it (the premise of public_gemm.py); norms,
   mHC, the embedding and the collectives are each engine's own kernels and
   are held to the band only. Faster than the twin is no contradiction;
   faster than physics is the band's floor.
3. Set. An operator that fails the twin check takes its twin's curve at
   every B, clamped into the band; one that fails the band only is clamped
   into it (each B to the nearest edge, its shape kept where it was inside).
   An operator a public measurement set is held to the band only (beyond its
   measured counts the public rules hold a ratio, an extrapolation).

Why the twin and not the edge: the twin is a measurement of the same kernel
family on the same silicon and keeps its measured tile edges; the edge is a
bound. Why 2x: the two engines' GEMM and MoE tables agree within 0.6-1.4x
on every operator of the built-ins but one (kernel_check prints them); the
FP8 block-scaled GEMMs of vLLM 0.24 on H200, B200 and B300 are 8-50x slower
than SGLang's at the same shape and up to 80x above their band, flat in m
(B300 V4-Pro's shared expert: 200 us per call at every m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from specplan.engines import ENGINE_NAMES, EngineTraits, engine_traits
from specplan.hwprofiles.aiconfigurator.compile import CompiledTarget, engine_handle
from specplan.hwprofiles.aiconfigurator.operators import kind_of
from specplan.hwprofiles.aiconfigurator.package import database, quiet
from specplan.hwprofiles.aiconfigurator.parts import LeafCurves, part_of
from specplan.hwprofiles.aiconfigurator.public import PUBLIC_SOURCE
from specplan.hwprofiles.aiconfigurator.targets import engine_tables
from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.physical import PEAKS, GpuPeaks, OpRoof, band_ms

TWIN_TOLERANCE = 2.0
TWIN_KINDS = ("Gemm", "Moe")   # one kernel family per precision on one GPU, whichever engine calls it
REPORT_TOKENS = (1, 8, 64, 256)
CLAMPED = "roofline band edge"


def twin_of(backend: str) -> tuple[str, str] | None:
    """(engine, table version) of the twin table `backend`'s operators are held against: the twin its row names
    (specplan.engines.traits.AicTables), at the version its own row's built-ins read; None: no twin."""
    twin = engine_tables(backend).twin
    if twin is None:
        return None
    version = engine_tables(twin).version
    return None if version is None else (twin, version)


def twin_pairs() -> str:
    """'vLLM 0.24.0 <-> SGLang 0.5.14': each pair of twin tables once, as the rows name them."""
    pairs, seen = [], set()
    for name in ENGINE_NAMES:
        twin = twin_of(name)
        seen.add(name)
        if twin is not None and twin[0] not in seen:
            ours, theirs = engine_traits(name), engine_traits(twin[0])
            pairs.append(f"{engine_word(ours)} {ours.aic.version} <-> {engine_word(theirs)} {twin[1]}")
    return "; ".join(pairs)


def engine_word(row: EngineTraits) -> str:
    """'vLLM' of the row labelled 'vLLM 0.24'."""
    return row.label.removesuffix(row.version).strip()


RULE = ("each operator at every B within [0.8 x roofline, 8 x max(roofline, 3 us per kernel or 10 us per collective)] "
        "(roofline_peaks; roofline = max(FLOPs / dense peak at its precision, bytes / HBM or NVLink bandwidth)); a "
        "GEMM or MoE more than 2x slower than the same operator, shape and precision in the other engine's table of "
        f"this GPU ({twin_pairs()}, both measured, at m = 1, 2, 4, ... tokens per rank) takes that "
        "twin's curve clamped into the band; any other failing operator is clamped into its band; an operator set "
        "by a public measurement is held to the band only")


def precision(quant: str) -> tuple[str, float, int]:
    """(tensor-core rate, weight bytes per element, kernels per call) of a GEMM or MoE precision.

    Low-precision activations add a quantization kernel; FP4 weights carry a
    scale per 32 (MX) or 16 (NV) elements.
    """
    q = quant.lower()
    if q.startswith(("nvfp4", "w4a4")):
        return "fp4", 0.5625, 2
    if q.startswith("w4a8"):
        return "fp8", 0.53125, 2
    if q.startswith(("w4a16", "int4")):
        return "bf16", 0.53125, 1
    if q.startswith(("fp8", "int8", "w8a8")):
        return "fp8", 1.0, 2
    return "bf16", 2.0, 1


def op_roof(op: dict[str, Any], dp: int) -> OpRoof | None:
    """One operator's FLOPs and bytes per call (physical.OpRoof) from its shape; None: nothing to check."""
    kind = kind_of(op)
    body = op[kind]
    name = str(body.get("name", kind)).removeprefix("generation_").removeprefix("context_")
    layers = float(body.get("scale_factor", 1.0))
    if kind == "Gemm":
        rate, weight, kernels = precision(str(body["quant_mode"]))
        n, k = int(body["n"]), int(body["k"])
        return OpRoof(name, layers, kernels, rate, 2.0 * n * k, n * k * weight, 2.0 * (n + k))
    if kind == "Moe":
        rate, weight, _ = precision(str(body["quant_mode"]))
        hidden, ep = int(body["hidden_size"]), int(body["moe_ep_size"])
        inner = int(body["inter_size"]) / int(body["moe_tp_size"]) * (3 if body.get("is_gated", True) else 2)
        top, experts = int(body["topk"]), int(body["num_experts"])
        pairs = top / ep    # token-expert pairs this rank computes per token entering the layer
        return OpRoof(name, layers, 4, rate, 2.0 * pairs * hidden * inner, 0.0, 4.0 * pairs * hidden,
                      replicas=int(body.get("attention_dp_size", 1)), experts=(experts // ep, experts, top),
                      expert_bytes=hidden * inner * weight)
    if kind == "Elementwise":
        return OpRoof(name, layers, 1, "bf16", 0.0, 0.0, float(body["bytes_per_token"]))
    if kind == "Embedding":
        return OpRoof(name, layers, 1, "bf16", 0.0, 0.0, 2.0 * int(body["hidden_size"]))
    if kind == "Mhc":
        return mhc_roof(name, layers, int(body["hc_mult"]), int(body["hidden_size"]), body.get("op") == "pre")
    if kind == "MoeDispatch":
        return dispatch_roof(name, layers, body)
    if kind == "CustomAllReduce":
        return all_reduce(name, layers, int(body["tp_size"]), int(body["hidden_size"]), 2.0)
    return None


def mhc_roof(name: str, layers: float, streams: int, hidden: int, pre: bool) -> OpRoof:
    """DeepSeek-V4's hyper-connections: pre reads the n streams, mixes them by an FP32 linear of n·hidden ->
    (2 + n)·n coefficients (the reference model computes it in FP32: `F.linear(x.flatten(2).float(), hc_fn)`)
    and a Sinkhorn normalisation, writes one stream (3 kernels); post reads one and n streams, writes n."""
    if pre:
        mix = (2 + streams) * streams * streams * hidden
        return OpRoof(name, layers, 3, "fp32", 2.0 * mix, 4.0 * mix, 2.0 * hidden * (streams + 1))
    return OpRoof(name, layers, 1, "bf16", 0.0, 0.0, 2.0 * hidden * (2 * streams + 1))


def all_reduce(name: str, layers: float, group: int, hidden: int, payload: float) -> OpRoof:
    """A ring all-reduce of one hidden vector per token over `group` GPUs: 2 (g - 1) / g of it per link."""
    return OpRoof(name, layers, 1, "bf16", 0.0, 0.0, 2.0 * (group - 1) / group * hidden * payload, "nvlink")


def dispatch_roof(name: str, layers: float, body: dict[str, Any]) -> OpRoof:
    """MoE dispatch or combine: an all-to-all under data-parallel attention, else the TP all-reduce it stands for.

    With tensor-parallel attention the database's dispatch carries the
    attention output's all-reduce (`attn_ar_modeled` false) and its combine
    the MoE output's; under attention DP each token goes to the distinct
    ranks its top-k experts live on, E[ranks] = ep (1 - (1 - 1/ep)^k), the
    remote share (ep - 1) / ep of them over NVLink.
    """
    hidden, ep, top = int(body["hidden_size"]), int(body["moe_ep_size"]), int(body["topk"])
    payload = 1.0 if str(body.get("comm_quant", "half")).startswith("fp8") else 2.0
    dp = int(body.get("attention_dp_size", 1))
    if dp > 1:
        remote = ep * (1 - (1 - 1 / ep) ** top) * (ep - 1) / ep
        return OpRoof(name, layers, 1, "bf16", 0.0, 0.0, hidden * payload * remote, "nvlink")
    return all_reduce(name, layers, int(body["moe_tp_size"]) * ep, hidden, payload)


@dataclass(frozen=True)
class Finding:
    """One operator the rule set: why, how, and its step time (ms) at `tokens` (REPORT_TOKENS in the
    profile's range) before and after."""

    column: int
    name: str
    part: str
    why: str
    how: str
    tokens: tuple[int, ...]
    before: tuple[float, ...]
    after: tuple[float, ...]

    def text(self) -> str:
        points = ", ".join(f"{b}: {x:.3f} -> {y:.3f}" for b, x, y in zip(self.tokens, self.before, self.after,
                                                                        strict=True))
        return f"{self.name} ({self.part}) {self.why}; set from {self.how}; ms at B {points}"


class Twin:
    """The same operators in the other engine's table of the database on the same GPU (None where it has none)."""

    def __init__(self, compiled: CompiledTarget, ops: list[dict[str, Any]], q: int) -> None:
        target = compiled.target
        self.q, self.dp = q, target.dp
        self.label = ""
        self.handle: Any = None
        other = twin_of(target.backend)
        if other is None:
            return
        try:
            database(target.system, *other)
        except ProfileError:
            return
        engine = dict(compiled.engine, backend=other[0], backend_version=other[1])
        try:
            self.handle = engine_handle(replace(compiled, engine=engine), ops)
        except Exception:   # the package raises many kinds for a list the other table cannot compile
            return
        self.label = f"{other[0]} {other[1]} table"

    def entry(self, column: int, tokens: int) -> tuple[float, str] | None:
        """(ms, source) of one operator at B = tokens, or None where the twin's table lacks it."""
        if self.handle is None:
            return None
        b = math.ceil(tokens / self.dp)
        try:
            with quiet():
                found = self.handle.evaluate_generation_ops([column], batch_size=math.ceil(b / self.q), s=self.q,
                                                            x=b)
        except Exception:   # the package raises many kinds for a table it lacks
            return None
        return float(found[0][1]), str(found[0][3])

    def measured(self, column: int, tokens: list[int]) -> np.ndarray | None:
        """The twin's ms at `tokens` when every one is measured (silicon), else None."""
        entries = [self.entry(column, b) for b in tokens]
        if any(e is None or e[1] != "silicon" for e in entries):
            return None
        return np.array([e[0] for e in entries if e is not None])

    def curve(self, column: int, max_tokens: int) -> np.ndarray | None:
        entries = [self.entry(column, b) for b in range(1, max_tokens + 1)]
        if any(e is None for e in entries):
            return None
        return np.array([e[0] for e in entries if e is not None])


def compared_tokens(dp: int, max_tokens: int) -> list[int]:
    """B = dp x m at m = 1, 2, 4, ... tokens per rank, inside the profile."""
    return [dp * 2**k for k in range(32) if dp * 2**k <= max_tokens]


def band_failure(curve: np.ndarray, low: np.ndarray, high: np.ndarray) -> str:
    """Why one operator's curve (ms at B = 1..max) leaves its band, or ''."""
    reasons = []
    over = curve / high
    under = np.where(low > 0, curve / np.where(low > 0, low, 1.0), np.inf)
    if over.max() > 1 + 1e-9:
        reasons.append(f"{over.max():.1f} x its band's top at B = {int(np.argmax(over)) + 1}")
    if under.min() < 1 - 1e-9:
        reasons.append(f"{under.min():.2f} x its roofline floor at B = {int(np.argmin(under)) + 1}")
    return "; ".join(reasons)


def twin_failure(curve: np.ndarray, twin: np.ndarray, samples: list[int]) -> str:
    """'' unless the curve is more than TWIN_TOLERANCE x slower than its measured twin at a compared B."""
    slower = curve[np.array(samples) - 1] / twin
    if slower.max() <= TWIN_TOLERANCE:
        return ""
    return f"{slower.max():.1f} x its twin at B = {samples[int(np.argmax(slower))]}"


def apply_physical_rule(leaves: LeafCurves, ops: list[dict[str, Any]], compiled: CompiledTarget, q: int,
                        twin: bool = True) -> tuple[LeafCurves, list[Finding]]:
    """The curves after the rule (module docstring), and the operators it set; `twin` False: the band alone
    (the prefill files: their context-phase operators have no twin comparison)."""
    target = compiled.target
    peaks = PEAKS.get(target.system)
    if peaks is None:
        return leaves, []
    max_tokens = leaves.ms.shape[0]
    m = np.ceil(np.arange(1, max_tokens + 1) / target.dp)
    samples = compared_tokens(target.dp, max_tokens)
    other = Twin(compiled, ops, q) if twin else None
    findings = []
    report = tuple(b for b in REPORT_TOKENS if b <= max_tokens)
    at = np.array(report) - 1
    for column, op in enumerate(ops):
        roof = op_roof(op, target.dp)
        if roof is None or not np.any(leaves.ms[:, column] > 0):
            continue
        paired = other is not None and kind_of(op) in TWIN_KINDS and leaves.sources[column] != PUBLIC_SOURCE
        finding = settle(leaves.ms[:, column], roof, peaks, m, other if paired else None, column, samples)
        if finding is not None:
            factor, how, why = finding
            before = leaves.ms[at, column]
            leaves = leaves.rescaled((column,), factor, how)
            findings.append(Finding(column, roof.name, part_of(roof.name), why, how, report, tuple(before),
                                    tuple(leaves.ms[at, column])))
    return leaves, findings


def settle(curve: np.ndarray, roof: OpRoof, peaks: GpuPeaks, m: np.ndarray, twin: Twin | None, column: int,
           samples: list[int]) -> tuple[np.ndarray, str, str] | None:
    """(factor per B, the new source, why) for a failing operator, None for a passing one."""
    low, high = band_ms([roof], m, peaks)
    measured = twin.measured(column, samples) if twin is not None else None
    slower = twin_failure(curve, measured, samples) if measured is not None else ""
    why = "; ".join(r for r in (band_failure(curve, low, high), slower) if r)
    if not why:
        return None
    full = twin.curve(column, curve.size) if twin is not None and slower else None
    if twin is None or full is None:
        return ratio(np.clip(curve, low, high), curve), CLAMPED, why
    label = twin.label if not band_failure(full, low, high) else f"{twin.label} clamped into the band"
    return ratio(np.clip(full, low, high), curve), label, why


def ratio(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    return np.divide(new, old, out=np.ones_like(old), where=old > 0)


def roofline_lines(ops: list[dict[str, Any]], parts: list[str], dp: int) -> dict[str, str]:
    """`roofline.PART` header lines for the file's `parts`: their operators' FLOPs and bytes (physical.OpRoof)."""
    by_part: dict[str, list[str]] = {}
    for op in ops:
        roof = op_roof(op, dp)
        if roof is not None and part_of(roof.name) in parts:
            by_part.setdefault(part_of(roof.name), []).append(roof.text())
    return {f"roofline.{part}": "; ".join(texts) for part, texts in by_part.items()}


def physical_header(system: str, rule: str, findings: list[Finding], roofs: dict[str, str]) -> dict[str, str]:
    """The physical rule's header lines: the peaks, what the rule set (before/after), each part's roofline."""
    peaks = PEAKS.get(system)
    if peaks is None:
        return {"physical_rule": f"not applied: no datasheet peaks for {system}"}
    set_here = "; ".join(f.text() for f in findings) or "no operator"
    return {"roofline_peaks": f"{system}: {peaks.describe()}", "physical_rule": f"{rule}; set here: {set_here}",
            **roofs}
