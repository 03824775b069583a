"""Scenario → SimPy run → per-request and per-step records → summary.

    result = simulate(scenario)
    result.summary      dict with the results contract keys (docs/reference/outputs.md)
    result.requests     pandas DataFrame, one row per arrived request
    result.steps        pandas DataFrame, one row per engine step
    result.speculation  speculative-decoding counters of the whole run, vLLM's meaning (SpeculationCounters)
    result.prefill_steps pandas DataFrame, one row per prefill step of a prefill pool (None without one)
    result.drafts       what the drafts did, sampled: acceptance by position, the head's reliability
                        (DraftRecord; None without drafts); summary.json keeps it as `draft_record`

This is the notebook API; `specplan run` is a thin face over it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import simpy

from specplan.engines import EngineTraits
from specplan.simulator.core.streams import stream
from specplan.simulator.drafters.drafter import Drafter
from specplan.simulator.engine.assembly import EngineParts, assemble
from specplan.simulator.engine.cluster.kv_tiers import (
    LoadingClock,
    ReplicaTiers,
    replica_tiers,
    tier_fields,
)
from specplan.simulator.engine.cluster.prefill import PrefillPool, prefill_summary
from specplan.simulator.engine.cluster.prefill_front import prefill_front
from specplan.simulator.engine.cluster.prefix_cache import cache_fields
from specplan.simulator.engine.cluster.replica import Replica
from specplan.simulator.engine.cluster.router import Router
from specplan.simulator.engine.cluster.workload import ArrivalHorizon, start_workload
from specplan.simulator.engine.config import EngineConfig, resolved
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.core.step import PRICED
from specplan.simulator.engine.intake import FrontDoor, reject_misfit
from specplan.simulator.engine.records.bench_metrics import bench_summary
from specplan.simulator.engine.records.draft_record import DraftRecord
from specplan.simulator.engine.records.recorders import merged_counts
from specplan.simulator.engine.records.step_log import ChunkLog, SpeculationCounters, StepLog
from specplan.simulator.engine.records.summary import summarize
from specplan.simulator.scenario import Scenario
from specplan.traces.errors import TraceError
from specplan.traces.lanes import Lanes, session_fields
from specplan.traces.spec import BenchClientArrivals


@dataclass
class SimResult:
    scenario: Scenario
    summary: dict[str, Any]
    requests: pd.DataFrame
    steps: pd.DataFrame
    speculation: SpeculationCounters
    prefill_steps: pd.DataFrame | None = None
    chunks: ChunkLog | None = None  # tokens each request received at each decode step (ITL)
    drafts: DraftRecord | None = None  # what the drafts did (specplan.simulator.engine.records.draft_record)


class Simulation:
    """The cluster wired together: workload → router → replicas → records."""

    def __init__(self, scenario: Scenario, itl: bool = False) -> None:
        self.scenario = scenario
        self.env = simpy.Environment()
        parts = assemble(scenario)
        self.profile, self.config = parts.profile, parts.config
        self.ranks = 1 if parts.config.dp is None else parts.config.dp.ranks
        self.drafter: Drafter = parts.drafter
        self.log = RequestLog()
        self.steps = StepLog()
        self.finished = 0
        self.all_done = self.env.event()
        self.front = FrontDoor(scenario, self.drafter, self.log)
        n = scenario.cluster.replicas
        self.prompt_caches = replica_caches(scenario, n, self.ranks, lambda: self.env.now, parts.config.serving)
        bench = isinstance(scenario.workload.arrivals, BenchClientArrivals)
        self.pool = self.prefill_pool(scenario)
        self.replicas = [self.replica(parts, i, chunk_log(itl, bench)) for i in range(n)]
        self.router = Router(scenario.cluster.router, self.replicas, stream(scenario.seed, "router"),
                             sticky_ranks(parts.config))
        self.session_keys: dict[int, int] = {}   # behind a prefill pool: a request's conversation, for the router
        self.arrivals: ArrivalHorizon = start_workload(self.env, scenario, self.submit, self.front.domain_mix)

    def replica(self, parts: EngineParts, index: int, chunks: ChunkLog | None) -> Replica:
        """Decode replica `index` with its prefix tiers, its clock waiting for their host loads when it has one, and
        the prefill front its prefill mode runs (the pool's, a fixed-rate stage's, or chunked in the core)."""
        tiers = self.prompt_caches[index] if self.prompt_caches else None
        core = parts.core(self.log, self.steps, index, tiers, chunks)
        clock = LoadingClock(core, tiers) if tiers is not None and tiers.host is not None else PRICED
        return Replica(self.env, core, self.log, self.on_done, prefill_front(self.env, core, self.log, self.pool), clock)

    def prefill_pool(self, scenario: Scenario) -> PrefillPool | None:
        """With cluster.prefill: the pool every arrival goes through, feeding the decode replicas."""
        if scenario.cluster.prefill is None:
            return None
        return PrefillPool(self.env, scenario.cluster.prefill, scenario.seed, self.log, self.kv_ready)

    def submit(self, prompt: int, output: int, domain: int, blocks: Sequence[int] | None = None,
               key: int | None = None) -> simpy.Event:
        """A request arrives (`key`: its conversation, for session routing); the event fires when it ends."""
        rid, event = self.front.arrive(self.env, prompt, output, domain)
        if self.pool is None:
            replica, rank = self.router.route(key)
            self.replicas[replica].submit(rid, blocks, rank)
        elif reject_misfit(self.log, self.config, rid):  # the decode replicas' rule, asked before prefilling
            self.on_done(rid)
        else:
            if key is not None:
                self.session_keys[rid] = key
            self.pool.submit(rid, prompt, None if blocks is None else list(map(int, blocks)), first=True)
        return event

    def kv_ready(self, rid: int, first: bool) -> None:
        """A request's KV has reached the decode pool: to a decode replica by the cluster's router."""
        replica, rank = self.router.route(self.session_keys.pop(rid, None))
        if rank is not None:
            self.replicas[replica].core.remember(rid, None, rank)
        self.replicas[replica].receive(rid, first)

    def on_done(self, rid: int) -> None:
        self.finished += 1
        replica = int(self.log["replica"][rid])
        if self.prompt_caches and replica >= 0:
            self.prompt_caches[replica].forget(rid)
        self.front.done(rid)
        cap = self.arrivals.requests
        if cap is not None and self.finished >= cap and not self.all_done.triggered:
            self.all_done.succeed()

    def run(self) -> SimResult:
        start = time.perf_counter()
        duration_s = self.arrivals.duration_s  # the horizon's, or None (a benchmark client runs to its last prompt)
        lanes = self.arrivals.lanes
        self.env.run(until=lanes.end if lanes is not None else self.all_done if duration_s is None else duration_s)
        window_end_s = self.window_end_s()
        wall_s = time.perf_counter() - start
        for replica in self.replicas:
            replica.core.drain()
        requests = self.log.frame(self.front.domains)
        steps = self.steps.frame()
        counts: dict[str, Any] = dict(self.arrivals.summary_counts())
        measured = self.scenario if lanes is None else measured_after_barrier(self.scenario, lanes)
        prefill_steps = None
        if self.pool is not None:
            prefill_steps = self.pool.step_frame()
            requests = requests.assign(**self.pool.request_columns(len(requests)))
            warmup = measured.horizon.warmup_s
            counts.update(prefill_summary(self.pool, prefill_steps, warmup, max(window_end_s - warmup, 1e-12)))
        recorded, speculation, drafts, chunks = merged_counts([r.core.recorders for r in self.replicas], self.ranks)
        counts.update(recorded)
        if self.prompt_caches:
            counts.update(cache_fields([cache for c in self.prompt_caches for cache in c.gpu_caches()],
                                       sum(c.looked_up_tokens for c in self.prompt_caches),
                                       sum(c.saved_tokens for c in self.prompt_caches)))
            counts.update(tier_fields(self.prompt_caches))
        if lanes is not None:
            counts.update(session_fields(lanes, window_end_s))
        summary = summarize(measured, requests, steps, self.env.now, wall_s, self.profile, counts, chunks,
                            window_end_s)
        if self.arrivals.bench is not None and chunks is not None:
            summary.update(bench_summary(requests, chunks, self.arrivals.bench, int(summary["gpus"])))
        summary["draft_record"] = None if drafts is None else drafts.as_json()
        return SimResult(self.scenario, summary, requests, steps, speculation, prefill_steps, chunks, drafts)


    def window_end_s(self) -> float:
        """Where the measurement window ends: the end of the run, or where a trace ran out before the horizon
        (its idle tail would dilute throughput). A trace that ran out within the warm-up is refused."""
        ran_out, warmup = self.arrivals.ran_out_s, self.scenario.horizon.warmup_s
        if ran_out is None or self.arrivals.duration_s is None:
            return self.env.now
        if ran_out <= warmup:
            raise TraceError(f"{self.arrivals.replay.file.path}: the trace's window runs out at {ran_out:g} s of "
                             f"simulated time, within horizon.warmup_s ({warmup:g} s): no request is measured; "
                             "lower warmup_s or widen the trace window")
        return ran_out


def replica_caches(scenario: Scenario, replicas: int, ranks: int, now: Callable[[], float],
                   serving: EngineTraits) -> list[ReplicaTiers]:
    """Aggregated serving with engine.prefix_cache: each replica's tiers (a GPU cache per attention rank, a host
    tier behind them), asked at admission."""
    spec = scenario.engine.prefix_cache
    if spec is None:
        return []
    capacity = spec.capacity_tokens or resolved(scenario.engine.kv_capacity_tokens, "engine.kv_capacity_tokens")
    return [replica_tiers(spec, capacity, ranks, scenario.engine.max_batch_requests, now, serving)
            for _ in range(replicas)]


def sticky_ranks(config: EngineConfig) -> int:
    """The attention ranks the session router spreads conversations over: the DP ranks, unless the engine picks
    a rank at admission (most_free_kv), where a pin has no effect."""
    dp = config.dp
    return 1 if dp is None or dp.balance == "most_free_kv" else dp.ranks


def measured_after_barrier(scenario: Scenario, lanes: Lanes) -> Scenario:
    """Session lanes measure from their warm-up barrier: the scenario's warm-up counted from there."""
    start = (lanes.window_start_s or 0.0) + scenario.horizon.warmup_s
    return dataclasses.replace(scenario, horizon=dataclasses.replace(scenario.horizon, warmup_s=start))


def chunk_log(itl: bool, bench: bool) -> ChunkLog | None:
    """Every step's emissions, when the ITL statistics or a benchmark client read them (whose SGLang ITL
    also reads each chunk's tokens)."""
    return ChunkLog(keep_tokens=bench) if itl or bench else None


def simulate(scenario: Scenario, itl: bool = False) -> SimResult:
    """Run one scenario to its horizon and summarise it; `itl` logs every step's emissions for the
    inter-token latency statistics (NaN without: the log costs the engine's fastest path ~40%)."""
    return Simulation(scenario, itl).run()
