"""Acceptance presets: per-position conditional acceptance curves from published results.

`preset_curves(preset, family, block_size)` is what `acceptance_model` calls
for `drafter.acceptance.preset`; it returns one curve p̄_{d,1..γ} per domain
(math, code, chat). `check_preset` is the load-time check `specplan check`
runs. Valid names:

- targets `qwen3-4b`, `qwen3-8b`, `qwen3-14b`, `gemma4-12b` with families
  `eagle3`, `dflash`, `dspark` (DSpark paper Table 1, docs/model/drafters.md);
- `deepseek-v3` with family `mtp` (multi-token prediction modules);
- `weak-dspark` with family `dspark` (a public under-trained drafter);
- measured DeepSeek-V4 curves (below): `deepseek-v4-pro` with `dspark`
  and `mtp` (thinking on), `deepseek-v4-pro-nothink` with `mtp`,
  `deepseek-v4.1-flash` with `dspark`.

`PRESET_INFO[(preset, family)]` states each curve's source, its basis
(published per-position, derived from measured accepted lengths, fitted,
or assumed) and `max_block`, the largest block size its data covers
(`fitted_max_block`); beyond it a curve is continued by an assumed rule.

How the target curves are fitted (block 7, the published block):

1. Targets: the domain mean of the three published benchmarks of each
   domain (math: GSM8K, MATH, AIME25; code: MBPP, HumanEval, LCB; chat:
   MT-Bench, Alpaca, Arena-Hard) is the τ to reproduce, τ = 1 + Σ_j Π_{i≤j} p_i.
2. Reference shapes on Qwen3-4B, anchored on the acceptance read from the
   paper's Fig. 2 where it is given, with one free parameter solved
   (brentq) so the curve's τ equals the domain mean exactly. DFlash on
   code and chat keeps both published end points, p1 and p7 (code 0.87 →
   0.78, chat 0.72 → 0.63), with a curve that drops early and then
   flattens, `p_k = p7 + (p1 − p7) · (e^{−(k−1)/λ} − e^{−6/λ}) / (1 − e^{−6/λ})`,
   λ fitted (a straight line through both end points overshoots τ: 4.76 vs
   4.44 on code, 3.13 vs 2.95 on chat); on math only p1 is published (0.88),
   so it is linear to a fitted p7 (0.76). Eagle3 linear from p1 (math 0.81,
   chat 0.53) to a fitted p7 (rising: 0.88, 0.83), flat on code (0.776);
   DSpark p1 = 0.93 then flat (fitted 0.879) on math, flat on code (0.867)
   and chat (0.739): high at position 1 and stable.
3. Other targets keep the Qwen3-4B shape of their family and domain,
   shifted by one uniform logit offset solved so τ equals their own domain
   mean (no other target publishes position-wise curves).
4. The figures these curves reproduce are pooled over proposals (τ = Σ
   acceptance lengths / proposals, per-position rates likewise:
   docs/model/drafters.md); `specplan.simulator.drafters.heterogeneity` keeps them pooled whatever the
   request and token spread.

Block sizes other than 7: positions 1..γ of the curve for γ ≤ 7 (a
position's conditional acceptance does not depend on how many follow);
beyond 7 every curve continues from its p7 with a per-domain logit decay,

    p_k = σ(logit p_7 + s_d · (k − 7)),   k > 7,

the same for every family and target (distance from the verified context
hurts every drafter alike). s_d is fitted so that on Qwen3-4B DSpark's τ
gain over DFlash at γ = 15 equals the published +30/26/22% on
math/code/chat (s ≈ −0.29, −0.33, −0.32 per position). With the +16/15/18% of γ = 7 this
makes the gain grow with γ, as published; it saturates past γ ≈ 15.

MTP (`deepseek-v3`): DeepSeek-V3 reports 85–90% acceptance of the second
token (one MTP module); SGLang reports an accept length of ~1.9 when that
module drafts one token. Position 1 is 0.90 / 0.88 / 0.85 on math / code /
chat (inside the published range, ordered like every drafter of the
table). Static MTP-k (k modules, or one module reused k times) is an
assumption, not a publication: each further position loses 0.5 in logit,
p_k = σ(logit p_1 − 0.5 (k − 1)), i.e. 0.90, 0.85, 0.77, 0.67, ... on math.

Fitted range: the tail rule is fitted at γ = 15, the longest block any
published figure behind these presets covers, so every preset is fitted
for γ ≤ FITTED_BLOCK (15). A scenario with a longer block on a preset is
refused (`check_block_size`) unless it sets `drafter.acceptance.extrapolate:
true`, which continues the same rules past 15 and says so in the
resolved scenario.

`weak-dspark`: prefix survival 60.5/34.1/18.6/9.9/5.2/2.7/1.4% (τ ≈ 2.33)
turned into conditional acceptance p_k = S_k / S_{k−1}, the same curve for
every domain, continued past 7 by the rule above.

Measured DeepSeek-V4 curves (SemiAnalysis InferenceX `golden_al_distribution`:
accepted length AL(k), bonus included, with k drafted tokens, SPEED-Bench
coding, B300, vLLM). Derived, not fitted: the prefix survival S_k = AL(k) −
AL(k−1) (AL(0) = 1), so p_k = S_k / S_{k−1}, and τ of the first k positions
is AL(k) exactly. Where only some k are measured (MTP thinking off: k = 1,
3, 5) the positions between two measured k share one conditional rate
(geometric survival), solved so both measured AL are reproduced:
interpolated, stated as such. One mix was measured, so every domain gets
the same curve. `deepseek-v4.1-flash` publishes one point (DSpark-5 AL 3.51):
the V4-Pro DSpark shape shifted by one logit offset solved to it (fitted).
Past a curve's last measured k it continues by the assumed rule of its
family: DSpark by the per-domain tail decay above, MTP by the 0.5-per-
position logit decay; `specplan` labels both as assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from itertools import pairwise

import numpy as np

from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.drafters.curves import expected_tau, logit, root, sigmoid

PUBLISHED_BLOCK = 7
TARGETS = ("qwen3-4b", "qwen3-8b", "qwen3-14b", "gemma4-12b")
TARGET_FAMILIES = ("eagle3", "dflash", "dspark")
REFERENCE_TARGET = "qwen3-4b"

# DSpark paper Table 1: accepted length τ (bonus included), chain drafting, block 7,
# temperature 1. Columns per domain: math GSM8K MATH AIME25 | code MBPP HumanEval LCB |
# chat MT-Bench Alpaca Arena-Hard.
PUBLISHED_TAU: dict[str, dict[str, tuple[float, ...]]] = {
    "qwen3-4b": {
        "eagle3": (5.14, 4.62, 3.92, 3.69, 4.16, 3.77, 2.39, 2.26, 2.55),
        "dflash": (5.40, 4.85, 4.15, 4.40, 4.74, 4.18, 3.07, 2.96, 2.83),
        "dspark": (6.11, 5.70, 4.89, 5.13, 5.38, 4.86, 3.64, 3.54, 3.29),
    },
    "qwen3-8b": {
        "eagle3": (5.30, 4.77, 3.91, 3.96, 4.33, 4.17, 2.66, 2.54, 2.54),
        "dflash": (5.33, 4.91, 4.07, 4.36, 4.64, 4.39, 3.11, 2.98, 2.81),
        "dspark": (6.17, 5.78, 5.01, 5.16, 5.52, 5.17, 3.72, 3.58, 3.21),
    },
    "qwen3-14b": {
        "eagle3": (5.24, 4.60, 3.71, 3.81, 4.14, 4.01, 2.62, 2.47, 2.48),
        "dflash": (5.41, 4.84, 3.98, 4.44, 4.59, 4.33, 3.10, 2.94, 2.72),
        "dspark": (6.21, 5.74, 4.94, 5.26, 5.43, 5.02, 3.70, 3.58, 3.13),
    },
    "gemma4-12b": {
        "eagle3": (5.87, 5.46, 4.83, 4.72, 5.37, 4.16, 3.19, 3.06, 2.72),
        "dflash": (5.45, 5.04, 4.22, 4.39, 4.95, 3.70, 2.98, 2.84, 2.59),
        "dspark": (6.05, 5.78, 5.12, 5.11, 5.64, 4.51, 3.49, 3.35, 2.92),
    },
}

# Reference shapes on Qwen3-4B: (shape, p1, p7) read from the paper's Fig. 2 (None: fitted).
# linear: p1 fixed, p7 fitted; flat: one value fitted; anchored: p1 fixed, p2..p7 one fitted value;
# decay: p1 and p7 fixed, the early drop's scale λ fitted.
REFERENCE_SHAPES: dict[str, dict[str, tuple[str, float | None, float | None]]] = {
    "eagle3": {"math": ("linear", 0.81, None), "code": ("flat", None, None), "chat": ("linear", 0.53, None)},
    "dflash": {"math": ("linear", 0.88, None), "code": ("decay", 0.87, 0.78), "chat": ("decay", 0.72, 0.63)},
    "dspark": {"math": ("anchored", 0.93, None), "code": ("flat", None, None), "chat": ("flat", None, None)},
}

# DSpark's published τ gain over DFlash at γ = 15 (the tail rule is fitted to it).
DSPARK_GAIN_AT_15 = {"math": 1.30, "code": 1.26, "chat": 1.22}

MTP_POSITION1 = {"math": 0.90, "code": 0.88, "chat": 0.85}
MTP_LOGIT_DECAY = 0.5
WEAK_DSPARK_SURVIVAL = (0.605, 0.341, 0.186, 0.099, 0.052, 0.027, 0.014)

# Refusal bound (drafter.acceptance.extrapolate lifts it): the tail rule is fitted at
# γ = 15 (DSPARK_GAIN_AT_15). PRESET_INFO below says, per preset, the range its data
# covers (max_block) and how positions past it are continued (labelled "assumed").
FITTED_BLOCK = 15
PRESET_FITTED_BLOCK: dict[str, int] = {}  # presets fitted to a shorter block than FITTED_BLOCK
INFERENCEX = ("SemiAnalysis InferenceX golden_al_distribution (SPEED-Bench coding, B300, vLLM), "
              "as quoted in issue 22")
# measured accepted lengths AL(k), k drafted tokens -> AL (bonus included)
MEASURED_AL: dict[tuple[str, str], dict[int, float]] = {
    ("deepseek-v4-pro", "dspark"): {1: 1.84, 2: 2.51, 3: 3.01, 4: 3.36, 5: 3.61, 6: 3.77},
    ("deepseek-v4-pro", "mtp"): {1: 1.79, 2: 2.27, 3: 2.49, 4: 2.54, 5: 2.55},          # thinking on
    ("deepseek-v4-pro-nothink", "mtp"): {1: 1.92, 3: 2.97, 5: 3.10},                     # thinking off
}
V41_FLASH_DSPARK_AL5 = 3.51      # DeepSeek-V4.1-Flash, DSpark-5


@dataclass(frozen=True)
class PresetInfo:
    """Where a preset's curve comes from and the block sizes its data covers."""

    source: str
    basis: str              # "published" | "derived" | "derived, interpolated" | "fitted" | "assumed"
    max_block: int | None   # largest γ the data covers (None: no bound published)
    beyond: str             # how positions past max_block are continued


