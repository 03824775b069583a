"""The public-microbenchmark rule for single GEMMs: a published GEMM timing that contradicts a GEMM sets it.

Place in the data flow: `build.py` prices every part from the database,
applies the MoE rule of `public.py`, then this one to the GEMM operators
(`gemm_leaves` reads their shapes from the operator list), and keeps what
comes back. `benchmarks/kernel_check.py` prints the same checks.

THE GEMM CRITERION, the same for every GPU and engine:

1. Match. A `gemm` row of hwprofiles/public/kernels.csv matches a GEMM
   operator of a profile when its `gpu` is the profile's system and its
   `precision` the operator's quant mode. A precision is one kernel family
   whatever the library: `fp8_block` is an FP8 GEMM with 1 x 128 activation
   scales and 128 x 128 weight blocks, which DeepGEMM, CUTLASS and
   TensorRT-LLM-gen each implement (the database's rows name DeepGEMM, the
   public ones the others); the rule compares against the range the
   implementations span, not against one of them.
2. Shape. Of the measured shapes (N output, K input features), the nearest
   to the operator's by weight elements N x K, and only within a factor 2
   (|log2(N K / N_m K_m)| <= 1): at the token counts measured (up to 1,024)
   such a GEMM is bound by its launch and its weight read, and a factor 2
   in weight bytes moves the read by less than the implementations differ.
3. Tokens. The GEMM's m is the tokens on its rank, ceil(B / dp); measured m
   inside the profile's range (B = dp x m <= its largest B) are compared.
4. Compare per call: the database's GEMM at m (the operator's time over its
   layer count) against every implementation measured at m.
5. Set. If at some compared m the database lies outside [the fastest / 2,
   2 x the slowest] implementation, the measurement sets the GEMM:
   gemm(B) = database(B) x r(ceil(B / dp)), r = the implementations' mean
   over the database, interpolated linearly in log m between measured
   counts and held at the nearest ratio outside them (the rule of public.py
   for one implementation). Its source becomes `public microbenchmark` and
   its part line gives the ratios. Otherwise it stays the database's.

Why a factor 2 and not the 20% of public.py: a GEMM row times another
library's implementation of the family, not the database's own kernel, and
the libraries differ among themselves by up to 1.55x at one shape and m
(B200, N 2048 K 1024, m 128: 4.99 to 7.71 us); a database row may also
include an activation-quantization kernel the public figures leave out
(their inputs are quantized before the timed call; SGLang 0.5.14's
fp8_block rows time act-quant + GEMM, as their collection notes say). A
database figure more than twice beyond the range is a contradiction no
choice of library explains (vLLM 0.24's B200 fp8_block rows: 170-300 us).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from specplan.hwprofiles.aiconfigurator.operators import kind_of
from specplan.hwprofiles.aiconfigurator.parts import LeafCurves, part_of
from specplan.hwprofiles.aiconfigurator.public import PUBLIC_SOURCE, Measurement

GEMM_TOLERANCE = 2.0   # a factor beyond the fastest and slowest implementation measured

GEMM_RULE = ("a public GEMM measurement (part gemm) at the profile's GPU and the operator's precision (one kernel "
             "family whatever the library), at the measured shape nearest by N x K within a factor 2, compared per "
             "call at m = ceil(B/dp) tokens, sets a GEMM the database puts outside [fastest / 2, 2 x slowest] "
             "implementation at any measured m: gemm(B) = database(B) x mean/database interpolated in log m, held "
             "outside the measured counts")


@dataclass(frozen=True)
class GemmLeaf:
    """A GEMM operator of the plain list: its leaf column, shape, precision and layer count."""

    column: int
    name: str
    n: int
    k: int
    precision: str
    layers: float


@dataclass(frozen=True)
class GemmCheck:
    """One measured m of the nearest measured shape against one GEMM of the database (per call, µs)."""

    leaf: GemmLeaf
    tokens: int
    measured: tuple[Measurement, ...]
    database_us: float
    applies: bool
    why_not: str = ""

    @property
    def band(self) -> tuple[float, float]:
        us = [m.latency_us for m in self.measured]
        return min(us) / GEMM_TOLERANCE, GEMM_TOLERANCE * max(us)

    @property
    def mean_us(self) -> float:
        return float(np.mean([m.latency_us for m in self.measured]))

    @property
    def ratio(self) -> float:
        return self.mean_us / self.database_us

    @property
    def off(self) -> bool:
        low, high = self.band
        return not low <= self.database_us <= high


def gemm_leaves(plain_ops: list[dict[str, Any]]) -> list[GemmLeaf]:
    """The GEMM operators of the plain (overlap-opened) list, by their column in the leaf curves."""
    out = []
    for column, op in enumerate(plain_ops):
        if kind_of(op) == "Gemm":
            body = op["Gemm"]
            out.append(GemmLeaf(column, str(body["name"]).removeprefix("generation_"), int(body["n"]),
                                int(body["k"]), str(body["quant_mode"]), float(body["scale_factor"])))
    return out


def nearest_shape(leaf: GemmLeaf, rows: list[Measurement]) -> tuple[int, int] | None:
    """The measured (N, K) nearest to the leaf's by weight elements, within a factor 2, or None."""
    shapes = {(r.n, r.k) for r in rows}
    if not shapes:
        return None
    distance = {s: abs(math.log2(leaf.n * leaf.k / (s[0] * s[1]))) for s in shapes}
    best = min(sorted(shapes), key=distance.__getitem__)
    return best if distance[best] <= 1.0 else None


