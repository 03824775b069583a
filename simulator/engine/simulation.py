"""Scenario → SimPy run → per-request and per-step records → summary.

    result = simulate(scenario)
    result.summary      dict with the results contract keys (DESIGN.md §3)
    result.requests     pandas DataFrame, one row per arrived request
    result.steps        pandas DataFrame, one row per engine step
    result.spec         speculative-decoding counters of the whole run, vLLM's meaning (SpecCounters)

This is the notebook API; `specplan run` is a thin face over it.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd
import simpy

from specplan.hwprofiles import load_profile
from specplan.policies.registry import make_policy
from specplan.simulator.core.streams import seed_sequence, stream
from specplan.simulator.drafters.drafter import Drafter, build_drafter
from specplan.simulator.engine.bench_metrics import bench_summary
from specplan.simulator.engine.cluster import Router
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.intake import FrontDoor
from specplan.simulator.engine.metrics import summarize
from specplan.simulator.engine.records import ChunkLog, RequestLog, SpecCounters, StepLog
from specplan.simulator.engine.replica import Replica
from specplan.simulator.scenario import Scenario
from specplan.traces.workload import ArrivalBudget, start_workload


@dataclass
class SimResult:
    scenario: Scenario
    summary: dict[str, Any]
    requests: pd.DataFrame
    steps: pd.DataFrame
    spec: SpecCounters


class Simulation:
    """The cluster wired together: workload → router → replicas → records."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.env = simpy.Environment()
        self.profile = load_profile(scenario.hardware.profile)
        self.drafter: Drafter = build_drafter(
            scenario.drafter, self.profile, seed_sequence(scenario.seed, "calibration")
        )
        self.log = RequestLog()
        self.steps = StepLog()
        self.finished = 0
        self.all_done = self.env.event()
        self.front = FrontDoor(scenario, self.drafter, self.log)
        self.config = EngineConfig.from_scenario(scenario, self.profile, self.drafter.block_size)
        self.replicas = [
            Replica(self.env, i, self.config, make_policy(scenario.policy, self.drafter.block_size), self.drafter,
                    self.profile, scenario.seed, self.log, self.steps, self.on_done)
            for i in range(scenario.cluster.replicas)
        ]
        self.router = Router(scenario.cluster.router, self.replicas, stream(scenario.seed, "router"))
        self.budget: ArrivalBudget = start_workload(self.env, scenario, self.submit, self.front.domain_mix)
        if self.budget.bench is not None:  # a benchmark client reads every step's chunks (its ITL)
            for replica in self.replicas:
                replica.core.chunks = ChunkLog()

    def submit(self, prompt: int, output: int, domain: int) -> simpy.Event:
        rid, event = self.front.arrive(self.env, prompt, output, domain)
        self.replicas[self.router.choose()].submit(rid)
        return event

    def on_done(self, rid: int) -> None:
        self.finished += 1
        self.front.done(rid)
        cap = self.budget.requests
        if cap is not None and self.finished >= cap and not self.all_done.triggered:
            self.all_done.succeed()

    def run(self) -> SimResult:
        start = time.perf_counter()
        duration_s = self.budget.duration_s  # the horizon's, or None (a benchmark client runs to its last prompt)
        until = self.all_done if duration_s is None else duration_s
        self.env.run(until=until)
        wall_s = time.perf_counter() - start
        for replica in self.replicas:
            replica.core.drain()
        requests = self.log.frame(self.front.domains)
        steps = self.steps.frame()
        summary = summarize(self.scenario, requests, steps, self.env.now, wall_s, self.profile,
                            self.budget.summary_counts())
        if self.budget.bench is not None:
            chunks = ChunkLog.merge([r.core.chunks for r in self.replicas if r.core.chunks is not None])
            gpus = self.scenario.cluster.replicas * self.scenario.hardware.gpus_per_replica
            summary.update(bench_summary(requests, chunks, self.budget.bench, gpus))
        spec = functools.reduce(SpecCounters.merge, (r.core.spec for r in self.replicas))
        return SimResult(self.scenario, summary, requests, steps, spec)


def simulate(scenario: Scenario) -> SimResult:
    """Run one scenario to its horizon and summarise it."""
    return Simulation(scenario).run()