PRESET_INFO: dict[tuple[str, str], PresetInfo] = {
    **{(t, f): PresetInfo("DSpark paper Table 1 (domain means), Fig. 2 end points", "fitted", PUBLISHED_BLOCK,
                          "assumed: per-domain logit tail decay fitted to DSpark's gain at γ = 15")
       for t in TARGETS for f in TARGET_FAMILIES},
    ("deepseek-v3", "mtp"): PresetInfo("DeepSeek-V3 report (85-90% second-token acceptance), SGLang AL ~1.9",
                                       "published position 1; positions > 1 assumed", 1,
                                       "assumed: 0.5-per-position logit decay (static MTP-k)"),
    ("weak-dspark", "dspark"): PresetInfo("public under-trained drafter's prefix survival", "derived",
                                          PUBLISHED_BLOCK, "assumed: per-domain logit tail decay"),
    ("deepseek-v4-pro", "dspark"): PresetInfo(INFERENCEX, "derived", 6, "assumed: per-domain logit tail decay"),
    ("deepseek-v4-pro", "mtp"): PresetInfo(INFERENCEX + ", thinking on", "derived", 5,
                                           "assumed: 0.5-per-position logit decay"),
    ("deepseek-v4-pro-nothink", "mtp"): PresetInfo(
        INFERENCEX + ", thinking off (k = 1, 3, 5 measured)", "derived, interpolated (k = 2, 4)", 5,
        "assumed: 0.5-per-position logit decay"),
    ("deepseek-v4.1-flash", "dspark"): PresetInfo(
        INFERENCEX + " (DSpark-5 AL 3.51 only)", "fitted: the V4-Pro DSpark shape, one logit offset", 5,
        "assumed: per-domain logit tail decay"),
}