def gemm_checks(leaves: LeafCurves, gemms: list[GemmLeaf], system: str, dp: int,
                rows: list[Measurement]) -> list[GemmCheck]:
    """Every measured m of each GEMM's nearest measured shape on this GPU and precision, against the database."""
    out = []
    for leaf in gemms:
        mine = [r for r in rows if r.part == "gemm" and (r.gpu, r.precision) == (system, leaf.precision)]
        shape = nearest_shape(leaf, mine)
        at_shape = [r for r in mine if (r.n, r.k) == shape]
        for tokens in sorted({r.tokens_per_rank for r in at_shape}):
            measured = tuple(r for r in at_shape if r.tokens_per_rank == tokens)
            inside = tokens * dp <= leaves.ms.shape[0]
            database = 1000.0 * leaves.ms[tokens * dp - 1, leaf.column] / leaf.layers if inside else math.nan
            why = "" if inside else f"{tokens} tokens per rank is beyond the profile's largest B"
            out.append(GemmCheck(leaf, tokens, measured, database, inside, why))
    return out


def apply_gemm_rule(leaves: LeafCurves, gemms: list[GemmLeaf], system: str, dp: int,
                    rows: list[Measurement]) -> tuple[LeafCurves, list[GemmCheck]]:
    """The curves after the GEMM criterion (module docstring), and every check made."""
    checks = gemm_checks(leaves, gemms, system, dp, rows)
    for leaf in gemms:
        applied = [c for c in checks if c.leaf == leaf and c.applies]
        if any(c.off for c in applied):
            factor, note = gemm_ratio_curve(applied, dp, leaves.ms.shape[0])
            leaves = leaves.with_columns((leaf.column,), factor, PUBLIC_SOURCE, part_of(leaf.name), note)
    return leaves, checks


def gemm_ratio_curve(checks: list[GemmCheck], dp: int, max_tokens: int) -> tuple[np.ndarray, str]:
    """mean measured / database at B = 1..max_tokens (log-m interpolation, held outside), and the note."""
    counts = [c.tokens for c in checks]
    ratios = [c.ratio for c in checks]
    per_rank = np.ceil(np.arange(1, max_tokens + 1) / dp)
    factor = np.interp(np.log(per_rank), np.log(counts), ratios)
    first = checks[0].measured[0]
    kernels = sorted({f"{m.source} {m.kernel}" for c in checks for m in c.measured})
    points = ", ".join(f"{c.tokens}: x{c.ratio:.3f}" for c in checks)
    return factor, (f"{'; '.join(kernels)} ({first.precision} {first.statistic}, measured N {first.n} K {first.k} for "
                    f"this GEMM's N {checks[0].leaf.n} K {checks[0].leaf.k}); mean measured/database per call at m "
                    f"{points}")
