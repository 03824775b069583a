"""Each serving engine's habits, one table per engine and version: what the rest of specplan asks.

An inference engine decides many small things the same way every time: how
it captures CUDA graphs and pads a step to them, what host time a
speculating cycle adds, whether its token budget cuts drafts or defers
requests, whether prompt chunks ride in decode steps or run apart, how it
sends requests to data-parallel attention ranks, what its benchmark client
measures, and how its launch line spells a deployment. Those habits live
here and nowhere else: the engine model, the benchmark metrics, the launch
configurations and the replication cases read an `EngineTraits` row and
never name an engine themselves.

    traits = engine_traits("sglang", "0.5.14")     a row: (name, version) → EngineTraits
    traits = engine_traits("vllm")                  the newest row of an engine
    traits = engine_traits("none")                  no engine's habits (a profile from a CSV, a roofline, ...)
    backend_traits("sglang 0.5.14")                 the row a profile's `backend:` provenance names
    step_mode(traits, shape, setup)                 how that engine runs one step: graph, piecewise or
                                                    eager, why, and its all-to-all mode (engines.modes)
    traits.caps.report(facts)                       the engine's own caps and which binds (engines.caps)
    scenario_of_launch(line, profile)               a `vllm serve` / `sglang.launch_server` line read back
                                                    into a scenario mapping (engines.launch_line, `specplan fit`)
    traits.aic                                      the engine in AIConfigurator's database: its memory
                                                    fraction's kind, the built-ins' table version, its twin
                                                    engine (hwprofiles.aiconfigurator reads them)

The rows are in one module per engine (`specplan.engines.vllm`,
`specplan.engines.sglang`, `specplan.engines.trtllm`): a new engine version
is a new row there, with the source of each habit that differs. A version
asked for that has no row of its own takes the newest row at or below it
(say "0.5.13" and get "0.5.12.post1"), so a row holds until a later version
changes a habit.

Layer: below the leaf packages (hwprofiles, traces, policies), on nothing but
specplan's error base, so every layer may ask it.
"""

from __future__ import annotations

from specplan.engines.caps import CapFacts, CapReport, CapValue
from specplan.engines.modes import REASONS, StepMode, step_mode
from specplan.engines.steps import ModeSetup, StepShape
from specplan.engines.table import (
    ENGINE_NAMES,
    NO_ENGINE,
    EngineTraits,
    backend_traits,
    engine_traits,
    engine_versions,
)

__all__ = ["ENGINE_NAMES", "NO_ENGINE", "REASONS", "CapFacts", "CapReport", "CapValue", "EngineTraits", "ModeSetup",
           "StepMode", "StepShape", "backend_traits", "engine_traits", "engine_versions", "step_mode"]