PRESET_FAMILIES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(TARGETS, TARGET_FAMILIES),
    "deepseek-v3": ("mtp",),
    "weak-dspark": ("dspark",),
    "deepseek-v4-pro": ("dspark", "mtp"),
    "deepseek-v4-pro-nothink": ("mtp",),
    "deepseek-v4.1-flash": ("dspark",),
}


def fitted_max_block(preset: str, family: str) -> int | None:
    """The largest block size the preset's data covers (beyond it the curve is assumed)."""
    return PRESET_INFO[(preset, family)].max_block


def check_preset(preset: str, family: str, path: str = "drafter.acceptance.preset") -> None:
    """Raise ScenarioError unless `preset` names data for drafter `family`."""
    if preset not in PRESET_FAMILIES:
        raise ScenarioError(path, f"unknown preset '{preset}' (valid: {', '.join(PRESET_FAMILIES)})")
    if family not in PRESET_FAMILIES[preset]:
        valid = [name for name, fams in PRESET_FAMILIES.items() if family in fams]
        shown = ", ".join(valid) if valid else "none: give per_position curves"
        raise ScenarioError(
            path, f"preset '{preset}' has no data for drafter family '{family}' (valid for {family}: {shown})"
        )


def fitted_block(preset: str) -> int:
    """The longest block a preset's curves were fitted for."""
    return PRESET_FITTED_BLOCK.get(preset, FITTED_BLOCK)


