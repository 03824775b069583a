"""Heterogeneity without bias: logit offsets that keep a curve's *pooled* acceptance.

Acceptance is spread in logit space, `p = σ(logit p̄_k + δ_k + z + ε_k)`,
z ~ N(0, σ_req²) once per request and shared along the block, ε_k ~ N(0,
σ_tok²) independent per position and step. The curve p̄ is what a paper or
an engine reports, and those figures are **pooled over proposals**
(docs/model/drafters.md; DeepSpec's `build_metrics_row`): τ = Σ acceptance lengths /
proposals, and the rate at position k = accepted at k / proposals reaching
k, over a whole dataset. A request of offset z makes about N/τ(z)
proposals for N output tokens, so hard requests weigh more. With full-block
verification (how the figures were measured),

    S_k(z)      = Π_{i≤k} E_ε σ(logit p̄_i + δ_i + z + ε_i)        survival of one proposal
    τ(z)        = 1 + Σ_{k≤γ} S_k(z)
    S_k^pooled  = E_z[S_k(z) / τ(z)] / E_z[1 / τ(z)]               (weights ∝ proposals)

and the offsets are solved so that `S_k^pooled = Π_{i≤k} p̄_i` for every
k: the pooled τ and every pooled per-position rate equal the curve's, at
any sigmas. The weights 1/τ(z) depend on all offsets, so the solve
alternates: fix the weights, solve δ_1..δ_γ left to right (each a 1-D
monotone root), recompute the weights, until the offsets stop moving.
Expectations use Gauss–Hermite quadrature.

Without request spread every request weighs the same and the pooled and
per-proposal figures coincide; the weights matter only when σ_req > 0.
"""

from __future__ import annotations

import numpy as np

from specplan.simulator.drafters.curves import root

NODES = 48
MAX_ROUNDS = 60
TOLERANCE = 1e-11


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
    """Offsets δ (D, γ) so that each domain's pooled prefix survivals equal the curve's."""
    base_p = np.atleast_2d(np.asarray(base_p, dtype=float))
    if request_sigma == 0 and token_sigma == 0:
        return np.zeros_like(base_p)
    return np.stack([solve_curve(row, request_sigma, token_sigma) for row in base_p])


def solve_curve(curve: np.ndarray, request_sigma: float, token_sigma: float) -> np.ndarray:
    """One curve's offsets: alternate proposal weights and a left-to-right solve until fixed."""
    z, wz = gauss_normal(request_sigma)
    e, we = gauss_normal(token_sigma)
    offsets = np.zeros(curve.size)
    weights = wz
    for _ in range(MAX_ROUNDS):
        solved = solve_left_to_right(curve, z, weights, e, we)
        moved = float(np.abs(solved - offsets).max())
        offsets = solved
        weights = wz / request_tau(curve, offsets, z, e, we)
        if moved < TOLERANCE:
            break
    return offsets


def request_tau(curve: np.ndarray, offsets: np.ndarray, z: np.ndarray, e: np.ndarray,
                we: np.ndarray) -> np.ndarray:
    """τ(z) of full-block verification at each request node."""
    return 1.0 + survivals(curve, offsets, z, e, we).sum(axis=1)


def survivals(curve: np.ndarray, offsets: np.ndarray, z: np.ndarray, e: np.ndarray,
              we: np.ndarray) -> np.ndarray:
    """S_k(z) (nodes × γ): prefix survival of one proposal at each request node."""
    x = logit_or_edge(curve)[None, :] + offsets[None, :] + z[:, None]
    return np.cumprod(smoothed_sigmoid(x, e, we), axis=1)


def logit_or_edge(curve: np.ndarray) -> np.ndarray:
    """logit p̄, with 0 and 1 sent to ∓60 (σ saturates; no spread moves them)."""
    p = np.clip(curve, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        x = np.log(p) - np.log1p(-p)
    return np.clip(x, -60.0, 60.0)


def solve_left_to_right(curve: np.ndarray, z: np.ndarray, weights: np.ndarray, e: np.ndarray,
                        we: np.ndarray) -> np.ndarray:
    """δ_k with Σ_z w(z) S_k(z) / Σ_z w(z) = Π_{i≤k} p̄_i, earlier positions held fixed."""
    weights = weights / weights.sum()
    offsets = np.zeros(curve.size)
    carried = np.ones_like(z)  # S_{k-1}(z) at each request node
    target = 1.0
    base = logit_or_edge(curve)
    for k, p in enumerate(curve):
        target *= p
        x = base[k] + z
        if 0.0 < p < 1.0:
            offsets[k] = solve_position(x, carried, weights, target, e, we)
        carried = carried * smoothed_sigmoid(x + offsets[k], e, we)
    return offsets


def solve_position(x: np.ndarray, carried: np.ndarray, weights: np.ndarray, target: float,
                   e: np.ndarray, we: np.ndarray) -> float:
    """δ with Σ_z w(z) · carried(z) · E_ε σ(x + δ + ε) = target (monotone in δ: one bracketed root)."""

    def gap(d: float) -> float:
        return float((carried * smoothed_sigmoid(x + d, e, we)) @ weights - target)

    return float(root(gap, -40.0, 40.0, xtol=1e-12)) if gap(-40.0) < 0 < gap(40.0) else 0.0


def pooled_survival(curve: np.ndarray, offsets: np.ndarray, request_sigma: float,
                    token_sigma: float) -> np.ndarray:
    """S_k^pooled (γ,) under full-block verification: what a pooled evaluator would measure."""
    z, wz = gauss_normal(request_sigma)
    e, we = gauss_normal(token_sigma)
    s = survivals(np.asarray(curve, dtype=float), offsets, z, e, we)
    w = wz / (1.0 + s.sum(axis=1))
    return (w @ s) / w.sum()
