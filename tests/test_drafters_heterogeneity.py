"""Heterogeneity without bias: spreading acceptance keeps the preset's mean accepted length.

Checked by simulation, the way the engine draws: a request offset z per
block, token noise per position, outcomes U < p, τ = accepted prefix + 1.
Each check uses independent replications and asserts that the 99%
confidence interval of the mean τ lies within ±1% of the preset's τ.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from simulator.core.streams import stream
from simulator.drafters.acceptance import AcceptanceModel, expected_tau
from simulator.drafters.heterogeneity import solve_offsets
from simulator.drafters.presets import preset_curves

MIX = {"math": 0.3, "code": 0.3, "chat": 0.4}
BLOCKS_PER_REPLICATION = 40_000
REPLICATIONS = 6


class UncorrectedModel(AcceptanceModel):
    """The naive spread (no offsets): what the correction is there to fix."""

    def offsets(self) -> np.ndarray:
        return np.zeros_like(self.base_p)


def simulated_tau(model: AcceptanceModel, domain: int, length: int, seed: int) -> np.ndarray:
    """Mean τ with verification length `length` in each of REPLICATIONS independent runs."""
    means = []
    for rep in range(REPLICATIONS):
        rng = stream(seed, "heterogeneity-test", rep)
        n = BLOCKS_PER_REPLICATION
        p = model.sample(np.full(n, domain), model.request_offsets(n, rng), rng)[:, :length]
        ok = rng.random(p.shape) < p
        accepted = np.where(ok.all(axis=1), length, ok.argmin(axis=1))
        means.append(accepted.mean() + 1.0)
    return np.array(means)


def ci99(samples: np.ndarray) -> tuple[float, float]:
    half = stats.t.ppf(0.995, samples.size - 1) * samples.std(ddof=1) / np.sqrt(samples.size)
    return samples.mean() - half, samples.mean() + half


@pytest.mark.parametrize(("request_sigma", "token_sigma"), [(0.5, 0.5), (1.0, 0.0), (0.0, 1.5), (1.0, 2.0)])
def test_mean_tau_is_invariant_to_the_sigmas(request_sigma, token_sigma):
    curves = preset_curves("qwen3-8b", "dspark", 7)
    model = AcceptanceModel(curves, MIX, 7, request_sigma, token_sigma)
    for i, domain in enumerate(model.domains):
        for length in (3, 7):
            target = expected_tau(curves[domain], length)
            lo, hi = ci99(simulated_tau(model, i, length, seed=100 + i))
            assert 0.99 * target < lo and hi < 1.01 * target, (domain, length, lo, hi, target)


def test_without_offsets_the_spread_biases_tau():
    """The same test would fail without the correction: it has the power to see a 1% bias."""
    curves = preset_curves("qwen3-8b", "dflash", 7)
    model = UncorrectedModel(curves, {"chat": 1.0}, 7, 1.0, 2.0)
    target = expected_tau(curves["chat"])
    lo, hi = ci99(simulated_tau(model, 0, 7, seed=3))
    assert not (0.99 * target < lo and hi < 1.01 * target)


def test_offsets_vanish_without_spread_and_grow_with_it():
    base = np.array([[0.9, 0.8, 0.7], [0.6, 0.5, 0.4]])
    np.testing.assert_array_equal(solve_offsets(base, 0.0, 0.0), 0.0)
    small = np.abs(solve_offsets(base, 0.3, 0.3)).max()
    large = np.abs(solve_offsets(base, 1.5, 1.5)).max()
    assert 0 < small < large


def test_prefix_survival_means_are_kept_for_extreme_curves():
    """Survival kept at every position, checked by quadrature-free Monte Carlo, near p = 0.99."""
    curve = np.array([0.99, 0.95, 0.3, 0.98])
    model = AcceptanceModel({"chat": curve}, {"chat": 1.0}, 4, 2.0, 2.5)
    rng = stream(0, "extreme-curve")
    n = 400_000
    p = model.sample(np.zeros(n, dtype=np.int64), model.request_offsets(n, rng), rng)
    np.testing.assert_allclose(np.cumprod(p, axis=1).mean(axis=0), np.cumprod(curve), rtol=0.01)


def test_degenerate_probabilities_stay_put():
    offsets = solve_offsets(np.array([[1.0, 0.5, 0.0]]), 1.0, 1.0)
    assert offsets[0, 0] == 0.0 and offsets[0, 2] == 0.0
