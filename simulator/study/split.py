"""A cluster simulated as independent one-replica runs, in parallel: exact for random routing of Poisson arrivals.

    result = simulate_split(scenario, workers=4)      # a SimResult, as simulate(scenario) returns

Random routing of a Poisson stream of rate λ over N replicas gives each
replica a Poisson stream of rate λ/N, independent of the others (thinning),
and replicas that share nothing else never interact. So the cluster's run is,
in distribution, N one-replica runs at λ/N, each with its own seed: replica
i's is drawn from `seed_sequence(seed, "replica_split", i)`, a named child of
the scenario's seed, so every draw still flows from it. The runs go to a
process pool (`workers`), their records are merged (requests in arrival
order, the replica index set), and the summary is computed once over the
merged records with the whole cluster's scenario, so every figure (per GPU,
percentiles over all requests) means what it means for `simulate`.

Not a sample-path copy of a whole-cluster run (the draws differ), and exact
only for `router: random` with Poisson arrivals; for round_robin or
least_loaded a split run stands in for what random routing would give, and
what that costs in accuracy is measured by `benchmarks/replica_split.py`.
Refused (one line): other arrival kinds (a modulated or closed-loop stream
does not split into independent streams), a `requests` horizon, and a
prefill pool (shared by every decode replica).

A fleet needs fewer runs still: its replicas are independent and identically
distributed, so `simulate_sampled(scenario, k)` simulates k of the N (each at
λ/N, seeds as above) and stands them for all N: every per-request statistic
(percentiles of TTFT, tokens/s/user, ITL) and every per-GPU figure is the
distribution of one replica either way, and only its sampling error grows
(k replicas' requests instead of N's; the plan's seeds and intervals carry
it). The cluster totals (`SAMPLE_SCALED`: throughput, tokens, request and
step counts) are the sample's times N/k; `replicas` and `gpus` are the
fleet's, `replicas_simulated` is k. Its cost does not grow with N.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from specplan.hwprofiles import load_profile
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.streams import seed_sequence
from specplan.simulator.engine.cluster.simulation import SimResult, simulate
from specplan.simulator.engine.core.request_log import REJECT_REASONS
from specplan.simulator.engine.records.draft_record import merged_record
from specplan.simulator.engine.records.step_log import ChunkLog, SpeculationCounters
from specplan.simulator.engine.records.summary import summarize
from specplan.simulator.scenario import Scenario
from specplan.simulator.study.backends import worker_count
from specplan.simulator.study.interrupts import worker_init
from specplan.traces.spec import PoissonArrivals


def check_splittable(scenario: Scenario) -> None:
    arrivals = scenario.workload.arrivals
    if arrivals.KIND != "poisson":
        raise SpecplanError(f"split replicas: needs Poisson arrivals (got {arrivals.KIND}); only a Poisson "
                            "stream splits into independent streams")
    if scenario.horizon.duration_s is None:
        raise SpecplanError("split replicas: needs horizon.duration_s (a 'requests' horizon couples the replicas)")
    if scenario.cluster.prefill is not None:
        raise SpecplanError("split replicas: a cluster.prefill pool is shared by every decode replica")


def replica_seed(seed: int, index: int) -> int:
    """Replica `index`'s seed: a named SeedSequence child of the scenario's seed."""
    return int(seed_sequence(seed, "replica_split", index).generate_state(1, dtype="uint32")[0])


def split_scenarios(scenario: Scenario) -> list[Scenario]:
    """One one-replica scenario per replica, at λ/N, each with its own seed."""
    check_splittable(scenario)
    n = scenario.cluster.replicas
    poisson = scenario.workload.arrivals
    assert isinstance(poisson, PoissonArrivals)
    arrivals = dataclasses.replace(poisson, rate_per_s=poisson.rate_per_s / n)
    workload = dataclasses.replace(scenario.workload, arrivals=arrivals)
    cluster = dataclasses.replace(scenario.cluster, replicas=1, router="round_robin")
    return [dataclasses.replace(scenario, seed=replica_seed(scenario.seed, i), workload=workload, cluster=cluster)
            for i in range(n)]


def run_all(scenarios: list[Scenario], workers: int, itl: bool = False) -> list[SimResult]:
    if workers <= 1 or len(scenarios) == 1:
        return [simulate(s, itl) for s in scenarios]
    with ProcessPoolExecutor(max_workers=min(workers, len(scenarios)), initializer=worker_init,
                             initargs=(os.getpid(),)) as pool:
        return list(pool.map(functools.partial(simulate, itl=itl), scenarios))


def merged_frame(frames: list[pd.DataFrame], order: str) -> pd.DataFrame:
    """The replicas' frames as one, each row's replica set, sorted by `order` (stable)."""
    parts = [f.assign(replica=i) for i, f in enumerate(frames)]
    return pd.concat(parts, ignore_index=True).sort_values(order, kind="stable", ignore_index=True)


def simulate_split(scenario: Scenario, workers: int = 1, itl: bool = False) -> SimResult:
    """The cluster of `scenario` as independent one-replica runs (see the module docstring)."""
    workers = worker_count(workers)
    start = time.perf_counter()
    results = run_all(split_scenarios(scenario), workers, itl)
    requests = merged_frame([r.requests for r in results], "arrival_s")
    chunks = renumbered_chunks(results, requests)
    requests["request_id"] = range(len(requests))
    steps = merged_frame([r.steps for r in results], "end_s")
    end_s = max(r.summary["simulated_s"] for r in results)
    summary = summarize(scenario, requests, steps, end_s, time.perf_counter() - start,
                        load_profile(scenario.hardware.profile), chunks=chunks)
    summary["split_replicas"] = len(results)
    speculation = functools.reduce(SpeculationCounters.merge, (r.speculation for r in results))
    drafts = merged_record([r.drafts for r in results])
    summary["draft_record"] = None if drafts is None else drafts.as_json()
    return SimResult(scenario, summary, requests, steps, speculation, chunks=chunks, drafts=drafts)


def renumbered_chunks(results: list[SimResult], requests: pd.DataFrame) -> ChunkLog | None:
    """Every replica's chunk log with its request ids mapped to the merged frame's row numbers."""
    if any(r.chunks is None for r in results):
        return None
    out = ChunkLog(keep_tokens=all(r.chunks is not None and r.chunks.keep_tokens for r in results))
    for i, result in enumerate(results):
        if result.chunks is None:
            continue
        mine = requests["replica"].to_numpy() == i
        new_id = np.zeros(len(result.requests), dtype=np.int64)
        new_id[requests["request_id"].to_numpy()[mine]] = np.flatnonzero(mine)
        out.extend(result.chunks, new_id)
    return out


SAMPLE_SCALED = ("throughput_tokens_per_s", "tokens_generated", "requests_arrived", "requests_completed",
                 "requests_running", "requests_rejected", "requests_completed_in_window", "engine_steps",
                 "preemptions", "request_steps_deferred", "draft_tokens_truncated",
                 *(f"requests_rejected_{reason}" for reason in REJECT_REASONS))


def simulate_sampled(scenario: Scenario, sample: int, workers: int = 1, itl: bool = False) -> SimResult:
    """A fleet of N replicas as `sample` of them, each at λ/N (see the module docstring)."""
    check_splittable(scenario)
    n = scenario.cluster.replicas
    k = min(sample, n)
    if k < 1:
        raise SpecplanError(f"replica sample must be >= 1, got {sample}")
    poisson = scenario.workload.arrivals
    assert isinstance(poisson, PoissonArrivals)
    arrivals = dataclasses.replace(poisson, rate_per_s=poisson.rate_per_s * k / n)
    part = dataclasses.replace(scenario, workload=dataclasses.replace(scenario.workload, arrivals=arrivals),
                               cluster=dataclasses.replace(scenario.cluster, replicas=k))
    result = simulate_split(part, workers, itl)
    summary = dict(result.summary)
    for key in SAMPLE_SCALED:
        if key in summary:
            scaled = summary[key] * n / k
            summary[key] = round(scaled) if isinstance(summary[key], int) else scaled
    summary.update(replicas=n, gpus=n * scenario.hardware.gpus_per_replica, replicas_simulated=k)
    return dataclasses.replace(result, scenario=scenario, summary=summary)
