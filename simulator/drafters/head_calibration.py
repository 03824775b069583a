"""Calibration of confidence heads: ECE, ROC-AUC, Brier, and Sequential Temperature Scaling.

Everything here scores prefix survival, which is what a prefix scheduler
ranks: at draft position k the prediction is the cumulative product
`a_k = Π_{i≤k} c_i` and the label is whether drafts 1..k were all accepted.

- ECE: 20 equal-width bins on [0, 1], `Σ_b (n_b/n)·|mean predicted − observed|`
  (docs/model/drafters.md). `ece_many` scores many candidate predictions at once.
- ROC-AUC: the Mann–Whitney statistic with average ranks for ties.
- STS (docs/model/drafters.md): left to right, for each position k, a 1-D grid search
  picks `T_k` (`c' = σ(logit(c)/T_k)`) minimising the ECE of `a_k`, the
  temperatures of positions 1..k−1 held at their fitted values. The grid is
  log-spaced over [0.05, 20] (49 points, 13% apart) and refined twice
  between the best point's neighbours (17 points each: 0.2% resolution).
  Temperature scaling is monotone per position, so it preserves each
  position's ordering of confidences.

`heads.py` fits STS on a calibration sample at build time; `specplan
calibrate` reports these metrics before and after.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_BINS = 20
COARSE_GRID = np.geomspace(0.05, 20.0, 49)
FINE_POINTS = 17
REFINEMENTS = 2
EPS = 1e-7


def clipped_logit(c: np.ndarray) -> np.ndarray:
    c = np.clip(c, EPS, 1.0 - EPS)
    return np.log(c) - np.log1p(-c)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def bin_of(pred: np.ndarray) -> np.ndarray:
    """Equal-width bin index in 0..N_BINS-1 (1.0 falls in the last bin)."""
    return np.minimum((np.asarray(pred) * N_BINS).astype(np.intp), N_BINS - 1)


def ece(pred: np.ndarray, label: np.ndarray) -> float:
    """Expected calibration error of predictions `pred` for 0/1 outcomes `label`."""
    return float(ece_many(np.asarray(pred, dtype=float)[None, :], label)[0])


def ece_many(pred: np.ndarray, label: np.ndarray) -> np.ndarray:
    """ECE of each row of `pred` (m, n) against the same labels (n,): shape (m,).

    `Σ_b (n_b/n)·|mean pred − observed|` is `Σ_b |Σ_{i∈b} (pred_i − label_i)| / n`,
    so one weighted bincount per call scores every row.
    """
    m, n = pred.shape
    flat = bin_of(pred)
    flat += (np.arange(m) * N_BINS)[:, None]
    gap = np.bincount(flat.ravel(), weights=(pred - label).ravel(), minlength=m * N_BINS)
    return np.abs(gap).reshape(m, N_BINS).sum(axis=1) / n


def roc_auc(score: np.ndarray, label: np.ndarray) -> float:
    """Area under the ROC curve; NaN when only one class is present."""
    label = np.asarray(label, dtype=bool)
    positives, negatives = int(label.sum()), int((~label).sum())
    if positives == 0 or negatives == 0:
        return float("nan")
    # scipy.stats costs a command 0.5 s to import: only where an AUC is scored
    from scipy.stats import rankdata

    ranks = rankdata(score)
    return float((ranks[label].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def brier(pred: np.ndarray, label: np.ndarray) -> float:
    return float(np.mean((np.asarray(pred, dtype=float) - label) ** 2))


@dataclass(frozen=True)
class Reliability:
    """One reliability diagram: per-bin counts, mean prediction and observed frequency."""

    counts: np.ndarray
    mean_pred: np.ndarray
    observed: np.ndarray

    @property
    def edges(self) -> np.ndarray:
        return np.linspace(0.0, 1.0, N_BINS + 1)


def reliability(pred: np.ndarray, label: np.ndarray) -> Reliability:
    """Bin statistics (NaN for empty bins) behind an ECE."""
    idx = bin_of(pred)
    counts = np.bincount(idx, minlength=N_BINS).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_pred = np.bincount(idx, weights=pred, minlength=N_BINS) / counts
        observed = np.bincount(idx, weights=np.asarray(label, dtype=float), minlength=N_BINS) / counts
    return Reliability(counts, mean_pred, observed)


def survival(accepted: np.ndarray) -> np.ndarray:
    """Prefix survival labels (n, γ): drafts 1..k all accepted."""
    return np.cumprod(np.asarray(accepted, dtype=float), axis=1)


def apply_temperatures(c: np.ndarray, temperatures: np.ndarray) -> np.ndarray:
    """c' = σ(logit(c) / T_k), position by position."""
    return sigmoid(clipped_logit(c) / temperatures)


