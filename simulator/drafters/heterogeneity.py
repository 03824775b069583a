"""Heterogeneity without bias: logit offsets that keep a curve's mean accepted length.

Spreading acceptance in logit space (σ(x + z + ε)) changes its mean:
σ is concave above ½ and convex below. To keep the preset's behaviour,
the offsets δ_k are solved so that every prefix survival keeps its mean,

    E_z[ Π_{i≤k} E_ε σ(logit p̄_i + δ_i + z + ε_i) ] = Π_{i≤k} p̄_i,   k = 1..γ,

left to right (δ_1..δ_{k-1} fixed when solving δ_k), z ~ N(0, σ_req²)
shared along the block, ε_i ~ N(0, σ_tok²) independent per position. Then
E[τ] = 1 + Σ_j E[Π_{i≤j} p_i] equals the unspread curve's τ for every
verification length, whatever the sigmas. Expectations use Gauss–Hermite
quadrature; each δ_k is a 1-D root (the survival is monotone in δ_k).

The guarantee is per draft block (tests/test_drafters_heterogeneity.py
checks it by simulation). A run's mean τ per engine step is lower than the
curve's when request_sigma > 0 or domains differ: requests with low
acceptance need more steps for the same output, so they weigh more in a
per-step average. That is a real selection effect, not a bias of the model.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

NODES = 48


def gauss_normal(sigma: float, n: int = NODES) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for E[f(X)], X ~ N(0, sigma²)."""
    if sigma == 0:
        return np.zeros(1), np.ones(1)
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return sigma * x, w / w.sum()


def smoothed_sigmoid(x: np.ndarray, eps_nodes: np.ndarray, eps_weights: np.ndarray) -> np.ndarray:
    """E_ε σ(x + ε) for each x."""
    return (1.0 / (1.0 + np.exp(-(x[..., None] + eps_nodes)))) @ eps_weights


def solve_offsets(base_p: np.ndarray, request_sigma: float, token_sigma: float) -> np.ndarray:
    """Offsets δ (D, γ) so that each domain's prefix survivals keep their means."""
    base_p = np.atleast_2d(np.asarray(base_p, dtype=float))
    if request_sigma == 0 and token_sigma == 0:
        return np.zeros_like(base_p)
    return np.stack([solve_curve(row, request_sigma, token_sigma) for row in base_p])


def solve_curve(curve: np.ndarray, request_sigma: float, token_sigma: float) -> np.ndarray:
    z, wz = gauss_normal(request_sigma)
    e, we = gauss_normal(token_sigma)
    offsets = np.zeros(curve.size)
    carried = np.ones_like(z)  # Π_{i<k} E_ε σ(...) at each z node
    target = 1.0
    for k, p in enumerate(curve):
        target *= p
        if p <= 0.0 or p >= 1.0:  # degenerate: no spread can move 0 or 1
            carried = carried * (p if p <= 0.0 else 1.0)
            continue
        x = np.log(p) - np.log1p(-p) + z  # logit p̄_k + z at each request node
        offsets[k] = solve_position(x, carried, wz, target, e, we)
        carried = carried * smoothed_sigmoid(x + offsets[k], e, we)
    return offsets


def solve_position(x: np.ndarray, carried: np.ndarray, wz: np.ndarray, target: float,
                   e: np.ndarray, we: np.ndarray) -> float:
    """δ with E_z[carried · E_ε σ(x + δ + ε)] = target (monotone in δ, so one bracketed root)."""

    def gap(d: float) -> float:
        return float((carried * smoothed_sigmoid(x + d, e, we)) @ wz - target)

    return float(brentq(gap, -40.0, 40.0, xtol=1e-10)) if gap(-40.0) < 0 < gap(40.0) else 0.0
