"""Candidate admission: the vectorised core of DSpark's prefix scheduler (docs/model/policies.md).

A candidate is a draft position (r, j) of a running request; its value is
the prefix survival `a_{r,j} = Π_{i≤j} c_{r,i}`, the expected number of
tokens it adds. Admitting the top-n candidates by survival verifies
`B = B₀ + n` tokens (B₀ = one anchor per request + reserved prefill tokens)
and yields the expected throughput

    Θ_n = (R + Σ_{m≤n} a_(m)) · SPS(B₀ + n),   a_(1) ≥ a_(2) ≥ ... sorted,

where SPS(B) = 1 / (the whole step the engine charges at B: drafting,
verify at B and the batch's KV context, host time, the policy's
scheduling overhead), read from the view's price.

Because survival is non-increasing along a request's block, the top-n set is
a prefix of every request's block, so `ℓ_r` is simply how many of request
r's candidates are in it. Everything here is one sort plus cumulative sums:
no per-candidate Python loop.

    ranked = rank_candidates(view)      sorted gains, expected tokens and the Θ curve
    gains, τ, Θ = throughput_curve(view, buffer)  the same from survivals already in a buffer (sorted in place)
    n = early_stop(ranked.theta)        Algorithm 1 (lossless)
    n = global_best(ranked.theta)       argmax over every prefix (lossy when synchronous)
    ℓ = top_lengths(ranked, n)          per-request lengths of the top-n set
    ℓ = top_k_lengths(survivals, k)     the same for a given k, by selection instead of a sort
    choice = theta_choice(view, ranked, n)  B, expected tokens and Θ of the choice (the Decision's theta)

Candidates with zero survival are never admitted (they cannot add a token),
and at most `view.verify_capacity` candidates are ranked, so every length
choice made here respects Σ(1 + ℓ) + reserved ≤ max_step_tokens.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specplan.policies.base import NEW, StepView, ThetaChoice, water_fill


class Ranked(NamedTuple):
    """Candidates of one step, ranked.

    survival  (R, γ) prefix survivals a_{r,j}
    gains     descending survivals of the admissible candidates (at most the step's capacity)
    tau       τ_n = R + Σ_{m≤n} gains_m for n = 0..len(gains): expected tokens after admitting n
    theta     Θ_n = τ_n · SPS(B₀ + n)
    """

    survival: np.ndarray
    gains: np.ndarray
    tau: np.ndarray
    theta: np.ndarray


def survival(confidences: np.ndarray) -> np.ndarray:
    """Prefix survival a_{r,j} = Π_{i≤j} c_{r,i} (confidences are probabilities, in [0, 1])."""
    return np.multiply.accumulate(confidences, axis=1)  # the ufunc directly: cumprod's wrapper costs a third


def rank_candidates(view: StepView, survivals: np.ndarray | None = None) -> Ranked:
    """Sort the step's candidates once and build the expected-throughput curve Θ_n.

    `survivals` (R, γ) replaces the survivals of the view's confidences (the
    asynchronous policy plans with older ones); the view gives R, the
    reserved tokens, the capacity and the step's price.
    """
    a = survival(view.confidences) if survivals is None else survivals
    ordered = np.empty(a.size + 1)
    ordered[:a.size] = a.ravel()
    return NEW(Ranked, (a, *throughput_curve(view, ordered)))


def throughput_curve(view: StepView, ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gains, τ, Θ) of the candidates whose survivals fill `ordered` but its last slot (sorted there, in place).

    The buffer is one longer than the candidates so that, sorted ascending and
    R written last, its reverse [R, a_(1), a_(2), ...] sums to τ in one pass.
    """
    n = ordered.size - 1
    ascending = ordered[:n]
    ascending.sort()
    ordered[n] = view.batch_requests
    zeros = 0 if ascending[0] > 0.0 else int(ascending.searchsorted(0.0, side="right"))  # they add no token
    limit = min(n - zeros, view.verify_capacity)
    descending = ordered[::-1]
    tau = np.add.accumulate(descending[:limit + 1])  # τ_n = R + Σ_{m≤n} a_(m), n = 0..limit
    base = view.base_tokens
    return descending[1:limit + 1], tau, tau * view.price.steps_per_s_range(base, base + limit + 1)


def theta_choice(view: StepView, ranked: Ranked, n: int) -> ThetaChoice:
    """Θ_n with its B and expected tokens: what the policy optimised, for its Decision."""
    return choice_at(view, ranked.tau, ranked.theta, n)


def choice_at(view: StepView, tau: np.ndarray, theta: np.ndarray, n: int) -> ThetaChoice:
    """The same from a throughput curve's τ and Θ (`throughput_curve`)."""
    return NEW(ThetaChoice, (view.base_tokens + n, float(tau[n]), float(theta[n])))


def early_stop(theta: np.ndarray) -> int:
    """Algorithm 1: admit while Θ strictly improves; stop at the first candidate that does not.

    The running best is the previous Θ as long as every admission improved,
    so the answer is the number of leading strict improvements.
    """
    stalls = (theta[1:] <= theta[:-1]).nonzero()[0]
    return int(stalls[0]) if stalls.size else theta.size - 1


def global_best(theta: np.ndarray) -> int:
    """The prefix size with the largest Θ (the smallest such size on ties)."""
    return int(theta.argmax())


def top_lengths(ranked: Ranked, n: int) -> np.ndarray:
    """ℓ_r: how many of request r's candidates are among the top n by survival."""
    if n <= 0:
        return np.zeros(ranked.survival.shape[0], dtype=np.int64)
    return lengths_above(ranked.survival, n, ranked.gains[n - 1])


def top_k_lengths(survivals: np.ndarray, k: int) -> np.ndarray | int:
    """ℓ_r for the top k candidates with positive survival, found by selection (no full sort).

    When every candidate fits and none has zero survival, every request
    verifies its whole block: the answer is that one int (the idle-GPU case).
    """
    flat = survivals.ravel()
    if k >= flat.size:  # every candidate fits: all that can add a token (a prefix of each row)
        if flat.size and flat[flat.argmin()] > 0.0:  # no zero survival (an argmin costs less than a count)
            return survivals.shape[1]
        return np.add.reduce(survivals > 0.0, axis=1)
    if k <= 0:
        return np.zeros(survivals.shape[0], dtype=np.int64)
    where = flat.size - k
    selected = flat.copy()
    selected.partition(where)
    if selected[where] <= 0.0:  # fewer than k candidates can add a token: all of those
        return np.add.reduce(survivals > 0.0, axis=1)
    return lengths_above(survivals, k, selected[where])


def lengths_above(a: np.ndarray, n: int, cut: float) -> np.ndarray:
    """Per-row counts of the n candidates with the largest survival, `cut` being the n-th largest.

    Candidates tied at the cut are shared out level by level (one more per
    request in turn, earlier rows first: `water_fill`). A row's tied
    candidates are contiguous, so every selection stays a prefix.
    """
    at_least = a >= cut
    per_row = np.add.reduce(at_least, axis=1)
    if np.count_nonzero(at_least) == n:
        return per_row
    above = np.add.reduce(a > cut, axis=1)
    tied = per_row - above
    return above + water_fill(tied, n - int(above.sum()))