def check_block_size(preset: str, block_size: int, extrapolate: bool, path: str = "drafter.block_size") -> None:
    """Raise ScenarioError for a block beyond the preset's fitted range, unless extrapolation is asked for."""
    limit = fitted_block(preset)
    if block_size > limit and not extrapolate:
        raise ScenarioError(path, f"{block_size} is beyond what preset '{preset}' was fitted to (block size <= "
                                  f"{limit}); set drafter.acceptance.extrapolate: true to extrapolate its curves, "
                                  "or give per_position curves")


def preset_curves(preset: str, family: str, block_size: int) -> dict[str, np.ndarray]:
    """Per-domain conditional acceptance curves of length `block_size` for a preset."""
    try:
        check_preset(preset, family)
    except ScenarioError as exc:
        raise SpecplanError(str(exc)) from None
    if preset == "deepseek-v3":
        return {d: mtp_curve(MTP_POSITION1[d], block_size) for d in DOMAINS}
    if preset == "weak-dspark":
        base = weak_dspark_curve()
        return {d: extend(base, block_size, tail_slope(d)) for d in DOMAINS}
    if (preset, family) in MEASURED_AL or preset == "deepseek-v4.1-flash":
        base = v4_curve(preset, family)
        return {d: extend(base, block_size, tail_slope(d) if family == "dspark" else -MTP_LOGIT_DECAY)
                for d in DOMAINS}
    return {d: extend(target_curve(preset, family, d), block_size, tail_slope(d)) for d in DOMAINS}


def domain_tau(target: str, family: str) -> dict[str, float]:
    """Published τ per domain: the mean of the domain's three benchmarks."""
    row = np.asarray(PUBLISHED_TAU[target][family]).reshape(len(DOMAINS), 3)
    return {d: float(v) for d, v in zip(DOMAINS, row.mean(axis=1), strict=True)}


def shaped(shape: str, p1: float | None, p7: float | None, free: float) -> np.ndarray:
    """A block-7 curve of a reference shape with its free parameter set to `free`."""
    k = np.arange(PUBLISHED_BLOCK)
    last = PUBLISHED_BLOCK - 1
    if shape == "linear":
        assert p1 is not None
        return p1 + (free - p1) * k / last
    if shape == "anchored":
        return np.r_[p1, np.full(last, free)]
    if shape == "decay":  # free = λ, the scale of the early drop
        assert p1 is not None and p7 is not None
        drop = (np.exp(-k / free) - np.exp(-last / free)) / (1.0 - np.exp(-last / free))
        return p7 + (p1 - p7) * drop
    return np.full(PUBLISHED_BLOCK, free)


