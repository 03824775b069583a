"""Arithmetic of acceptance curves: logit space and the expected accepted length.

    logit(p), sigmoid(x)        the two maps of logit space (sigmoid is scipy's expit: no overflow)
    expected_tau(curve, ℓ)      E[τ] = 1 + Σ_{j≤ℓ} Π_{i≤j} p_i, the bonus token included
    root(f, lo, hi, xtol)       the x in [lo, hi] with f(x) = 0 (scipy's brentq), for fitting curves

scipy is imported where it is first used (scipy.special by `sigmoid`,
scipy.optimize by `root`): loading a scenario (`specplan check`) uses
neither, and the imports cost a command 0.3 and 0.5 s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np


def logit(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return expit()(x)


@functools.cache
def expit() -> Callable[[np.ndarray], np.ndarray]:
    """scipy's expit ufunc, imported at its first use."""
    # scipy.special costs a command 0.3 s to import: not before a curve is evaluated
    from scipy.special import expit as ufunc

    return ufunc


def root(f: Callable[[float], float], lo: float, hi: float, xtol: float) -> float:
    """The x in [lo, hi] where f changes sign (Brent's method; f(lo) and f(hi) of opposite signs)."""
    # scipy.optimize costs a command 0.5 s to import: not before a curve is fitted
    from scipy.optimize import brentq

    return float(brentq(f, lo, hi, xtol=xtol))


def expected_tau(curve: np.ndarray, length: int | None = None) -> float:
    """E[τ] = 1 + Σ_{j≤ℓ} Π_{i≤j} p_i for one curve verified to `length` (default: all)."""
    c = np.asarray(curve, dtype=float)[: len(curve) if length is None else length]
    return float(1.0 + np.cumprod(c).sum())
