"""How long a plan for a fleet of hundreds of replicas takes, and what sampling its probes costs in accuracy.

    .venv/bin/python benchmarks/fleet_plan.py [--rate 4800] [--check-rate 384] [--seeds 2] [--sample 8] [--workers 2]

Workload: benchmarks/replica_split.py's (Llama-3.1-8B on H200, MTP-1,
Poisson arrivals, lognormal prompts and outputs, the fixed-rate prefill
stage), router random, a 30-s horizon (5-s warm-up), SLA tps_user_p10 >= 200
and ttft_p99_s <= 1. Two plans:

1. the fleet: `--rate` req/s (4,800: about 200 replicas), each probe of
   more than `--sample` replicas simulating that many of them at their
   share of the demand (`specplan.simulator.study.split.simulate_sampled`)
   on `--workers` processes;
   prints the answer, the probes it took and the wall time;
2. the check: `--check-rate` req/s (384: about 16 replicas), planned twice,
   sampled and whole (`replica_sample=0`), printing both answers, the SLA
   statistics of each at both answers, and both wall times;
3. the cost of sampling at one size: the check's answer simulated whole and
   sampled for `--compare-seeds` seeds (0, 1, ...), each SLA statistic's mean
   ± its 95% interval over seeds for both, and the wall time of one whole
   run of the fleet's answer against one sampled run.
"""

from __future__ import annotations

import argparse
import time

from replica_split import interval, scenario

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario.study import Bound
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.target import Target
from specplan.simulator.study.split import simulate_sampled

BOUNDS = (Bound("tps_user_p10", ">=", 200.0), Bound("ttft_p99_s", "<=", 1.0))


def plan(rate: float, seeds: int, sample: int, workers: int):
    start = time.perf_counter()
    result = plan_capacity(scenario(1, rate, 30.0, 0, "random"), Target("rate_per_s", rate, BOUNDS, seeds=seeds),
                           RunOptions(workers=workers, progress=False), PlanOptions(max_replicas=1024, replica_sample=sample))
    return result.variants[0], time.perf_counter() - start


def describe(name: str, variant, wall: float) -> None:
    sizes = ", ".join(f"{p.replicas}{'*' if p.simulated < p.replicas else ''}"
                      f"{'+' if p.meets_sla else '-'}" for p in variant.probes)
    print(f"{name}: {variant.replicas} replicas ({variant.gpus} GPUs) in {wall:.1f} s; "
          f"{len(variant.probes)} probes (* sampled, +/- meets the SLA): {sizes}")
    for probe in (variant.chosen, variant.one_fewer):
        if probe is not None:
            stats = "; ".join(f"{k} {m:.3g} ± {h:.2g}" for k, (m, h) in probe.stats.items())
            print(f"    at {probe.replicas} ({probe.simulated} simulated): {stats}; {probe.keep_up}")


def compare(replicas: int, rate: float, seeds: int, sample: int) -> None:
    """Whole against sampled at one size: each SLA statistic and throughput per GPU over seeds."""
    runs: dict[str, list[dict]] = {"whole": [], "sampled": []}
    for seed in range(seeds):
        s = scenario(replicas, rate, 30.0, seed, "random")
        runs["whole"].append(simulate(s).summary)
        runs["sampled"].append(simulate_sampled(s, sample).summary)
    print(f"{replicas} replicas at {rate:g} req/s, {seeds} seeds, whole against {sample} sampled:")
    for key in (*(b.key for b in BOUNDS), "throughput_tokens_per_s_per_gpu"):
        (mw, hw), (ms, hs) = (interval([r[key] for r in runs[n]]) for n in ("whole", "sampled"))
        print(f"    {key}: whole {mw:.4g} ± {hw:.2g}, sampled {ms:.4g} ± {hs:.2g} ({100 * (ms / mw - 1):+.1f}%)")


def one_run_walls(replicas: int, rate: float, sample: int) -> None:
    s = scenario(replicas, rate, 30.0, 0, "random")
    walls = []
    for run in (lambda: simulate(s), lambda: simulate_sampled(s, sample)):
        start = time.perf_counter()
        run()
        walls.append(time.perf_counter() - start)
    print(f"one run of {replicas} replicas: whole {walls[0]:.1f} s, {sample} sampled {walls[1]:.1f} s "
          f"({walls[0] / walls[1]:.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=4800.0)
    parser.add_argument("--check-rate", type=float, default=384.0)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--sample", type=int, default=8)
    parser.add_argument("--compare-seeds", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="processes for a sampled probe's replicas")
    args = parser.parse_args()
    fleet, wall = plan(args.rate, args.seeds, args.sample, args.workers)
    describe(f"fleet at {args.rate:g} req/s, sampled", fleet, wall)
    check, wall = plan(args.check_rate, args.seeds, args.sample, args.workers)
    describe(f"check at {args.check_rate:g} req/s, sampled", check, wall)
    describe(f"check at {args.check_rate:g} req/s, whole", *plan(args.check_rate, args.seeds, 0, args.workers))
    if check.replicas is not None:
        compare(check.replicas, args.check_rate, args.compare_seeds, args.sample)
    if fleet.replicas is not None:
        one_run_walls(fleet.replicas, args.rate, args.sample)


if __name__ == "__main__":
    main()
