"""The public-microbenchmark rule: a public kernel measurement that contradicts a part sets that part.

Place in the data flow: `build.py` prices every part from the database
(`verify.py`, `parts.py`), then hands the parts to `apply_public_rule`, which
reads `hwprofiles/public/kernels.csv` (public measurements of DeepSeek-V4
parts, each row with its source in `sources.yaml` beside it) and returns the
parts the profile keeps. `benchmarks/kernel_check.py` prints the same
comparison (`point_checks`) for every built-in.

THE RULE, the same for every GPU:

1. Match. A row matches a part of a profile when its `gpu` is the profile's
   system, its `model` the profile's geometry (DeepSeek-V4-Flash or -Pro, by
   the MoE's hidden size, expert count and top-k), its `ep` the profile's EP
   degree, its `kernel` and `precision` what the profile's engine runs for
   that part (`engine_kernel`: SGLang's MegaMoE with FP4 experts is
   `deep_gemm_megamoe` w4a8; every other MoE path of the database has no
   public twin yet), and its `part` covers ours (`parts.PUBLIC_PARTS`:
   `moe_block` is dispatch + routed experts + combine, or the fused MegaMoE
   module). The all-to-all parts (dispatch, combine, moe_block) match only
   an all-to-all topology, data-parallel attention over the experts (dp =
   ep): with tensor-parallel attention the engine holds every token on every
   rank and runs no all-to-all.
2. Tokens per rank. A profile's step of B tokens puts B / dp tokens on each
   attention rank, the count the public tables give (the tokens each rank
   sends into the layer); only measured counts inside the profile's range
   (B = dp x t <= its largest B) are compared.
3. Compare, per layer per rank: r(t) = measured(t) / database(t), the
   database's part divided by its layer count.
4. Set. If |r(t) - 1| > 20% at any compared count, the measurement sets the
   part: part(B) = database(B) x r(B / dp), with r interpolated linearly in
   log tokens between the measured counts and held at the nearest measured
   ratio outside them. At a measured count the part is the measurement;
   between counts the database's shape (its tile edges, its steps) is kept
   at the measured level; outside the measured range the database's shape is
   scaled to meet the measurement at the nearest edge. Several rows at one
   count (two sources, or two statistics) are averaged. The part's source
   becomes `public microbenchmark`, and the header gives the ratios.
5. Otherwise (no matching row, or every compared count within 20%) the part
   stays the database's.

Why this rule: a public measurement times the kernel an engine runs on the
GPU named, with the all-to-all inside it; the database's MoE rows time other
kernels (or the same ones in another harness) and its all-to-all is a
separate model. Where the two agree within the spread that separates
harnesses (20%), the database's own dense curve (every token count) is the
better table; where they do not, the measurement is the evidence about the
level and the database remains the only evidence about the shape between
sparse measured counts.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specplan.hwprofiles.aiconfigurator.parts import PUBLIC_PARTS, LeafCurves
from specplan.hwprofiles.aiconfigurator.targets import AicTarget
from specplan.hwprofiles.errors import ProfileError

KERNELS_CSV = Path(__file__).resolve().parents[1] / "public" / "kernels.csv"
SCHEDULER_CSV = Path(__file__).resolve().parents[1] / "public" / "scheduler.csv"
TOLERANCE = 0.20
PUBLIC_SOURCE = "public microbenchmark"
ALL_TO_ALL_PARTS = ("moe_block", "dispatch", "combine")
# (hidden, routed experts, top-k) of the MoE -> the public table's model name
GEOMETRIES = {(4096, 256, 6): "deepseek-v4-flash", (7168, 384, 6): "deepseek-v4-pro", (7168, 256, 8): "deepseek-v3"}
RULE = ("a public kernel measurement (hwprofiles/public/kernels.csv) at the profile's GPU, geometry, EP degree, "
        "kernel and precision, compared per layer per rank at B/dp tokens per rank (all-to-all parts only where "
        "dp = ep), sets a part off by more than 20% at any measured count: part(B) = database(B) x "
        "measured/database interpolated linearly in log tokens between measured counts, held at the nearest "
        "ratio outside them; other parts stay the database's")


@dataclass(frozen=True)
class Measurement:
    """One row of kernels.csv: a published latency of one part, per layer and per rank, in µs."""

    source: str
    gpu: str
    model: str
    part: str
    kernel: str
    precision: str
    ep: int
    tokens_per_rank: int
    latency_us: float
    statistic: str
    note: str
    n: int = 0          # a single GEMM's shape (part gemm): output and input features; 0 otherwise
    k: int = 0


@dataclass(frozen=True)
class Check:
    """One measured count against the database's part (per layer per rank, µs)."""

    part: str
    measurement: Measurement
    database_us: float
    applies: bool
    why_not: str = ""

    @property
    def ratio(self) -> float:
        return self.measurement.latency_us / self.database_us

    @property
    def off(self) -> bool:
        return abs(self.ratio - 1) > TOLERANCE