FREE_RANGE = {"decay": (0.05, 1e3)}  # λ; every other shape's free parameter is a probability


@cache
def reference_curve(family: str, domain: str) -> np.ndarray:
    """Qwen3-4B curve of a family and domain whose τ equals the published domain mean."""
    shape, p1, p7 = REFERENCE_SHAPES[family][domain]
    tau = domain_tau(REFERENCE_TARGET, family)[domain]
    lo, hi = FREE_RANGE.get(shape, (1e-3, 0.999))
    free = root(lambda x: expected_tau(shaped(shape, p1, p7, x)) - tau, lo, hi, xtol=1e-12)
    return shaped(shape, p1, p7, free)


@cache
def target_curve(target: str, family: str, domain: str) -> np.ndarray:
    """The reference shape shifted by one logit offset so τ equals the target's domain mean."""
    ref_logit = logit(reference_curve(family, domain))
    tau = domain_tau(target, family)[domain]
    shift = root(lambda s: expected_tau(sigmoid(ref_logit + s)) - tau, -10.0, 10.0, xtol=1e-12)
    return sigmoid(ref_logit + shift)


def extend(curve: np.ndarray, block_size: int, slope: float) -> np.ndarray:
    """Positions 1..γ: the curve itself up to its length, then a logit decay from its end."""
    if block_size <= curve.size:
        return curve[:block_size].copy()
    beyond = np.arange(1, block_size - curve.size + 1)
    return np.r_[curve, sigmoid(logit(curve[-1:]) + slope * beyond)]


@cache
def tail_slope(domain: str) -> float:
    """Per-domain logit decay past γ = 7, fitted to DSpark's published gain at γ = 15."""
    dspark, dflash = reference_curve("dspark", domain), reference_curve("dflash", domain)

    def gain_gap(s: float) -> float:
        return expected_tau(extend(dspark, 15, s)) / expected_tau(extend(dflash, 15, s)) - DSPARK_GAIN_AT_15[domain]

    return float(root(gain_gap, -5.0, 0.0, xtol=1e-10))


def mtp_curve(position1: float, block_size: int) -> np.ndarray:
    """MTP-k: position 1 as published, each further module MTP_LOGIT_DECAY lower in logit."""
    k = np.arange(block_size)
    return sigmoid(logit(np.array(position1)) - MTP_LOGIT_DECAY * k)


def weak_dspark_curve() -> np.ndarray:
    """Conditional acceptance from the public weak drafter's prefix survival."""
    survival = np.asarray(WEAK_DSPARK_SURVIVAL)
    return survival / np.r_[1.0, survival[:-1]]


def survival_from_al(al: dict[int, float]) -> np.ndarray:
    """Prefix survival S_1..S_K from AL(k) at some k (AL(0) = 1); gaps share one conditional rate."""
    known = {0: 1.0, **al}
    survival: list[float] = []
    for lo, hi in pairwise(sorted(known)):
        start = survival[-1] if survival else 1.0
        rate = gap_rate(start, hi - lo, known[hi] - known[lo])
        survival += [start * rate**i for i in range(1, hi - lo + 1)]
    return np.array(survival)


def gap_rate(start: float, n: int, gain: float) -> float:
    """The conditional rate r with start · (r + r² + … + rⁿ) = gain (n = 1: r = gain / start)."""
    return float(root(lambda r: start * sum(r**i for i in range(1, n + 1)) - gain, 0.0, 1.5, xtol=1e-14))


def conditional_from_survival(survival: np.ndarray) -> np.ndarray:
    """p_k = S_k / S_{k-1} (S_0 = 1)."""
    return survival / np.r_[1.0, survival[:-1]]


@cache
def v4_curve(preset: str, family: str) -> np.ndarray:
    """A measured DeepSeek-V4 curve (derived from AL(k)), or V4.1-Flash's fitted one."""
    if preset == "deepseek-v4.1-flash":
        shape = logit(v4_curve("deepseek-v4-pro", "dspark")[:5])
        shift = root(lambda x: expected_tau(sigmoid(shape + x)) - V41_FLASH_DSPARK_AL5, -10.0, 10.0, xtol=1e-12)
        return sigmoid(shape + shift)
    return conditional_from_survival(survival_from_al(MEASURED_AL[(preset, family)]))
