"""Arithmetic of acceptance curves: logit space and the expected accepted length.

    logit(p), sigmoid(x)        the two maps of logit space (sigmoid is scipy's expit: no overflow)
    expected_tau(curve, ℓ)      E[τ] = 1 + Σ_{j≤ℓ} Π_{i≤j} p_i, the bonus token included
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def logit(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return expit(x)


def expected_tau(curve: np.ndarray, length: int | None = None) -> float:
    """E[τ] = 1 + Σ_{j≤ℓ} Π_{i≤j} p_i for one curve verified to `length` (default: all)."""
    c = np.asarray(curve, dtype=float)[: len(curve) if length is None else length]
    return float(1.0 + np.cumprod(c).sum())
