"""The public GEMM criterion (hwprofiles/aiconfigurator/public_gemm.py): which GEMM a published timing sets, and how.

Toy curves check the rule's four outcomes (a contradiction sets the GEMM at
its measured counts, log-m in between and held beyond; a figure inside the
implementations' band, another GPU, or a shape more than 2x away leaves the
database alone); the committed vLLM B200 file is checked against the rows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.aiconfigurator.parts import LeafCurves
from specplan.hwprofiles.aiconfigurator.public import PUBLIC_SOURCE, Measurement, load_measurements
from specplan.hwprofiles.aiconfigurator.public_gemm import GemmLeaf, apply_gemm_rule, nearest_shape

LAYERS = 10.0
GATE_UP = GemmLeaf(1, "shared_gate_up_gemm", 512, 4096, "fp8_block", LAYERS)


def curves(per_call_us: float, max_tokens: int = 2048) -> LeafCurves:
    """A router column (not a GEMM of the rule's precision) and a 10-layer fp8 GEMM at `per_call_us` per call."""
    ms = np.column_stack([np.full(max_tokens, 0.05), np.full(max_tokens, per_call_us * LAYERS / 1000)])
    return LeafCurves(("router_gemm", "shared_gate_up_gemm"), ("silicon", "silicon"), ms, ())


def row(m: int, us: float, kernel: str = "a", gpu: str = "b200_sxm", n: int = 2048, k: int = 1024) -> Measurement:
    return Measurement("toy", gpu, "none", "gemm", kernel, "fp8_block", 1, m, us, "median", "", n, k)


def test_a_gemm_twice_beyond_every_implementation_takes_their_mean() -> None:
    leaves = curves(180.0)
    rows = [row(8, 5.0, "a"), row(8, 7.0, "b"), row(128, 6.0, "a")]
    kept, checks = apply_gemm_rule(leaves, [GATE_UP], "b200_sxm", 2, rows)
    assert all(c.off and c.applies for c in checks) and kept.part_source("shared_gate_up") == PUBLIC_SOURCE
    per_call = lambda b: 1000 * kept.ms[b - 1, 1] / LAYERS   # noqa: E731 (µs per call at B)
    assert per_call(16) == pytest.approx(6.0) and per_call(256) == pytest.approx(6.0)   # m = B / dp
    assert per_call(2) == pytest.approx(6.0) and per_call(2048) == pytest.approx(6.0)   # held beyond
    assert kept.part_source("router") == "silicon" and np.all(kept.ms[:, 0] == leaves.ms[:, 0])


def test_the_ratio_runs_linearly_in_log_m_between_measured_counts() -> None:
    leaves = curves(100.0)
    kept, _ = apply_gemm_rule(leaves, [GATE_UP], "b200_sxm", 1, [row(8, 5.0), row(512, 20.0)])
    middle = 0.05 + (0.2 - 0.05) * (math.log(64) - math.log(8)) / (math.log(512) - math.log(8))
    assert 1000 * kept.ms[63, 1] / LAYERS == pytest.approx(100.0 * middle)


@pytest.mark.parametrize(("per_call_us", "rows", "why"), [
    (9.5, [row(8, 5.0, "a"), row(8, 7.6, "b")], "inside [fastest / 2, 2 x slowest]"),
    (180.0, [row(8, 5.0, gpu="b300_sxm")], "another GPU"),
    (180.0, [row(8, 5.0, n=8192, k=1024)], "a shape 4x the GEMM's"),
])
def test_a_gemm_inside_the_band_or_unmatched_stays_the_databases(per_call_us, rows, why) -> None:
    leaves = curves(per_call_us)
    kept, _ = apply_gemm_rule(leaves, [GATE_UP], "b200_sxm", 1, rows)
    assert kept is leaves, why


def test_the_nearest_shape_is_by_weight_elements_within_a_factor_2() -> None:
    rows = [row(8, 5.0, n=2048, k=1024), row(8, 5.0, n=4096, k=4096)]
    assert nearest_shape(GemmLeaf(0, "g", 4096, 256, "fp8_block", 1), rows) == (2048, 1024)    # 1M vs 2M
    assert nearest_shape(GemmLeaf(0, "g", 4096, 2048, "fp8_block", 1), rows) == (4096, 4096)   # 8M vs 16M
    assert nearest_shape(GemmLeaf(0, "g", 4096, 1024, "fp8_block", 1), rows) == (2048, 1024)   # 4M: 2x from 2M, 4x from 16M
    assert nearest_shape(GemmLeaf(0, "g", 64, 1024, "fp8_block", 1), rows) is None


def test_the_committed_vllm_b200_shared_expert_meets_the_public_gemm_rows() -> None:
    """8 x B200, vLLM 0.24, TP8: each shared-expert GEMM is the public implementations' mean at m = B (dp 1)."""
    profile = load_profile("builtin:b200-deepseek-v4-flash-tp8ep8-vllm")
    parts = profile.extra["parts"]
    rows = [r for r in load_measurements() if r.part == "gemm" and r.gpu == "b200_sxm"]
    for m in (8, 128, 512):
        mean = float(np.mean([r.latency_us for r in rows if r.tokens_per_rank == m]))
        j = int(np.flatnonzero(profile.tokens == m)[0])
        for part in ("shared_gate_up_ms", "shared_down_ms"):
            assert 1000 * parts[part][j] / 43 == pytest.approx(mean, rel=1e-4), (part, m)
    assert profile.step_ms_table[0, 0] < 6.0     # one token: ~5 ms, where the database's GEMM rows gave 26.3
    assert "public microbenchmark: cutlass_issue2923_b200" in profile.provenance["part.shared_gate_up"]
