"""Does a simulated cluster keep up with its demand? A backlog test a short horizon cannot fool.

A cluster keeps up when the requests outstanding in it (arrived, not yet
answered: finished, or rejected with a reason on arrival) stop growing.
The test reads the requests frame of one run:

    N(t) = arrivals up to t − completions up to t,  sampled over the second
           half (t_mid, t_end] of the measurement window (warmup_s, t_end]
    growth = OLS slope of N(t) × (t_end − t_mid), as a share of the arrivals
           in that half: an overloaded cluster serving a fraction f of its
           demand grows by 1 − f; a stable one fluctuates around 0.

It falls behind when the growth exceeds `GROWTH_LIMIT` (5%: it serves less
than 95% of its demand) and `NOISE_Z` times the larger of √N̄ (the
fluctuation of a stationary count) and the growth's standard error read off
the count itself (its residuals about the fitted line, with the effective
number of values their autocorrelation leaves: a count of requests that
stay seconds in an engine is correlated that long, and without this a small
sampled fleet read its noise as overload). It keeps up when the growth is
under the limit. Because the system starts empty, a horizon too short for
N(t) to settle shows growth
that is only the ramp up to the steady state (the old failure: at 5 s a
plan asked for 39 GPUs where 30 s asks for 2). So growth counts as falling
behind only when the half starts at least `SETTLE` times the p90 time a
request spends in an engine (admission to finish, or to the end for one
still running) after t = 0; otherwise,
and whenever fewer than `MIN_COMPLETED` requests completed in the window,
the verdict is "too short", with the horizon that would settle it.

Far below the demand (a plan's first probes) a cluster can be so overloaded
that no request of the window completes, or even starts. Two tests still
call such a run behind (`OVERWHELMED`: it serves less than half its demand):
the backlog grows by more than half the arrivals after the ramp-up has
settled, as above; or every engine had a waiting queue throughout the second
half (so it ran at its capacity for that mix, and a young batch's capacity
is only higher than a settled one's) while emitting less than half the
tokens its arrivals asked for.
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
OVERWHELMED = 0.5  # too few completions: behind only past this growth (or token shortfall)
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


def rejected(requests: Any) -> np.ndarray:
    """Which requests were turned away (with a reason, at their arrival)."""
    return (requests["status"] == "rejected").to_numpy() if "status" in requests else np.zeros(len(requests), bool)


def answered_s(requests: Any) -> np.ndarray:
    """When each request left the system: its finish, or its arrival for one rejected (answered with a
    reason, not outstanding); NaN while it is still in the system."""
    finish = requests["finish_s"].to_numpy(dtype=float)
    return np.where(rejected(requests), requests["arrival_s"].to_numpy(dtype=float), finish)


def outstanding(requests: Any, times: np.ndarray) -> np.ndarray:
    """N(t) at each time: arrived by t and not answered by t (finished, or rejected on arrival)."""
    arrivals = np.sort(requests["arrival_s"].to_numpy(dtype=float))
    answers = np.sort(answered_s(requests))
    answers = answers[np.isfinite(answers)]
    return np.searchsorted(arrivals, times, side="right") - np.searchsorted(answers, times, side="right")


def backlog_growth(requests: Any, t_mid: float, t_end: float) -> tuple[float, float, int, float]:
    """(growth of N over (t_mid, t_end], mean N there, arrivals there, the growth's standard error)."""
    times = np.linspace(t_mid, t_end, SAMPLES)
    counts = outstanding(requests, times).astype(float)
    slope = float(np.polyfit(times - t_mid, counts, 1)[0])
    arrivals = requests["arrival_s"].to_numpy(dtype=float)
    arrived = int(np.sum((arrivals > t_mid) & (arrivals <= t_end)))
    return slope * (t_end - t_mid), float(counts.mean()), arrived, growth_noise(times, counts)


def service_p90(requests: Any, end_s: float) -> float:
    """p90 of the time admitted requests spent in an engine: admission → finish, or → end_s for those
    still running (a lower bound, so long requests a short horizon cut off still count); NaN if none."""
    admitted = requests["admitted_s"].to_numpy(dtype=float)
    finish = np.fmin(requests["finish_s"].to_numpy(dtype=float), end_s)
    finish = np.where(np.isfinite(finish), finish, end_s)
    span = (finish - admitted)[np.isfinite(admitted)]
    return float(np.percentile(span, 90)) if span.size else math.nan


def saturated(requests: Any, t_mid: float, t_end: float) -> bool:
    """Every engine had a waiting queue throughout (t_mid, t_end]: a request that arrived by t_mid and was
    not admitted by t_end waits at each replica (or in a shared queue, which feeds them all)."""
    arrival = requests["arrival_s"].to_numpy(dtype=float)
    admitted = requests["admitted_s"].to_numpy(dtype=float)
    waiting = (arrival <= t_mid) & ~(admitted <= t_end) & ~rejected(requests)
    if "replica" not in requests:
        return bool(waiting.any())
    replica = requests["replica"].to_numpy(dtype=float)
    queued = replica[waiting]
    if np.any(~np.isfinite(queued) | (queued < 0)):
        return True  # a shared queue (pull routing) or a request not yet routed
    engines = set(replica[np.isfinite(replica) & (replica >= 0)].astype(int))
    return bool(engines) and engines <= set(queued.astype(int))


def token_shortfall(requests: Any, steps: Any, t_mid: float, t_end: float) -> float:
    """1 − tokens the engines emitted over (t_mid, t_end] ÷ tokens the arrivals there asked for (their
    outputs less the first token, which a prefill stage may emit; none for a rejected request); NaN without
    arrivals."""
    arrival = requests["arrival_s"].to_numpy(dtype=float)
    asked = np.maximum(requests["output_tokens"].to_numpy(dtype=float) - 1.0, 0.0) * ~rejected(requests)
    demand = float(asked[(arrival > t_mid) & (arrival <= t_end)].sum())
    end = steps["end_s"].to_numpy(dtype=float)
    served = float(steps["emitted_tokens"].to_numpy(dtype=float)[(end > t_mid) & (end <= t_end)].sum())
    return 1.0 - served / demand if demand > 0 else math.nan


def judge_backlog(requests: Any, warmup_s: float, end_s: float, steps: Any = None) -> Backlog:
    """The keep-up verdict of one run whose measurement window is (warmup_s, end_s]; `steps` (the
    run's steps frame) lets a run with too few completions still be judged overloaded."""
    t_mid = 0.5 * (warmup_s + end_s)
    finish = requests["finish_s"].to_numpy(dtype=float)
    arrival = requests["arrival_s"].to_numpy(dtype=float)
    completed = int(np.sum(np.isfinite(finish) & (arrival >= warmup_s) & (finish <= end_s)))
    service = service_p90(requests, end_s)
    needed = needed_duration(warmup_s, end_s, service, completed)
    growth, mean_n, arrived, noise = backlog_growth(requests, t_mid, end_s)
    share = growth / arrived if arrived else math.nan
    if completed < MIN_COMPLETED:
        if overwhelmed(share, beyond_noise(growth, mean_n, noise), t_mid, service):
            return Backlog(FALLS_BEHIND, share, completed, service, needed,
                           f"only {completed} requests completed in the measurement window while the backlog "
                           f"grew by {100 * share:.0f}% of the arrivals over its second half")
        short = token_shortfall(requests, steps, t_mid, end_s) if steps is not None else math.nan
        if short > OVERWHELMED and saturated(requests, t_mid, end_s):
            return Backlog(FALLS_BEHIND, share, completed, service, needed,
                           f"only {completed} requests completed in the measurement window; every engine had a "
                           f"waiting queue over its second half and emitted {100 * (1 - short):.0f}% of the "
                           f"tokens its arrivals asked for")
        return Backlog(TOO_SHORT, share, completed, service, needed,
                       f"only {completed} requests completed in the measurement window "
                       f"(at least {MIN_COMPLETED} are needed to judge)")
    if math.isfinite(share) and share <= GROWTH_LIMIT:
        return Backlog(KEEPS_UP, share, completed, service, needed, "")
    if not beyond_noise(growth, mean_n, noise):
        return Backlog(KEEPS_UP, share, completed, service, needed, "")
    if t_mid >= SETTLE * service:
        return Backlog(FALLS_BEHIND, share, completed, service, needed,
                       f"the backlog grows by {100 * share:.0f}% of the arrivals over the window's second half")
    return Backlog(TOO_SHORT, share, completed, service, needed,
                   f"the backlog still grows ({100 * share:+.0f}% of the arrivals) in the window's second half, "
                   f"which starts at {t_mid:g} s, before {SETTLE:g} × the p90 time a request spends in the engine "
                   f"({service:.1f} s): the ramp-up from an empty cluster cannot be told from overload")


def beyond_noise(growth: float, mean_n: float, noise: float) -> bool:
    """The growth exceeds `NOISE_Z` times the larger of √N̄ and its standard error off the count."""
    return growth > NOISE_Z * max(math.sqrt(max(mean_n, 1.0)), noise)


def overwhelmed(share: float, above_noise: bool, t_mid: float, service_s: float) -> bool:
    """Too few completions to judge the SLA, yet plainly overloaded: the backlog grows by more than
    `OVERWHELMED` of the arrivals, beyond the noise, after the ramp-up from empty has settled."""
    return (math.isfinite(share) and share > OVERWHELMED and above_noise
            and math.isfinite(service_s) and t_mid >= SETTLE * service_s)


def growth_noise(times: np.ndarray, counts: np.ndarray) -> float:
    """The standard error of the fitted growth (OLS slope × span) of a count, from the count itself: its
    residuals about the line, and their lag-1 autocorrelation ρ, which leaves n·(1 − ρ)/(1 + ρ)
    effective values of the n sampled (a count of long requests stays correlated for their length)."""
    centred = times - times.mean()
    slope, intercept = np.polyfit(centred, counts, 1)
    residual = counts - (slope * centred + intercept)
    spread = float(residual.std(ddof=2)) if counts.size > 2 else 0.0
    if spread == 0.0:
        return 0.0
    rho = float(np.corrcoef(residual[:-1], residual[1:])[0, 1]) if counts.size > 3 else 0.0
    rho = min(max(rho if math.isfinite(rho) else 0.0, 0.0), 0.99)
    effective = max(counts.size * (1.0 - rho) / (1.0 + rho), 2.0)
    se_slope = spread / math.sqrt(float((centred ** 2).sum())) * math.sqrt(counts.size / effective)
    return se_slope * float(times[-1] - times[0])


def needed_duration(warmup_s: float, end_s: float, service_s: float, completed: int) -> float:
    """A horizon that settles the verdict: t_mid ≥ 1.25·SETTLE·service and 2·MIN_COMPLETED
    completions (4× the horizon when nothing completed)."""
    if completed == 0 or not math.isfinite(service_s):
        return float(math.ceil(4.0 * end_s))  # nothing finished: no service time to scale by
    by_settle = 2.5 * SETTLE * service_s - warmup_s  # t_mid at 1.25 × the settle time
    window = max(end_s - warmup_s, 1e-9)
    by_count = warmup_s + window * 2.0 * MIN_COMPLETED / completed
    return float(math.ceil(max(by_settle, by_count)))
