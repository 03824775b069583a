"""Does a simulated cluster keep up with its demand? A backlog test a short horizon cannot fool.

A cluster keeps up when the requests outstanding in it (arrived, not yet
finished) stop growing. The test reads the requests frame of one run:

    N(t) = arrivals up to t − completions up to t,  sampled over the second
           half (t_mid, t_end] of the measurement window (warmup_s, t_end]
    growth = OLS slope of N(t) × (t_end − t_mid), as a share of the arrivals
           in that half: an overloaded cluster serving a fraction f of its
           demand grows by 1 − f; a stable one fluctuates around 0.

It falls behind when the growth exceeds `GROWTH_LIMIT` (5%: it serves less
than 95% of its demand) and the fluctuation a stationary count shows
(`NOISE_Z` √N̄). It keeps up when the growth is under the limit. Because the
system starts empty, a horizon too short for N(t) to settle shows growth
that is only the ramp up to the steady state (the old failure: at 5 s a
plan asked for 39 GPUs where 30 s asks for 2). So growth counts as falling
behind only when the half starts at least `SETTLE` times the p90 time a
request spends in an engine (admission to finish, or to the end for one
still running) after t = 0; otherwise,
and whenever fewer than `MIN_COMPLETED` requests completed in the window,
the verdict is "too short", with the horizon that would settle it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

GROWTH_LIMIT = 0.05
NOISE_Z = 3.0
SETTLE = 2.0  # from empty, N(t) still rises at λ·P(S > t): past 2 × p90 of S that is ~1% of λ
MIN_COMPLETED = 30
SAMPLES = 65

KEEPS_UP, FALLS_BEHIND, TOO_SHORT = "keeps up", "falls behind", "too short"


@dataclass(frozen=True)
class Backlog:
    """The keep-up verdict of one run and the figures behind it."""

    verdict: str
    growth: float
    completed: int
    service_p90_s: float
    needed_duration_s: float
    reason: str

    def fields(self) -> dict[str, Any]:
        """The verdict as summary keys (stored with each plan probe)."""
        return {"keep_up_verdict": self.verdict, "keep_up_growth": self.growth,
                "keep_up_completed": self.completed, "keep_up_service_p90_s": self.service_p90_s,
                "keep_up_needed_duration_s": self.needed_duration_s, "keep_up_reason": self.reason}


def outstanding(requests: Any, times: np.ndarray) -> np.ndarray:
    """N(t) at each time: arrived by t and not finished by t (rejected requests never finish)."""
    arrivals = np.sort(requests["arrival_s"].to_numpy(dtype=float))
    finishes = np.sort(requests["finish_s"].to_numpy(dtype=float))
    finishes = finishes[np.isfinite(finishes)]
    return np.searchsorted(arrivals, times, side="right") - np.searchsorted(finishes, times, side="right")


def backlog_growth(requests: Any, t_mid: float, t_end: float) -> tuple[float, float, int]:
    """(growth of N over (t_mid, t_end], mean N there, arrivals there)."""
    times = np.linspace(t_mid, t_end, SAMPLES)
    counts = outstanding(requests, times).astype(float)
    slope = float(np.polyfit(times - t_mid, counts, 1)[0])
    arrivals = requests["arrival_s"].to_numpy(dtype=float)
    arrived = int(np.sum((arrivals > t_mid) & (arrivals <= t_end)))
    return slope * (t_end - t_mid), float(counts.mean()), arrived


def service_p90(requests: Any, end_s: float) -> float:
    """p90 of the time admitted requests spent in an engine: admission → finish, or → end_s for those
    still running (a lower bound, so long requests a short horizon cut off still count); NaN if none."""
    admitted = requests["admitted_s"].to_numpy(dtype=float)
    finish = np.fmin(requests["finish_s"].to_numpy(dtype=float), end_s)
    finish = np.where(np.isfinite(finish), finish, end_s)
    span = (finish - admitted)[np.isfinite(admitted)]
    return float(np.percentile(span, 90)) if span.size else math.nan


def judge_backlog(requests: Any, warmup_s: float, end_s: float) -> Backlog:
    """The keep-up verdict of one run whose measurement window is (warmup_s, end_s]."""
    t_mid = 0.5 * (warmup_s + end_s)
    finish = requests["finish_s"].to_numpy(dtype=float)
    arrival = requests["arrival_s"].to_numpy(dtype=float)
    completed = int(np.sum(np.isfinite(finish) & (arrival >= warmup_s) & (finish <= end_s)))
    service = service_p90(requests, end_s)
    needed = needed_duration(warmup_s, end_s, service, completed)
    if completed < MIN_COMPLETED:
        return Backlog(TOO_SHORT, math.nan, completed, service, needed,
                       f"only {completed} requests completed in the measurement window "
                       f"(at least {MIN_COMPLETED} are needed to judge)")
    growth, mean_n, arrived = backlog_growth(requests, t_mid, end_s)
    share = growth / arrived if arrived else math.nan
    if math.isfinite(share) and share <= GROWTH_LIMIT:
        return Backlog(KEEPS_UP, share, completed, service, needed, "")
    if growth <= NOISE_Z * math.sqrt(max(mean_n, 1.0)):
        return Backlog(KEEPS_UP, share, completed, service, needed, "")
    if t_mid >= SETTLE * service:
        return Backlog(FALLS_BEHIND, share, completed, service, needed,
                       f"the backlog grows by {100 * share:.0f}% of the arrivals over the window's second half")
    return Backlog(TOO_SHORT, share, completed, service, needed,
                   f"the backlog still grows ({100 * share:+.0f}% of the arrivals) in the window's second half, "
                   f"which starts at {t_mid:g} s, before {SETTLE:g} × the p90 time a request spends in the engine "
                   f"({service:.1f} s): the ramp-up from an empty cluster cannot be told from overload")


def needed_duration(warmup_s: float, end_s: float, service_s: float, completed: int) -> float:
    """A horizon that settles the verdict: t_mid ≥ 1.25·SETTLE·service and 2·MIN_COMPLETED
    completions (4× the horizon when nothing completed)."""
    if completed == 0 or not math.isfinite(service_s):
        return float(math.ceil(4.0 * end_s))  # nothing finished: no service time to scale by
    by_settle = 2.5 * SETTLE * service_s - warmup_s  # t_mid at 1.25 × the settle time
    window = max(end_s - warmup_s, 1e-9)
    by_count = warmup_s + window * 2.0 * MIN_COMPLETED / completed
    return float(math.ceil(max(by_settle, by_count)))
