"""The physical checks (hwprofiles/physical.py) and the rule that sets a failing operator (physical_rule.py).

Every committed built-in that carries `roofline.PART` lines is checked from
the file alone (no aiconfigurator-core): each part inside its band at every
token count. Hand-made parts show the check failing (20x above its roofline,
below its floor) and passing a tile edge; a toy twin shows the rule taking
the other engine's table for an operator far slower than it, and clamping
one without a twin. The committed V4-Pro vLLM files show the shared expert
the rule set (issue 36: 12.2 + 9.5 ms at 128 tokens before).
"""

from __future__ import annotations

import numpy as np
import pytest

from specplan.hwprofiles import StepProfile, load_profile
from specplan.hwprofiles.aiconfigurator.physical_rule import CLAMPED, op_roof, settle
from specplan.hwprofiles.builtins import AIC_BUILTINS, PREFILL_BUILTINS
from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.fileformat import builtin_names
from specplan.hwprofiles.physical import (
    HIGH,
    LOW,
    PEAKS,
    OpRoof,
    band_ms,
    check_profile,
    checked_parts,
)

CHECKED = sorted(set(AIC_BUILTINS) | {n for n in PREFILL_BUILTINS if "deepseek" in n})
# B300 V4-Pro's shared-expert gate/up GEMM under TP8: N 768 (2 x 3072 / 8), K 7168, FP8 block-scaled, 61 layers
SHARED_GATE_UP = OpRoof("shared_gate_up_gemm", 61, 2, "fp8", 2.0 * 768 * 7168, 768 * 7168, 2.0 * (768 + 7168))


@pytest.mark.parametrize("name", CHECKED)
def test_every_part_of_every_built_in_lies_inside_its_roofline_band(name: str) -> None:
    profile = load_profile(f"builtin:{name}")
    parts = {c.removesuffix("_ms") for c in profile.extra["parts"]} - {"overlap_hidden"}
    assert set(checked_parts(profile)) == parts, name          # every part carries its operators' roofline
    failing = [c.worst() for c in check_profile(profile) if not c.passes]
    assert not failing, failing


def test_the_built_ins_without_parts_carry_no_roofline_to_check() -> None:
    for name in sorted(set(builtin_names()) - set(CHECKED)):
        profile = load_profile(f"builtin:{name}")
        assert not checked_parts(profile) and check_profile(profile) == [], name


def hand_made(part_ms: np.ndarray, tokens: np.ndarray, roofline: str = SHARED_GATE_UP.text()) -> StepProfile:
    return StepProfile(
        name="hand-made", tokens=tokens, step_ms_table=part_ms + 1.0,
        provenance={"device": "NVIDIA B300 x 8; AIConfigurator system b300_sxm", "parallelism": "TP8 EP8 DP1",
                    "roofline.shared_gate_up": roofline},
        extra={"parts": {"shared_gate_up_ms": part_ms}})


def test_the_check_fails_a_hand_made_part_twenty_times_its_band_and_one_below_its_floor() -> None:
    tokens = np.array([1, 8, 64, 65, 128, 1024, 4096])
    low, high = band_ms([SHARED_GATE_UP], tokens, PEAKS["b300_sxm"])
    assert np.all(high / HIGH >= 61 * 6e-3) and LOW == 0.8        # below ~1k tokens the 2 x 3 us floor rules
    inside = high / 4
    inside[3] = 2 * inside[2]                                       # a tile edge: 65 rows pad to 128
    assert check_profile(hand_made(inside, tokens))[0].passes
    far = hand_made(20 / HIGH * high, tokens)                     # 20x the floor-limited roofline
    check = check_profile(far)[0]
    assert not check.passes and check.failing.all() and "2.50 x its band's top" in check.worst()
    fast = inside.copy()
    fast[-1] = 0.5 * low[-1] / LOW                                 # half the roofline at 4,096 tokens
    assert list(check_profile(hand_made(fast, tokens))[0].failing) == [False] * 6 + [True]


def test_a_roofline_line_that_does_not_parse_is_one_error_naming_it() -> None:
    with pytest.raises(ProfileError, match=r"roofline.shared_gate_up: 'gemm x61 k2' does not read"):
        checked_parts(hand_made(np.ones(2), np.array([1, 2]), roofline="gemm x61 k2"))


