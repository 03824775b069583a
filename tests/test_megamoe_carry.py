"""The MegaMoE carry rule (hwprofiles/aiconfigurator/megamoe_carry.py): B200's EP8 MegaMoE rows carried to EP4 by
the change of the block's roofline, to B300 at equal peaks, stated in the built-ins' headers, and the step case the
carried built-in predicts (sgl-project/sglang PR #25052, 4 x B200, DP4 + MegaMoE W4A8)."""

from __future__ import annotations

import math

import pytest

from specplan.hwprofiles.aiconfigurator.megamoe_carry import (
    carried_rows,
    expert_shape,
    same_resources,
)
from specplan.hwprofiles.aiconfigurator.public import ProfileKey, load_measurements
from specplan.hwprofiles.loader import load_profile
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.replication.published import read_case
from specplan.simulator.study.replication.replicate import replicate
from tests.conftest import REPO

MEGAMOE = ("deep_gemm_megamoe", "w4a8")
FLASH_MOE = {"hidden_size": 4096, "inter_size": 2048, "moe_tp_size": 1, "num_experts": 256, "topk": 6,
             "quant_mode": "w4a8_mxfp4_mxfp8_trtllm"}
SHAPE = expert_shape(FLASH_MOE)
STEP_CASE = REPO / "benchmarks" / "published" / "sglang-25052-v4-flash-megamoe-w4a8-b200-step"


def key(system: str, ep: int, dp: int | None = None, kernel: tuple[str, str] | None = MEGAMOE) -> ProfileKey:
    return ProfileKey(system, ep, ep if dp is None else dp, "deepseek-v4-flash", kernel, 8192)


def carried(system: str = "b200_sxm", ep: int = 4) -> dict[tuple[str, int], float]:
    rows = carried_rows(load_measurements(), key(system, ep), SHAPE).rows
    return {(r.source, r.tokens_per_rank): r.latency_us for r in rows}


def test_the_ep4_figure_is_the_ep8_row_plus_the_extra_weight_read_worked_by_hand():
    """moe_ep_benchmark_ep8_b200 at 64 tokens per rank: 124.9 us. One expert: 4096 x 3 x 2048 x 0.53125 bytes
    (MXFP4 and its scales) = 13,369,344 B. At EP4 the 256 tokens of the step hit 64 (1 - (250/256)^256) = 63.852
    of the rank's 64 experts, at EP8 the 512 tokens 32 (1 - (250/256)^512) = 32.000 of its 32: 31.852 more experts,
    425.8 MB, 53.2 us at 8 TB/s; the MMA work, 64 x 6 x 2 x 4096 x 6144 FLOPs = 4.3 us at 4,500 TFLOP/s, is under
    both reads. 124.9 + 53.2 = 178.1 us."""
    assert SHAPE.expert_bytes == 13_369_344 and SHAPE.pair_flop == 2 * 4096 * 6144
    extra_experts = 64 * (1 - (250 / 256) ** 256) - 32 * (1 - (250 / 256) ** 512)
    assert extra_experts == pytest.approx(31.852, abs=1e-3)
    assert carried()[("moe_ep_benchmark_ep8_b200 carried to EP4", 64)] == pytest.approx(
        124.9 + extra_experts * 13_369_344 / 8e12 * 1e6, abs=0.05)
    assert carried()[("moe_ep_benchmark_ep8_b200 carried to EP4", 64)] == pytest.approx(178.1, abs=0.05)


def test_a_compute_bound_block_carries_unchanged():
    """At 8,192 tokens per rank the MMA work (8192 x 6 x 50.3 MFLOP = 550 us at 4,500 TFLOP/s) is above the read
    at either degree (64 x 13.37 MB = 107 us at EP4): the rule adds nothing."""
    assert 8192 * 6 * SHAPE.pair_flop / 4.5e15 * 1e6 > 64 * SHAPE.expert_bytes / 8e12 * 1e6
    assert carried()[("moe_ep_benchmark_ep8_b200 carried to EP4", 8192)] == 1320.4
    assert carried()[("deepgemm_pr316 carried to EP4", 32768)] == 4855.5


def test_b300_takes_b200s_rows_unscaled_and_a_gpu_of_other_peaks_takes_none():
    assert same_resources("b300_sxm", "b200_sxm", "w4a8")           # HBM, NVLink, FP8 equal
    assert not same_resources("b300_sxm", "b200_sxm", "w4a4")       # FP4 peaks differ: W4A4 would not carry
    assert not same_resources("gb300", "b200_sxm", "w4a8")          # FP8 5,000 against 4,500 TFLOP/s
    assert carried("b300_sxm") == carried("b200_sxm")
    assert carried("gb200") == {}


@pytest.mark.parametrize("profile_key, why", [
    (key("gb300", 4), "a measured row of its own GPU and EP"),
    (key("b200_sxm", 8), "its own EP8 rows"),
    (key("b200_sxm", 4, dp=1), "tensor-parallel attention: no all-to-all block"),
    (key("b200_sxm", 4, kernel=None), "not the MegaMoE kernel"),
])
def test_nothing_is_carried_where_the_public_rule_has_its_own_rows_or_no_megamoe(profile_key, why):
    result = carried_rows(load_measurements(), profile_key, SHAPE)
    assert result.rows == [] and result.line == "", why


@pytest.mark.parametrize("gpu", ["b200", "b300"])
def test_the_dp4_megamoe_built_ins_state_the_rule_in_their_headers(gpu):
    meta = load_profile(f"builtin:{gpu}-deepseek-v4-flash-dp4ep4-sglang-megamoe").provenance
    assert meta["megamoe_carry"].startswith("MegaMoE carry: a fused MegaMoE block measured at EP8 carried to EP4")
    assert "moe_ep_benchmark_ep8_b200" in meta["megamoe_carry"] and "64: 124.9 -> 178.1" in meta["megamoe_carry"]
    assert meta["moe_backend"].endswith("the EP4 level is carried from EP8 by the MegaMoE carry rule (megamoe_carry)")
    assert ("b200_sxm's rows taken unscaled for b300_sxm" in meta["megamoe_carry"]) == (gpu == "b300")
    for part in ("dispatch", "routed_experts", "combine"):
        assert "moe_ep_benchmark_ep8_b200 carried to EP4 deep_gemm_megamoe w4a8 p50" in meta[f"part.{part}"]


def test_the_measured_megamoe_built_ins_state_no_carry():
    for name in ("gb300-deepseek-v4-flash-dp4ep4-sglang-megamoe", "b200-deepseek-v4-flash-dp8ep8-sglang-megamoe"):
        meta = load_profile(f"builtin:{name}").provenance
        assert "megamoe_carry" not in meta and "carried" not in meta["moe_backend"], name


def test_the_25052_w4a8_step_case_is_predicted_on_the_carried_built_in(tmp_path):
    """Every figure of the step case is predicted (it was 'database lacks' before the carry rule). The decode step
    is the rule's out-of-sample check: its ITL at batch 1 and 4 (7.29, 7.91 ms published) within 20%."""
    case = read_case(STEP_CASE)
    assert case.kind == "step" and not case.source["requires"].get("unsupported")
    rows = replicate([case], None, RunOptions(out_dir=tmp_path)).rows
    assert len(rows) == 8 and (rows["status"] == "ok").all()
    itl = rows[rows["metric"] == "step_itl"]
    assert len(itl) == 2 and itl["predicted_error"].abs().max() < 0.20
    assert all(math.isfinite(v) for v in rows["predicted_value"])
