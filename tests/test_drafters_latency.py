"""Drafting latency models: family shapes in R and γ, and their scenario keys."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.hwprofiles.fileformat import write_profile_csv
from specplan.hwprofiles.profile import StepProfile, linear_profile
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.drafter import build_latency
from specplan.simulator.drafters.latency_models import FamilyDraftLatency, Forward, latency_model
from specplan.simulator.engine.cluster.simulation import simulate
from tests.conftest import make_scenario

# An H200-like roofline for an 8B target: 3.35 ms weight-read floor, 16 GFLOP/token at 990 TFLOP/s.
TOKENS = np.unique(np.r_[1, np.arange(8, 4097, 8)])
H200_8B = StepProfile(name="roofline-8b", tokens=TOKENS,
                      step_ms_table=np.maximum(3.35, 0.01616 * TOKENS) + 0.3,
                      provenance={"source": "test roofline", "statistic": "analytic"})


def drafter_latency(family: str, block_size: int = 3, **latency) -> FamilyDraftLatency:
    spec = {"kind": "layers", "target_layers": 36, **latency}
    scenario = make_scenario(drafter={"family": family, "block_size": block_size, "latency": spec})
    return latency_model(scenario.drafter, H200_8B)


def test_eagle3_and_mtp_are_linear_in_block_size():
    for family in ("eagle3", "mtp"):
        model = drafter_latency(family, drafter_layers=1, lm_head_fraction=0.016)
        for r in (1, 64, 256):
            one = model.ms(r, 1)
            assert one == pytest.approx((1 / 36 + 0.016) * float(H200_8B.step_ms(r)))
            np.testing.assert_allclose([model.ms(r, g) for g in (2, 7, 16)], [2 * one, 7 * one, 16 * one])


def test_dflash_is_one_forward_over_the_anchor_and_the_block_and_flat_while_memory_bound():
    model = drafter_latency("dflash", drafter_layers=5)
    assert model.ms(8, 15) == pytest.approx(5 / 36 * float(H200_8B.step_ms(128)))  # 8 × (1 + 15) positions
    assert model.ms(8, 16) / model.ms(8, 4) < 1.01  # 40 → 136 tokens: under the crossover
    eagle3 = drafter_latency("eagle3", drafter_layers=1)
    assert eagle3.ms(8, 16) / eagle3.ms(8, 4) == pytest.approx(4.0)


def test_dspark_is_dflash_plus_a_small_sequential_head():
    dspark = drafter_latency("dspark", drafter_layers=5)
    dflash = drafter_latency("dflash", drafter_layers=5)
    for r, gamma in ((1, 4), (128, 7), (256, 16)):
        head = gamma * 0.005 * float(H200_8B.step_ms(r))
        assert dspark.ms(r, gamma) - dflash.ms(r, gamma) == pytest.approx(head)


def test_dspark_head_share_of_the_round_at_r128_is_as_published():
    """+0.2%–1.3% of a round (draft + verify of every draft) for γ = 4..16 at R = 128."""
    dspark = drafter_latency("dspark", drafter_layers=5)
    dflash = drafter_latency("dflash", drafter_layers=5)
    shares = []
    for gamma in (4, 8, 12, 16):
        round_ms = dspark.ms(128, gamma) + Forward(H200_8B)(128 * (1 + gamma))
        shares.append((dspark.ms(128, gamma) - dflash.ms(128, gamma)) / round_ms)
    assert all(0.002 <= s <= 0.013 for s in shares)
    assert np.all(np.diff(shares) > 0)


def test_no_drafting_costs_nothing_and_results_are_cached():
    model = drafter_latency("dspark")
    assert model.ms(0, 7) == 0.0 and model.ms(16, 0) == 0.0
    model.ms(16, 7)
    assert (16, 7) in model.cache


def test_forwards_beyond_the_profile_are_priced_proportionally():
    last = H200_8B.max_tokens
    assert Forward(H200_8B)(2 * last) == pytest.approx(2 * float(H200_8B.step_ms(last)))
    assert Forward(H200_8B)(50_000) == pytest.approx(50_000 / last * float(H200_8B.step_ms(last)))
    lin = linear_profile(9.0, 0.03, max_tokens=100)
    assert Forward(lin)(1000) == pytest.approx(9.0 + 30.0)  # its own extrapolation rule


def test_a_drafter_curve_with_a_context_axis_is_read_at_the_drafting_context():
    tokens = np.array([1, 64, 512])
    curve = StepProfile(name="drafter", tokens=tokens, context_tokens=np.array([0, 65536]),
                        step_ms_table=np.array([[0.5, 0.6, 1.2], [0.9, 1.1, 1.8]]),
                        provenance={"device": "test", "model": "drafter", "source": "test", "statistic": "median"})
    forward = Forward(curve)
    for n, ctx in ((64, 0), (64, 32768), (300, 65536), (300, 1e6)):
        assert forward(n, ctx) == pytest.approx(float(curve.step_ms(n, ctx)))
    model = FamilyDraftLatency("dflash", forward, Forward(H200_8B, 0.005))
    assert model.ms(16, 3, 32768) == pytest.approx(float(curve.step_ms(64, 32768)))
    assert model.ms(16, 3, 32768) > model.ms(16, 3, 0) and not model.cache


def test_drafter_profile_csv_measured_by_the_harness(tmp_path):
    tokens = np.array([1, 64, 256, 1024])
    drafter = StepProfile(name="drafter", tokens=tokens, step_ms_table=np.array([0.5, 0.55, 0.8, 2.4]),
                          provenance={"device": "test", "model": "5-layer drafter", "source": "test",
                                      "statistic": "median"})
    path = write_profile_csv(drafter, tmp_path / "drafter.csv")
    scenario = make_scenario(drafter={"family": "dflash", "block_size": 3,
                                      "latency": {"kind": "profile", "path": str(path)}})
    model = build_latency(scenario.drafter, H200_8B)
    assert model.ms(16, 3) == pytest.approx(0.55)  # one forward over 16 × (1 + 3) = 64 positions
    assert model.ms(256, 3) == pytest.approx(2.4)
    assert model.ms(300, 3) == pytest.approx(2.4 * 1200 / 1024)


def test_a_missing_drafter_profile_is_a_load_time_error(tmp_path):
    with pytest.raises(SpecplanError, match=r"drafter\.latency\.path"):
        make_scenario(drafter={"family": "dflash", "block_size": 3,
                               "latency": {"kind": "profile", "path": str(tmp_path / "nope.csv")}})


def test_unknown_latency_kind_and_missing_keys_are_named():
    with pytest.raises(SpecplanError, match=r"unknown kind .roofline"):
        make_scenario(drafter={"latency": {"kind": "roofline"}})
    with pytest.raises(SpecplanError, match="target_layers"):
        make_scenario(drafter={"latency": {"kind": "layers"}})


def test_a_scenario_runs_with_a_layers_latency_model():
    scenario = make_scenario(drafter={"family": "eagle3", "block_size": 3,
                                      "latency": {"kind": "layers", "target_layers": 32}},
                             horizon={"duration_s": 5, "warmup_s": 1})
    steps = simulate(scenario).steps
    drafting = steps[steps["drafting_requests"] > 0]
    assert len(drafting) > 10
    expected = [3 / 32 * (10.0 + 0.05 * r) for r in drafting["drafting_requests"]]
    np.testing.assert_allclose(drafting["draft_ms"], expected)
