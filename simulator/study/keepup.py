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

A count's noise grows with N̄, so a cluster that holds hundreds of requests
at once can fall behind by a tenth of its demand and still look flat for a
minute (a DeepSeek-V4-Flash replica of 256 slots at 20 req/s served 93% of
its demand: 200 → 744 outstanding over 300 s, inside 3·√N̄ at 60 s). The
served share tells them apart sooner. While requests wait for every engine,
the engines run at their capacity for the mix at hand, so the output tokens
they emit per second then (summed over engines; a batch-means 95% interval
over `GROUPS` consecutive stretches of those steps) is the most the cluster
serves. Against the output tokens/s the arrivals offer (their mean rate,
when the process has one, times the mean output; else the arrivals' own
tokens over the run, with a compound-Poisson interval):

    served share = capacity while queued ÷ offered       (95% interval by the delta method)

It falls behind when the share's interval lies below 1, whatever the
horizon (a young batch's capacity is only higher than a settled one's).
When the engines had requests waiting at least `QUEUED_MOST` of the window,
the share decides the rest too: the backlog test's "keeps up" stands only
if the share's interval lies above 1 − `GROWTH_LIMIT`; otherwise the run is
too short, with the horizon at which the interval would settle it. A closed
loop (its arrivals wait for its answers), and so agent session lanes, offer
no demand of their own and are judged by their backlog alone (a plan's probe
opens a lanes run's window at its warm-up barrier:
specplan.simulator.study.plan.probe.window_start_s).

A plan's probe runs several seeds; `seeds_verdict` reads them together: the
worst verdict of one, except that the served shares pooled over the seeds
(their mean, its 95% half-width √Σh²/n) can find a cluster behind that no
seed alone could (at 60 s the replica above reads 93–96% ± 5–8% per seed).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

