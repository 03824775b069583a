"""Scenario → the engine's parts, built one way for every driver of the decode core.

    parts = assemble(scenario)            profile, drafter, EngineConfig, the policy's params
    core = parts.core(log, steps, index, prompt_cache, chunks)
                                          a DecodeCore with its own policy instance, the token budget's
                                          rule and the KV caches chosen for its engine, wired whole

The simulator's replicas (specplan.simulator.engine.simulation), the
reference engine (specplan.validation.engine), the tests' driver and the
benchmarks all build their cores here, so they run the same profile,
drafter, limits and policy for the same scenario. The reference engine
passes the profile it measured against instead of the scenario's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.profile import StepProfile
from specplan.policies.base import Policy
from specplan.policies.registry import make_policy
from specplan.simulator.core.streams import seed_sequence
from specplan.simulator.drafters.drafter import Drafter, build_drafter
from specplan.simulator.engine.budget import token_budget
from specplan.simulator.engine.caches import kv_caches
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.decode import DecodeCore
from specplan.simulator.engine.phases import prefill_phases
from specplan.simulator.engine.records import ChunkLog, RequestLog, StepLog
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

    def policy(self) -> Policy:
        return make_policy(self.scenario.policy.name, self.policy_params, self.drafter.block_size)

    def core(self, log: RequestLog, steps: StepLog, index: int = 0, prompt_cache: Any = None,
             chunks: ChunkLog | None = None) -> DecodeCore:
        """A core with its own policy, the token budget's rule, the KV caches and the prefill schedule its engine
        runs by."""
        policy = self.policy()
        speculates = policy.drafts and self.config.block_size > 0
        return DecodeCore(self.config, policy, self.drafter, self.profile, log, steps, self.scenario.seed,
                          budget=token_budget(self.config, policy.fits_budget, speculates),
                          kv=kv_caches(self.config), phases=prefill_phases(self.config), index=index,
                          prompt_cache=prompt_cache, chunks=chunks)


def assemble(scenario: Scenario, profile: StepProfile | None = None) -> EngineParts:
    """The engine's parts for `scenario` (its own profile unless one is given)."""
    profile = load_profile(scenario.hardware.profile) if profile is None else profile
    drafter = build_drafter(scenario.drafter, profile, seed_sequence(scenario.seed, "calibration"))
    config = EngineConfig.from_scenario(scenario, profile, drafter.block_size)
    return EngineParts(scenario, profile, drafter, config, policy_params(scenario.policy))