def load_measurements(path: Path = KERNELS_CSV) -> list[Measurement]:
    """The public table's rows (none when the table is absent); a malformed row is a one-line error."""
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    try:
        return [Measurement(r["source"], r["gpu"], r["model"], r["part"], r["kernel"], r["precision"], int(r["ep"]),
                            int(r["tokens_per_rank"]), float(r["latency_us"]), r["statistic"], r["note"],
                            int(r.get("n") or 0), int(r.get("k") or 0))
                for r in rows]
    except (KeyError, ValueError) as exc:
        raise ProfileError(f"{path}: a row does not read as a public kernel measurement ({exc})") from None


@dataclass(frozen=True)
class SchedulerCost:
    """One row of scheduler.csv: a published host cost of the engine's scheduler per step, before and after a change."""

    source: str
    engine: str
    what: str
    dp_ranks: int
    attn_tp: int
    before_us: float
    after_us: float
    statistic: str
    note: str


def load_scheduler_costs(path: Path = SCHEDULER_CSV) -> list[SchedulerCost]:
    """The public scheduler-cost rows (none when the table is absent); a malformed row is a one-line error."""
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    try:
        return [SchedulerCost(r["source"], r["engine"], r["what"], int(r["dp_ranks"]), int(r["attn_tp"]),
                              float(r["before_us"]), float(r["after_us"]), r["statistic"], r["note"]) for r in rows]
    except (KeyError, ValueError) as exc:
        raise ProfileError(f"{path}: a row does not read as a public scheduler cost ({exc})") from None


def table_stamp(path: Path = KERNELS_CSV) -> str:
    """How the header names the table it applied: path, rows and a content hash."""
    if not path.is_file():
        return f"hwprofiles/public/{path.name} absent: no part checked"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return f"hwprofiles/public/{path.name} ({len(load_measurements(path))} rows, sha256 {digest})"


def geometry(moe_body: dict | None) -> str:
    """The public table's model name for a MoE operator's body (hidden, experts, top-k), or ''."""
    if moe_body is None:
        return ""
    return GEOMETRIES.get((int(moe_body["hidden_size"]), int(moe_body["num_experts"]), int(moe_body["topk"])), "")


def engine_kernel(target: AicTarget, moe_dtype: str) -> tuple[str, str] | None:
    """(kernel, precision) of the public table that the target's engine runs for its MoE block, if any."""
    if target.moe_backend == "megamoe" and moe_dtype.startswith("w4a8_mxfp4_mxfp8"):
        return "deep_gemm_megamoe", "w4a8"
    return None


@dataclass(frozen=True)
class ProfileKey:
    """What the rule matches a profile on (the target's GPU, EP, topology, geometry, MoE kernel)."""

    system: str
    ep: int
    dp: int
    model: str
    kernel: tuple[str, str] | None
    max_tokens: int