GROWTH_LIMIT = 0.05
NOISE_Z = 3.0
SETTLE = 2.0  # from empty, N(t) still rises at λ·P(S > t): past 2 × p90 of S that is ~1% of λ
MIN_COMPLETED = 30
OVERWHELMED = 0.5  # too few completions: behind only past this growth (or token shortfall)
SAMPLES = 65
QUEUED_MOST = 0.5  # engines queued this share of the window run at capacity: the served share decides
QUEUED_LEAST = 0.1  # an engine queued less than this share of the window gives no capacity to read
GROUPS = 8  # consecutive stretches of queued steps: the capacity's batch-means interval
Z95 = 1.96

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
    served: ServedShare | None = None

    def fields(self) -> dict[str, Any]:
        """The verdict as summary keys (stored with each plan probe)."""
        served = self.served or ServedShare(math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
        return {"keep_up_verdict": self.verdict, "keep_up_growth": self.growth,
                "keep_up_completed": self.completed, "keep_up_service_p90_s": self.service_p90_s,
                "keep_up_needed_duration_s": self.needed_duration_s, "keep_up_reason": self.reason,
                "keep_up_queued_share": served.queued_share,
                "keep_up_capacity_tokens_per_s": served.capacity_tokens_per_s,
                "keep_up_offered_tokens_per_s": served.offered_tokens_per_s,
                "keep_up_served_share": served.share, "keep_up_served_share_ci95": served.half_width}


@dataclass(frozen=True)
class ServedShare:
    """What the engines emit while requests wait for each of them (their capacity), against what the arrivals
    offer: output tokens/s, and the ratio with its 95% half-width."""

    queued_share: float            # the least share of the window any engine had requests waiting for it
    capacity_tokens_per_s: float   # output tokens/s the engines emitted while queued, summed over engines
    offered_tokens_per_s: float    # output tokens/s the arrivals ask for (less each first token)
    share: float                   # capacity ÷ offered
    half_width: float              # its 95% half-width
    mean_rate_per_s: float = math.nan  # the arrival rate the offer was read at (NaN: the arrivals' own)

    @property
    def low(self) -> float:
        return self.share - self.half_width

    @property
    def high(self) -> float:
        return self.share + self.half_width

    @property
    def at_capacity(self) -> bool:
        """The engines had requests waiting most of the window: the share, not the backlog, decides."""
        return self.queued_share >= QUEUED_MOST

    def text(self) -> str:
        rate = f"{self.mean_rate_per_s:g} req/s × the mean output" if math.isfinite(self.mean_rate_per_s) \
            else "the arrivals' output over the run"
        return (f"while requests waited for every engine ({100 * self.queued_share:.0f}% of the window) it served "
                f"{self.capacity_tokens_per_s:,.0f} output tokens/s, {100 * self.share:.1f}% (95% interval "
                f"{100 * self.low:.1f}–{100 * self.high:.1f}%) of the {self.offered_tokens_per_s:,.0f} offered "
                f"({rate})")

    def needed_window_s(self, window_s: float) -> float:
        """The measurement window at which the interval (narrowing as 1/√window) would clear 1 or 1 − GROWTH_LIMIT."""
        margin = max(1.0 - self.share, self.share - (1.0 - GROWTH_LIMIT), GROWTH_LIMIT / 2)
        return 1.25 * window_s * (self.half_width / margin) ** 2


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


def judge_backlog(requests: Any, warmup_s: float, end_s: float, steps: Any = None,
                  mean_rate_per_s: float | None = None, open_loop: bool = True) -> Backlog:
    """The keep-up verdict of one run whose measurement window is (warmup_s, end_s]; `steps` (the
    run's steps frame) lets a run with too few completions still be judged overloaded, and an open-loop
    run's engines be read at their capacity (the served share; `mean_rate_per_s`: the arrival process's
    own mean rate, when it has one, for the offer)."""
    verdict = backlog_verdict(requests, warmup_s, end_s, steps)
    served = served_share(requests, steps, warmup_s, end_s, mean_rate_per_s) \
        if steps is not None and open_loop else None
    return weighed(verdict, served, warmup_s, end_s)


def weighed(verdict: Backlog, served: ServedShare | None, warmup_s: float, end_s: float) -> Backlog:
    """The backlog's verdict with the served share weighed in: below 1 beyond its interval, the cluster falls
    behind; at capacity most of the window, it keeps up only above 1 − GROWTH_LIMIT beyond its interval."""
    verdict = dataclasses.replace(verdict, served=served)
    if served is None or verdict.verdict == FALLS_BEHIND:
        return verdict
    if served.high < 1.0:
        return dataclasses.replace(verdict, verdict=FALLS_BEHIND,
                                   reason=f"{served.text()}: its capacity is below its demand")
    if verdict.verdict == KEEPS_UP and served.at_capacity and served.low < 1.0 - GROWTH_LIMIT:
        needed = math.ceil(warmup_s + served.needed_window_s(end_s - warmup_s))
        return dataclasses.replace(
            verdict, verdict=TOO_SHORT, needed_duration_s=float(max(needed, verdict.needed_duration_s)),
            reason=f"{served.text()}: the interval cannot yet tell a cluster at its capacity from one below "
                   f"{100 * (1 - GROWTH_LIMIT):.0f}% of its demand")
    return verdict


def backlog_verdict(requests: Any, warmup_s: float, end_s: float, steps: Any = None) -> Backlog:
    """The verdict of the backlog of outstanding requests alone (the served share aside)."""
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


def served_share(requests: Any, steps: Any, warmup_s: float, end_s: float,
                 mean_rate_per_s: float | None = None) -> ServedShare | None:
    """The engines' output tokens/s while requests waited for them against the arrivals' offer; None when an
    engine had requests waiting less than `QUEUED_LEAST` of the window (its capacity was never read) or the
    frames lack what it needs."""
    if "output_tokens" not in requests or "replica" not in steps:
        return None
    capacity = cluster_capacity(requests, steps, warmup_s, end_s)
    offered, offered_se = offered_tokens(requests, end_s, mean_rate_per_s)
    if capacity is None or not offered > 0:
        return None
    queued, tokens_per_s, tokens_se = capacity
    share = tokens_per_s / offered
    half = Z95 * math.hypot(tokens_se, share * offered_se) / offered
    rate = float(mean_rate_per_s) if mean_rate_per_s is not None else math.nan
    return ServedShare(queued, tokens_per_s, offered, share, half, rate)


def offered_tokens(requests: Any, end_s: float, mean_rate_per_s: float | None) -> tuple[float, float]:
    """The output tokens/s the arrivals ask for (each less its first token, which a prefill stage may emit;
    none for a rejected request) and its standard error: the mean rate times the mean ask, or the asks of
    the run's arrivals over (0, end_s] (a compound-Poisson error)."""
    arrival = requests["arrival_s"].to_numpy(dtype=float)
    asked = np.maximum(requests["output_tokens"].to_numpy(dtype=float) - 1.0, 0.0) * ~rejected(requests)
    asked = asked[arrival <= end_s]
    if asked.size < 2:
        return math.nan, math.nan
    if mean_rate_per_s is not None and math.isfinite(mean_rate_per_s):
        return mean_rate_per_s * float(asked.mean()), mean_rate_per_s * float(asked.std(ddof=1)) / math.sqrt(asked.size)
    return float(asked.sum()) / end_s, math.sqrt(float((asked ** 2).sum())) / end_s


def cluster_capacity(requests: Any, steps: Any, warmup_s: float, end_s: float) -> tuple[float, float, float] | None:
    """(the least queued share over engines, their output tokens/s while queued summed, its standard error), or
    None when some engine had requests waiting less than `QUEUED_LEAST` of the window."""
    ready, admitted = waiting_spans(requests)
    routed = requests["replica"].to_numpy(dtype=float) if "replica" in requests else np.full(ready.size, -1.0)
    engines = steps["replica"].to_numpy()
    ends = steps["end_s"].to_numpy(dtype=float)
    tokens = steps["emitted_tokens"].to_numpy(dtype=float)
    least, total, variance = 1.0, 0.0, 0.0
    for engine in np.unique(engines):
        mine = (routed == engine) | ~(routed >= 0)  # its own requests, and those of a shared queue
        read = engine_capacity(ends[engines == engine], tokens[engines == engine], ready[mine], admitted[mine],
                               warmup_s, end_s)
        if read is None:
            return None
        least, total, variance = min(least, read[0]), total + read[1], variance + read[2] ** 2
    return (least, total, math.sqrt(variance)) if engines.size else None


def waiting_spans(requests: Any) -> tuple[np.ndarray, np.ndarray]:
    """When each request could have entered an engine (its prompt's KV ready, else its arrival) and when it
    did (inf while it waits); a rejected request never waits."""
    arrival = requests["arrival_s"].to_numpy(dtype=float)
    admitted = requests["admitted_s"].to_numpy(dtype=float)
    admitted = np.where(np.isfinite(admitted), admitted, np.inf)
    kv_ready = requests["kv_ready_s"].to_numpy(dtype=float) if "kv_ready_s" in requests else np.full(arrival.size, np.nan)
    ready = np.where(np.isfinite(kv_ready) & (kv_ready <= admitted), kv_ready, arrival)
    keep = ~rejected(requests)
    return ready[keep], admitted[keep]


def engine_capacity(ends: np.ndarray, tokens: np.ndarray, ready: np.ndarray, admitted: np.ndarray,
                    warmup_s: float, end_s: float) -> tuple[float, float, float] | None:
    """One engine: (the share of the window it had requests waiting, its output tokens/s over those steps, the
    rate's batch-means standard error over `GROUPS` consecutive stretches), or None below `QUEUED_LEAST`.
    A step is queued when a request waited as the step before it ended (the engine then never idles)."""
    starts = np.concatenate(([-np.inf], ends[:-1]))
    waiting = np.searchsorted(np.sort(ready), starts, side="right") - \
        np.searchsorted(np.sort(admitted), starts, side="right")
    queued = (waiting > 0) & (starts >= warmup_s) & (ends <= end_s)
    spans, emitted = (ends - starts)[queued], tokens[queued]
    share = float(spans.sum()) / (end_s - warmup_s)
    if share < QUEUED_LEAST or spans.size < 2 * GROUPS:
        return None
    rate = float(emitted.sum() / spans.sum())
    groups = np.array_split(np.arange(spans.size), GROUPS)
    span_g = np.array([spans[g].sum() for g in groups])
    emitted_g = np.array([emitted[g].sum() for g in groups])
    se = math.sqrt(float(((emitted_g - rate * span_g) ** 2).sum()) / (GROUPS * (GROUPS - 1))) / float(span_g.mean())
    return share, rate, se


def seeds_verdict(runs: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(verdict, reason) of runs of one cluster under several seeds: behind when any seed is, or when their
    pooled served share lies below 1 beyond its interval; else too short when any seed is; else keeps up."""
    behind = [r for r in runs if r["keep_up_verdict"] == FALLS_BEHIND]
    if behind:
        return FALLS_BEHIND, f"seed {behind[0].get('seed')}: {behind[0].get('keep_up_reason') or 'its backlog grows'}"
    pooled = pooled_share(runs)
    if pooled is not None and pooled[0] + pooled[1] < 1.0:
        return FALLS_BEHIND, (f"pooled over its {len(runs)} seeds, it served {100 * pooled[0]:.1f}% (95% interval "
                              f"{100 * (pooled[0] - pooled[1]):.1f}–{100 * (pooled[0] + pooled[1]):.1f}%) of the "
                              "output tokens/s offered while requests waited for its engines: its capacity is below "
                              "its demand")
    short = [r for r in runs if r["keep_up_verdict"] == TOO_SHORT]
    if short:
        return TOO_SHORT, f"seed {short[0].get('seed')}: {short[0].get('keep_up_reason')}"
    return KEEPS_UP, ""


def pooled_share(runs: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """The mean served share over two or more seeds and its 95% half-width; None unless every seed has one."""
    shares = [finite_or_nan(r.get("keep_up_served_share")) for r in runs]
    halves = [finite_or_nan(r.get("keep_up_served_share_ci95")) for r in runs]
    if len(runs) < 2 or not all(math.isfinite(v) for v in (*shares, *halves)):
        return None
    return sum(shares) / len(runs), math.sqrt(sum(h ** 2 for h in halves)) / len(runs)


def finite_or_nan(value: Any) -> float:
    return float(value) if value is not None else math.nan
