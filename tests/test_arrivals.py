"""Arrival processes: empirical gap mean and variance against the analytic values.

Each check runs R independent replications (their own named streams), takes
each replication's sample mean and variance of the gaps, and asserts that
the analytic value lies in the 99.9% confidence interval of the
replications' average. No golden seeded values.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import simpy
from scipy import stats

from specplan.simulator.core.streams import stream
from specplan.simulator.engine.cluster.workload import closed_loop_user
from specplan.traces.arrivals import (
    GammaRenewal,
    Mmpp2,
    PiecewiseRate,
    Poisson,
    ThinkTime,
    arrival_process,
)
from specplan.traces.spec import MmppArrivals, PiecewiseArrivals, PoissonArrivals

REPLICATIONS = 30


def gaps_of(process, replication: int, n: int) -> np.ndarray:
    times = np.fromiter(itertools.islice(process.times(stream(11, "test.arrivals", replication)), n + 1), float)
    return np.diff(times)


def assert_in_ci(estimates: np.ndarray, analytic: float, what: str) -> None:
    half = stats.t.ppf(0.9995, estimates.size - 1) * estimates.std(ddof=1) / np.sqrt(estimates.size)
    mean = estimates.mean()
    assert abs(mean - analytic) <= half, f"{what}: analytic {analytic:.6g} outside {mean:.6g} ± {half:.3g}"
    assert half < 0.1 * abs(analytic), f"{what}: interval ±{half:.3g} too wide to test anything"


PROCESSES = {
    "poisson": (Poisson(4.0), 4000),
    "gamma smooth (cv 0.5)": (GammaRenewal(2.0, 0.5), 4000),
    "gamma bursty (cv 3)": (GammaRenewal(2.0, 3.0), 20000),
    "mmpp on/off": (Mmpp2(rate_on_per_s=20.0, rate_off_per_s=0.5, mean_on_s=2.0, mean_off_s=6.0), 20000),
    "piecewise with a silent segment": (PiecewiseRate((0.0, 10.0, 30.0), (5.0, 0.0, 1.0), 50.0), 20000),
}


@pytest.mark.parametrize("name", PROCESSES)
def test_gap_mean_and_variance_match_the_analytic_values(name):
    process, n = PROCESSES[name]
    samples = [gaps_of(process, r, n) for r in range(REPLICATIONS)]
    assert_in_ci(np.array([g.mean() for g in samples]), process.mean_gap_s, f"{name} mean")
    assert_in_ci(np.array([g.var(ddof=1) for g in samples]), process.var_gap_s2, f"{name} variance")


def test_closed_loop_think_time_with_instant_service():
    think = ThinkTime(think_s=2.0, think_cv=0.7)
    means, variances = [], []
    for r in range(REPLICATIONS):
        env = simpy.Environment()
        arrivals: list[float] = []

        def submit(prompt, output, domain, env=env, arrivals=arrivals):
            arrivals.append(env.now)
            done = env.event()
            done.succeed()
            return done

        budget = type("Budget", (), {"arrived": 0, "allows": lambda self, now: now < 4000.0})()
        source = type("Source", (), {"next": lambda self: (1, 1, 0)})()
        env.process(closed_loop_user(env, stream(3, "test.think", r), think, source, submit, budget))
        env.run()
        gaps = np.diff(arrivals)
        means.append(gaps.mean())
        variances.append(gaps.var(ddof=1))
    assert_in_ci(np.array(means), think.mean_gap_s, "think mean")
    assert_in_ci(np.array(variances), think.var_gap_s2, "think variance")


def test_fixed_think_time_has_no_spread():
    think = ThinkTime(think_s=1.5, think_cv=0.0)
    pause = think.pauses(stream(1, "test"))
    assert {pause() for _ in range(10)} == {1.5}
    assert think.var_gap_s2 == 0.0


def test_no_cap_on_poisson_gaps():
    gaps = gaps_of(Poisson(1.0), 0, 100_000)
    # 100k exponential gaps: about 34 exceed 8× the mean; a cap at a few means would remove them.
    assert gaps.max() > 8.0
    assert (gaps > 5.0).sum() > 300


def test_analytic_identities():
    mmpp = Mmpp2(20.0, 0.5, 2.0, 6.0)
    assert mmpp.mean_gap_s == pytest.approx(1.0 / mmpp.mean_rate_per_s, rel=1e-12)
    same_rates = Mmpp2(3.0, 3.0, 1.0, 4.0)  # modulation without effect: Poisson
    assert same_rates.var_gap_s2 == pytest.approx(1.0 / 9.0, rel=1e-10)
    curve = PiecewiseRate((0.0, 10.0, 30.0), (5.0, 0.0, 1.0), 50.0)
    assert curve.mean_gap_s == pytest.approx(1.0 / curve.mean_rate_per_s, rel=1e-9)
    flat = PiecewiseRate((0.0, 7.0), (2.0, 2.0), 20.0)
    assert flat.var_gap_s2 == pytest.approx(0.25, rel=1e-9)
    assert GammaRenewal(2.0, 1.0).var_gap_s2 == Poisson(2.0).var_gap_s2


def test_thinning_follows_the_rate_curve():
    curve = PiecewiseRate((0.0, 10.0, 30.0), (5.0, 0.0, 1.0), 50.0)
    times = np.fromiter(itertools.islice(curve.times(stream(5, "test")), 50_000), float)
    phase = np.mod(times, 50.0)
    assert not ((phase >= 10.0) & (phase < 30.0)).any()
    periods = times[-1] / 50.0
    busy = ((phase < 10.0).sum() / periods) / 10.0
    assert busy == pytest.approx(5.0, rel=0.03)


def test_specs_build_their_processes():
    assert isinstance(arrival_process(PoissonArrivals(rate_per_s=2.0)), Poisson)
    mmpp = arrival_process(MmppArrivals(rate_on_per_s=5.0, mean_on_s=1.0, mean_off_s=1.0))
    assert mmpp.mean_rate_per_s == pytest.approx(2.5)
    diurnal = arrival_process(PiecewiseArrivals(times_s=(0.0, 43200.0), rates_per_s=(1.0, 3.0), period_s=86400.0))
    assert diurnal.mean_rate_per_s == pytest.approx(2.0)