def test_the_roofline_of_a_gemm_and_of_routed_experts_from_their_shapes() -> None:
    gemm = op_roof({"Gemm": {"name": "generation_shared_gate_up_gemm", "scale_factor": 61.0, "n": 768, "k": 7168,
                             "quant_mode": "fp8_block"}}, 1)
    assert gemm == SHARED_GATE_UP
    # 128 tokens: 1.41 GFLOP at 4.5 PFLOP/s = 0.31 us; 5.5 MB of weights + 2 MB of activations at 8 TB/s = 0.94 us
    assert gemm.roof_s(np.array([128]), PEAKS["b300_sxm"])[0] == pytest.approx(0.943e-6, rel=1e-3)
    moe = op_roof({"Moe": {"name": "generation_moe", "scale_factor": 61.0, "hidden_size": 7168, "inter_size": 3072,
                           "topk": 6, "num_experts": 384, "moe_tp_size": 1, "moe_ep_size": 8,
                           "attention_dp_size": 8, "quant_mode": "w4a8_mxfp4_mxfp8", "is_gated": True}}, 8)
    assert moe is not None and moe.replicas == 8 and moe.experts == (48, 384, 6)
    # one token per rank, 8 entering the layer: 48 (1 - (1 - 6/384)^8) = 5.8 of the rank's experts read, 4.25 bits
    per_expert = 3 * 7168 * 3072 * 0.53125
    assert moe.roof_s(np.array([1]), PEAKS["b300_sxm"])[0] == pytest.approx(
        (48 * (1 - (1 - 6 / 384) ** 8) * per_expert + 8 * 6 / 8 * 4 * 7168) / 8e12, rel=1e-9)


class ToyTwin:
    """The other engine's table: a flat 10 us per call, measured."""

    label = "sglang 0.5.14 table"

    def __init__(self, per_call_ms: float) -> None:
        self.per_call_ms = per_call_ms

    def measured(self, column: int, tokens: list[int]) -> np.ndarray:
        return np.full(len(tokens), 61 * self.per_call_ms)

    def curve(self, column: int, max_tokens: int) -> np.ndarray:
        return np.full(max_tokens, 61 * self.per_call_ms)


def test_the_rule_takes_the_twin_of_an_operator_far_slower_than_it_and_clamps_one_without() -> None:
    tokens = np.arange(1, 257)
    samples = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    vllm = np.full(256, 61 * 0.2)                                   # 200 us per call, flat (B300 vLLM 0.24)
    factor, how, why = settle(vllm, SHARED_GATE_UP, PEAKS["b300_sxm"], tokens, ToyTwin(0.010), 0, samples)
    assert how == "sglang 0.5.14 table" and "20.0 x its twin at B = 1" in why and "band's top" in why
    np.testing.assert_allclose(vllm * factor, 61 * 0.010)
    factor, how, _ = settle(vllm, SHARED_GATE_UP, PEAKS["b300_sxm"], tokens, None, 0, samples)
    _, high = band_ms([SHARED_GATE_UP], tokens, PEAKS["b300_sxm"])
    assert how == CLAMPED and np.allclose(vllm * factor, high)
    sawtooth = np.where(tokens % 64 == 1, 61 * 0.016, 61 * 0.008)   # inside the band, within 2x of its twin
    assert settle(sawtooth, SHARED_GATE_UP, PEAKS["b300_sxm"], tokens, ToyTwin(0.010), 0, samples) is None


def test_the_v4_pro_vllm_shared_expert_now_meets_sglangs_tables_and_the_curve_rises() -> None:
    """Issue 36: 36.7 / 27.7 / 28.6 / 31.3 ms at 1 / 8 / 64 / 256 tokens, shared expert 12.2 + 9.5 ms at 128."""
    for gpu in ("b200", "b300"):
        vllm = load_profile(f"builtin:{gpu}-deepseek-v4-pro-tp8ep8-vllm")
        sglang = load_profile(f"builtin:{gpu}-deepseek-v4-pro-tp8ep8-sglang")
        at = int(np.searchsorted(vllm.tokens, 128))
        for part in ("shared_gate_up", "shared_down"):
            ours, theirs = vllm.extra["parts"][f"{part}_ms"][at], sglang.extra["parts"][f"{part}_ms"][at]
            assert ours < 2 * theirs, (gpu, part, ours, theirs)
        step = vllm.step_ms(np.array([1, 8, 64, 256]), 0)
        assert step[0] < 12 and np.all(np.diff(step) > 0) and step[-1] / step[0] > 2, (gpu, step)
        rule = vllm.provenance["physical_rule"]
        assert "shared_gate_up_gemm (shared_gate_up)" in rule and "set from sglang 0.5.14 table" in rule, gpu
        assert "physical rule: shared_gate_up_gemm" in vllm.provenance["part.shared_gate_up"], gpu