def fit_sts(c: np.ndarray, accepted: np.ndarray) -> np.ndarray:
    """Sequential Temperature Scaling: T_k per position, fitted left to right."""
    labels = survival(accepted)
    logits = clipped_logit(c)
    temperatures = np.ones(c.shape[1])
    carried = np.ones(c.shape[0])  # Π_{i<k} c'_i with the fitted temperatures
    for k in range(c.shape[1]):
        temperatures[k] = best_temperature(logits[:, k], carried, labels[:, k])
        carried = carried * sigmoid(logits[:, k] / temperatures[k])
    return temperatures


def best_temperature(logit_k: np.ndarray, carried: np.ndarray, label_k: np.ndarray) -> float:
    """Grid search (coarse, then refined around the best) for position k's temperature.

    Candidates are computed in float32 (4x faster; far below ECE's sampling noise).
    """
    grid = COARSE_GRID
    logit32, carried32 = logit_k.astype(np.float32), carried.astype(np.float32)
    for _ in range(1 + REFINEMENTS):
        candidates = carried32 * sigmoid(logit32 / grid[:, None].astype(np.float32))
        scores = ece_many(candidates.astype(np.float64), label_k)
        i = int(np.argmin(scores))
        best = float(grid[i])
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        grid = np.geomspace(lo, hi, FINE_POINTS)
    return best


@dataclass(frozen=True)
class CalibrationReport:
    """Per-position scores of prefix survival before and after STS."""

    temperatures: np.ndarray
    ece_before: np.ndarray
    ece_after: np.ndarray
    auc_before: np.ndarray
    auc_after: np.ndarray
    brier_before: np.ndarray
    brier_after: np.ndarray
    reliability_before: list[Reliability]
    reliability_after: list[Reliability]


@dataclass(frozen=True)
class PositionScores:
    """ECE, AUC, Brier (γ,) and reliability bins of a_k for every position k."""

    ece: np.ndarray
    auc: np.ndarray
    brier: np.ndarray
    reliability: list[Reliability]


def score_positions(c: np.ndarray, accepted: np.ndarray) -> PositionScores:
    """Score prefix survival a_k = Π_{i≤k} c_i against survival labels at every position."""
    a, s = np.cumprod(c, axis=1), survival(accepted)
    cols = range(c.shape[1])
    return PositionScores(
        ece=np.array([ece(a[:, k], s[:, k]) for k in cols]),
        auc=np.array([roc_auc(a[:, k], s[:, k]) for k in cols]),
        brier=np.array([brier(a[:, k], s[:, k]) for k in cols]),
        reliability=[reliability(a[:, k], s[:, k]) for k in cols],
    )


def calibration_report(raw: np.ndarray, accepted: np.ndarray, temperatures: np.ndarray) -> CalibrationReport:
    """Score raw confidences and their temperature-scaled version on the same sample."""
    before = score_positions(raw, accepted)
    after = score_positions(apply_temperatures(raw, temperatures), accepted)
    return CalibrationReport(
        temperatures=temperatures,
        ece_before=before.ece, ece_after=after.ece,
        auc_before=before.auc, auc_after=after.auc,
        brier_before=before.brier, brier_after=after.brier,
        reliability_before=before.reliability, reliability_after=after.reliability,
    )
