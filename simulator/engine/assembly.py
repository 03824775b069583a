"""Scenario → the engine's parts, built one way for every driver of the decode core.

    parts = assemble(scenario)            profile, drafter, EngineConfig, the policy's params
    core = parts.core(log, steps, index, prompt_cache, chunks)
                                          a DecodeCore with its own policy instance and every rule
                                          chosen for its engine (specplan.simulator.engine.core.decode.Rules),
                                          its recorders bundled (specplan.simulator.engine.records.recorders)

The simulator's replicas (specplan.simulator.engine.cluster.simulation), the
reference engine (specplan.validation.engine), the tests' driver and the
benchmarks all build their cores here, so they run the same profile,
drafter, limits and policy for the same scenario. The reference engine
passes the profile it measured against instead of the scenario's. What
differs between engines is chosen here, once: every rule is an object, so
the step never tests a mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.profile import StepProfile
from specplan.policies.base import Policy
from specplan.policies.registry import make_policy
from specplan.simulator.core.streams import seed_sequence
from specplan.simulator.drafters.drafter import Drafter, build_drafter
from specplan.simulator.engine.budget import token_budget
from specplan.simulator.engine.caches import kv_caches
from specplan.simulator.engine.cluster.kv_tiers import ReplicaTiers
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.core.decode import DecodeCore, Rules
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.phases import prefill_phases
from specplan.simulator.engine.price.context import context_rule, load_rule
from specplan.simulator.engine.price.pricer import StepPricer, quote_book
from specplan.simulator.engine.prompts import prompts
from specplan.simulator.engine.records.draft_record import draft_tally
from specplan.simulator.engine.records.recorders import (
    ChunkEmission,
    DraftSample,
    DraftSampler,
    Emission,
    NoDraftSample,
    NoPhases,
    PolicyLearns,
    RankPhases,
    Recorders,
)
from specplan.simulator.engine.records.step_log import ChunkLog, SpeculationCounters, StepLog
from specplan.simulator.engine.speculator import AcceptanceRows, speculator
from specplan.simulator.engine.step_modes import engine_modes, launch_count, step_modes
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.policy import policy_params


@dataclass(frozen=True)
class EngineParts:
    """What every decode core of a scenario shares; `core()` builds one with a fresh policy."""

    scenario: Scenario
    profile: StepProfile
    drafter: Drafter
    config: EngineConfig
    policy_params: Any
    # each log's requests' acceptance rows, made in blocks and shared by the cores that admit them
    acceptance_rows: WeakKeyDictionary[RequestLog, AcceptanceRows] = field(
        default_factory=WeakKeyDictionary, compare=False, repr=False)

    def policy(self) -> Policy:
        return make_policy(self.scenario.policy.name, self.policy_params, self.drafter.block_size)

    def core(self, log: RequestLog, steps: StepLog, index: int = 0, prompt_cache: ReplicaTiers | None = None,
             chunks: ChunkLog | None = None) -> DecodeCore:
        """A core with its own policy and the rules its engine runs by, its recorders wired."""
        config, drafter, policy = self.config, self.drafter, self.policy()
        speculates = policy.drafts and config.block_size > 0
        modes = step_modes(config, ragged=speculates and policy.length_setting != "fixed")
        pricer = StepPricer(self.profile, drafter.draft_ms, config, policy.pays_scheduling(),
                            getattr(drafter.latency, "uses_positions", True), modes)
        reads_context = pricer.uses_context or drafter.latency.uses_context
        tally = draft_tally(drafter) if speculates else None
        sampler: DraftSampler = NoDraftSample() if tally is None else DraftSample(tally, log)
        recorders = Recorders(log, steps, chunks, SpeculationCounters(config.block_size),
                              RankPhases() if pricer.loads else NoPhases(), sampler)
        budget = token_budget(config, policy.fits_budget, speculates)
        emissions: list[Emission] = [] if chunks is None else [ChunkEmission(chunks)]
        if policy.learns:
            emissions.append(PolicyLearns(policy))
        drafts = speculator(policy, drafter, quote_book(pricer, reads_context), budget, sampler, self.scenario.seed,
                            index, config.batch_requests)
        acceptance = self.acceptance_rows.get(log)
        if acceptance is None or acceptance.rule != drafts.row_acceptance:  # one rule per log: its policy's
            acceptance = self.acceptance_rows[log] = AcceptanceRows(drafts.row_acceptance, drafter.block_size)
        rules = Rules(kv=kv_caches(config), budget=budget, phases=prefill_phases(config, speculates),
                      prompts=prompts(config.chunked, prompt_cache), speculator=drafts, acceptance=acceptance,
                      context=context_rule(config, reads_context), loads=load_rule(config, pricer.loads),
                      emissions=tuple(emissions))
        return DecodeCore(config, rules, recorders, index)


def assemble(scenario: Scenario, profile: StepProfile | None = None) -> EngineParts:
    """The engine's parts for `scenario` (its own profile unless one is given)."""
    profile = load_profile(scenario.hardware.profile) if profile is None else profile
    drafter = build_drafter(scenario.drafter, profile, seed_sequence(scenario.seed, "calibration"))
    config = EngineConfig.from_scenario(scenario, profile, drafter.block_size)
    return EngineParts(scenario, profile, drafter, config, policy_params(scenario.policy))


def prices_extend_by_launches(scenario: Scenario) -> bool:
    """Whether the scenario's engine prices a step carrying prompt tokens by its kernel launches (step_modes.
    launch_count): where `engine.cuda_graph.extend_op_us` is accepted, so a calibration's extend term applies."""
    return launch_count(engine_modes(assemble(scenario).config, False)) is not None