def why_not(key: ProfileKey, row: Measurement, ours: tuple[str, ...]) -> str:
    """'' when `row` matches the profile's parts `ours`, else the first reason it does not."""
    if (row.gpu, row.model, row.ep) != (key.system, key.model, key.ep):
        return "another GPU, geometry or EP degree"
    if not ours:
        return f"the profile has no {row.part} part"
    if row.part in ALL_TO_ALL_PARTS and key.dp != key.ep:
        return "all-to-all part; the profile's attention is tensor-parallel (no all-to-all)"
    if key.kernel != (row.kernel, row.precision):
        runs = "no public twin" if key.kernel is None else " ".join(key.kernel)
        return f"kernel {row.kernel} {row.precision}; the engine runs another ({runs})"
    if row.tokens_per_rank * key.dp > key.max_tokens:
        return f"{row.tokens_per_rank} tokens per rank is beyond the profile's largest B"
    return ""


def point_checks(key: ProfileKey, rows: list[Measurement], parts: list[str],
                 per_layer_us: Callable[[tuple[str, ...], int], float]) -> list[Check]:
    """Every row of the profile's GPU, geometry and EP against the database (`per_layer_us(parts, B)`)."""
    out = []
    for row in rows:
        if (row.gpu, row.model, row.ep) != (key.system, key.model, key.ep) or row.part not in PUBLIC_PARTS:
            continue
        ours = tuple(p for p in PUBLIC_PARTS[row.part] if p in parts)
        reason = why_not(key, row, ours)
        database = per_layer_us(ours, row.tokens_per_rank * key.dp) if ours else math.nan
        out.append(Check(row.part, row, database, not reason, reason))
    return out


def apply_public_rule(leaves: LeafCurves, key: ProfileKey, rows: list[Measurement],
                      layers: float) -> tuple[LeafCurves, list[Check]]:
    """The parts the profile keeps after the rule (module docstring), and every check made."""
    checks = point_checks(key, rows, leaves.part_names(), lambda ours, b: per_layer_us(leaves, ours, b, layers))
    for public_part, applied in setting(checks).items():
        factor, note = ratio_curve(applied, key.dp, leaves.ms.shape[0])
        for part in PUBLIC_PARTS[public_part]:
            if part in leaves.part_names():
                leaves = leaves.with_part(part, factor, PUBLIC_SOURCE, note)
    return leaves, checks


def setting(checks: list[Check]) -> dict[str, list[Check]]:
    """The public parts the rule sets (some matching count off by more than 20%), with their matching checks."""
    out = {}
    for public_part in PUBLIC_PARTS:
        applied = [c for c in checks if c.applies and c.part == public_part]
        if any(c.off for c in applied):
            out[public_part] = applied
    return out


def per_layer_us(leaves: LeafCurves, parts: tuple[str, ...], tokens: int, layers: float) -> float:
    """The database's `parts` at B = tokens, per layer per rank, in µs (NaN beyond the curves)."""
    if tokens > leaves.ms.shape[0]:
        return math.nan
    return float(sum(leaves.part_ms(p)[tokens - 1] for p in parts)) / layers * 1000.0


def ratio_curve(checks: list[Check], dp: int, max_tokens: int) -> tuple[np.ndarray, str]:
    """measured / database at B = 1..max_tokens (log-token interpolation, held outside), and the note."""
    counts = sorted({c.measurement.tokens_per_rank for c in checks})
    ratios = [float(np.mean([c.ratio for c in checks if c.measurement.tokens_per_rank == t])) for t in counts]
    per_rank = np.arange(1, max_tokens + 1) / dp
    factor = np.interp(np.log(per_rank), np.log(counts), ratios)
    sources = sorted({f"{c.measurement.source} {c.measurement.kernel} {c.measurement.precision} "
                      f"{c.measurement.statistic}" for c in checks})
    points = ", ".join(f"{t}: x{r:.2f}" for t, r in zip(counts, ratios, strict=True))
    return factor, f"{'; '.join(sources)}; measured/database at tokens per rank {points}"
