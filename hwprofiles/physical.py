"""The physical checks: every part of a composed step within a stated band of its roofline time.

Place in the data flow: `aiconfigurator/physical_rule.py` writes one
`# roofline.PART:` header line per part of a built-in (the operators' shapes
as FLOPs and bytes, `OpRoof`) and applies the rule that sets a failing
operator; this module reads those lines back and checks a file's parts table
against them (`check_profile`), with no aiconfigurator-core: the tests run
it over every built-in, `benchmarks/kernel_check.py` prints it.

THE ROOFLINE BAND, the same for every GPU. One call of an operator at m
tokens on its rank costs at least

    roof(m) = max(FLOPs(m) / peak FLOP/s at its precision, bytes(m) / bandwidth)

(bandwidth: HBM for compute operators, NVLink per direction for the
all-to-all and all-reduce), and no call is shorter than its kernels'
launch-to-finish floor, `kernels` x 3 us (aiconfigurator-core's own
`mem_empirical_constant_latency`, the floor its estimator gives a memory
kernel) for a compute operator, `kernels` x 10 us for a collective over
NVLink (the package's `p2p_latency`: a collective synchronises the GPUs). A
part (its operators summed, times their layer counts) passes at a token
count when

    LOW x Σ roof(m)  <=  part(m)  <=  HIGH x Σ max(roof(m), floor)

with LOW = 0.8 and HIGH = 8, checked at every token count the file holds,
so the sawtooth stays: a tile or wave edge can double the work a kernel does
(m = 65 on 64-row tiles pads to 128 rows), a kernel away from its edges
reaches at least half the datasheet roof, and the database's MoE rows route
tokens by a power law, so their busiest rank (which sets the time) carries
up to twice the average rank's share the roof counts: 2 x 2 x 2 = 8. A
tenfold excursion or more fails. LOW: the datasheets and the package's
system files differ by up to 4% on HBM bandwidth (B200 8 vs 7.7 TB/s), and
the routed experts' weight read assumes uniform routing where the power law
hits fewer distinct experts: 20% slack below the roof.

The peaks (`PEAKS`, dense tensor-core rates per GPU, no sparsity) are
NVIDIA's datasheets, as aiconfigurator-core 0.12.0's systems/*.yaml carry
them (each names its datasheet); where the two differ on HBM the datasheet's
larger figure is taken (a roof must not exceed the hardware).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.profile import StepProfile

LOW, HIGH = 0.8, 8.0
KERNEL_FLOOR_S = 3e-6
LINK_FLOOR_S = 10e-6
ROOF_KEY = "roofline."


@dataclass(frozen=True)
class GpuPeaks:
    """Dense per-GPU peaks: HBM and NVLink (per direction) in bytes/s, tensor-core FLOP/s by precision."""

    hbm: float
    link: float
    bf16: float
    fp8: float
    fp4: float
    fp32: float
    source: str

    def flops(self, precision: str) -> float:
        return {"bf16": self.bf16, "fp8": self.fp8, "fp4": self.fp4, "fp32": self.fp32}[precision]

    def describe(self) -> str:
        return (f"HBM {self.hbm / 1e12:g} TB/s, NVLink {self.link / 1e9:g} GB/s per direction, dense tensor-core "
                f"bf16 {self.bf16 / 1e12:g} / fp8 {self.fp8 / 1e12:g} / fp4 {self.fp4 / 1e12:g} TFLOP/s, fp32 "
                f"(CUDA cores) {self.fp32 / 1e12:g} TFLOP/s ({self.source})")


HOPPER = "no FP4 tensor cores: FP4 weights run at the bf16 or fp8 rate of their activations"
PEAKS = {
    "h100_sxm": GpuPeaks(3.35e12, 450e9, 989e12, 1979e12, 1979e12, 67e12,
                         f"NVIDIA H100 SXM datasheet; aiconfigurator-core systems/h100_sxm.yaml; {HOPPER}"),
    "h200_sxm": GpuPeaks(4.8e12, 450e9, 989e12, 1979e12, 1979e12, 67e12,
                         f"NVIDIA H200 SXM datasheet; aiconfigurator-core systems/h200_sxm.yaml; {HOPPER}"),
    "b200_sxm": GpuPeaks(8.0e12, 900e9, 2250e12, 4500e12, 9000e12, 75e12,
                         "NVIDIA HGX B200 datasheet (per 8 GPUs: 64 TB/s HBM3e, 600 TFLOP/s FP32; the package's file "
                         "says 7.7 TB/s); aiconfigurator-core systems/b200_sxm.yaml"),
    "b300_sxm": GpuPeaks(8.0e12, 900e9, 2250e12, 4500e12, 14000e12, 75e12,
                         "NVIDIA HGX B300 datasheet (per 8 GPUs: 64 TB/s HBM3e, 600 TFLOP/s FP32; the package's file "
                         "says 7.75 TB/s); aiconfigurator-core systems/b300_sxm.yaml"),
    "gb200": GpuPeaks(8.0e12, 900e9, 2500e12, 5000e12, 10000e12, 80e12,
                      "NVIDIA GB200 NVL72 datasheet, per GPU; aiconfigurator-core systems/gb200.yaml"),
    "gb300": GpuPeaks(8.0e12, 900e9, 2500e12, 5000e12, 15000e12, 80e12,
                      "NVIDIA GB300 NVL72 datasheet, per GPU; aiconfigurator-core systems/gb300.yaml"),
}


@dataclass(frozen=True)
class OpRoof:
    """One operator's FLOPs and bytes per call as functions of the tokens on its rank (m).

    Tokens T = `replicas` x m enter it (the MoE of a data-parallel replica sees
    every rank's tokens; 1 elsewhere). FLOPs = `flop` x T; bytes = `fixed` +
    `per_token` x T + `expert_bytes` x experts hit on the rank, E_r (1 - (1 -
    k/E)^T) with `experts` = (E_r, E, k) (uniform routing; none: no experts).
    """

    name: str
    layers: float
    kernels: int
    precision: str               # bf16 | fp8 | fp4 (the tensor-core rate of its MMA) | fp32 (CUDA cores)
    flop: float
    fixed: float
    per_token: float
    link: str = "hbm"            # hbm | nvlink
    replicas: int = 1
    experts: tuple[int, int, int] = (0, 0, 0)
    expert_bytes: float = 0.0

    def roof_s(self, m: np.ndarray, peaks: GpuPeaks) -> np.ndarray:
        """max(FLOPs / peak, bytes / bandwidth) of one call at m tokens per rank (seconds)."""
        tokens = self.replicas * np.asarray(m, dtype=float)
        moved = self.fixed + self.per_token * tokens
        local, total, top = self.experts
        if local:
            moved = moved + self.expert_bytes * local * (1.0 - (1.0 - top / total) ** tokens)
        bandwidth = peaks.hbm if self.link == "hbm" else peaks.link
        return np.maximum(self.flop * tokens / peaks.flops(self.precision), moved / bandwidth)

    def floor_s(self) -> float:
        return self.kernels * (KERNEL_FLOOR_S if self.link == "hbm" else LINK_FLOOR_S)

    def text(self) -> str:
        out = (f"{self.name} x{self.layers:g} k{self.kernels} {self.precision} f={self.flop:.6g} "
               f"w={self.fixed:.6g} a={self.per_token:.6g} {self.link}")
        if self.replicas != 1:
            out += f" t={self.replicas}"
        if self.experts[0]:
            out += " e={}/{}/{}/{:.6g}".format(*self.experts, self.expert_bytes)
        return out


OP_PATTERN = re.compile(
    r"^(?P<name>\S+) x(?P<layers>[\d.e+-]+) k(?P<kernels>\d+) (?P<precision>bf16|fp8|fp4|fp32) f=(?P<flop>\S+) "
    r"w=(?P<fixed>\S+) a=(?P<per_token>\S+) (?P<link>hbm|nvlink)(?: t=(?P<replicas>\d+))?"
    r"(?: e=(?P<local>\d+)/(?P<total>\d+)/(?P<top>\d+)/(?P<expert_bytes>\S+))?$")


def parse_ops(text: str, where: str) -> list[OpRoof]:
    """The operators of one `roofline.PART` line; a malformed one is a one-line ProfileError."""
    out = []
    for chunk in text.split("; "):
        match = OP_PATTERN.match(chunk.strip())
        if match is None:
            raise ProfileError(f"{where}: {chunk!r} does not read as an operator's roofline")
        g = match.groupdict()
        experts = (int(g["local"]), int(g["total"]), int(g["top"])) if g["local"] else (0, 0, 0)
        out.append(OpRoof(g["name"], float(g["layers"]), int(g["kernels"]), g["precision"], float(g["flop"]),
                          float(g["fixed"]), float(g["per_token"]), g["link"], int(g["replicas"] or 1), experts,
                          float(g["expert_bytes"] or 0)))
    return out


def band_ms(ops: list[OpRoof], m: np.ndarray, peaks: GpuPeaks) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of a part over the tokens per rank m: LOW x Σ roof, HIGH x Σ max(roof, floor), in ms."""
    low = sum(op.layers * op.roof_s(m, peaks) for op in ops)
    high = sum(op.layers * np.maximum(op.roof_s(m, peaks), op.floor_s()) for op in ops)
    return LOW * 1e3 * np.asarray(low), HIGH * 1e3 * np.asarray(high)


@dataclass(frozen=True)
class PartCheck:
    """A part of a file against its band at every token count of the file."""

    part: str
    tokens: np.ndarray
    part_ms: np.ndarray
    low_ms: np.ndarray
    high_ms: np.ndarray

    @property
    def ratio(self) -> np.ndarray:
        """The part over the top of its band (HIGH x the floor-limited roof): <= 1 passes above."""
        return self.part_ms / self.high_ms

    @property
    def failing(self) -> np.ndarray:
        """Outside the band beyond what the file's rounding explains (1 ns, and 6 digits in the roofline lines)."""
        slack = 1e-6 + 1e-5 * self.high_ms
        return (self.part_ms < self.low_ms - slack) | (self.part_ms > self.high_ms + slack)

    @property
    def passes(self) -> bool:
        return not self.failing.any()

    def worst(self) -> str:
        over = self.part_ms / self.high_ms
        under = self.part_ms / np.where(self.low_ms > 0, self.low_ms, np.inf)
        i, j = int(np.argmax(over)), int(np.argmin(under))
        return (f"{self.part}: up to {over[i]:.2f} x its band's top at B = {self.tokens[i]} "
                f"({self.part_ms[i]:.4g} ms against {self.high_ms[i]:.4g}); down to {under[j]:.2f} x its floor "
                f"at B = {self.tokens[j]}")


def system_of(profile: StepProfile) -> str:
    device = str(profile.provenance.get("device", ""))
    match = re.search(r"AIConfigurator system (\S+)", device)
    if match is None or match[1] not in PEAKS:
        raise ProfileError(f"profile {profile.name}: its device line names no GPU the physical checks know")
    return match[1]


def ranks_of(profile: StepProfile) -> int:
    match = re.search(r"DP(\d+)", str(profile.provenance.get("parallelism", "")))
    return int(match[1]) if match else 1


def checked_parts(profile: StepProfile) -> dict[str, list[OpRoof]]:
    """Part -> its operators' rooflines, from the file's `roofline.PART` lines (empty: none carried)."""
    return {key[len(ROOF_KEY):]: parse_ops(str(value), f"profile {profile.name}, {key}")
            for key, value in profile.provenance.items() if key.startswith(ROOF_KEY)}


def check_profile(profile: StepProfile) -> list[PartCheck]:
    """Every part the file carries a roofline for, against its band at every token count of the file."""
    rooflines = checked_parts(profile)
    if not rooflines:
        return []
    parts = profile.extra.get("parts", {})
    peaks = PEAKS[system_of(profile)]
    m = np.ceil(profile.tokens / ranks_of(profile))
    out = []
    for part, ops in rooflines.items():
        column = parts.get(f"{part}_ms")
        if column is None:
            raise ProfileError(f"profile {profile.name}: roofline.{part} names no column of its parts table")
        low, high = band_ms(ops, m, peaks)
        out.append(PartCheck(part, profile.tokens, np.asarray(column), low, high))
    return out
