"""What a scenario's serving engine was resolved to, where that is worth a line: the notes `check` and `run` print.

A scenario names its engine by `engine.name` (auto: the engine a measured
built-in was read for, its `backend:` line) and `engine.version` (the
traits-table row: the newest at or below it). Two resolutions are accepted
but change what an answer means, so each is said in one line:

- a version without a row of its own, newer than every row or between two:
  which row stands for it (`engines.table.version_row_note`);
- an engine other than the one the profile's kernels were measured under
  (`engine.name: vllm` over an SGLang built-in): the step's kernel times are
  that other engine's, and only the habits (graphs, host cycle, scheduler,
  caps) are the named engine's.

`engine_notes(scenario, profile)` returns them; loading has already refused
what names no row (scenario.load.check_serving_engine).
"""

from __future__ import annotations

from specplan.engines.table import version_row_note
from specplan.hwprofiles.facts import profile_engine, serving_engine
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.scenario.spec import Scenario


def engine_notes(scenario: Scenario, profile: StepProfile) -> list[str]:
    """One line per resolution worth saying (module docstring), each starting with the key it is about."""
    engine = scenario.engine
    serving = serving_engine(engine.name, engine.version, profile)
    notes = []
    if engine.version is not None:
        row = version_row_note(serving.name, engine.version)
        if row is not None:
            notes.append(f"engine.version {engine.version}: {row}")
    measured = profile_engine(profile)
    if engine.name != "auto" and measured.name != "none" and serving.name != measured.name:
        notes.append(f"engine.name {engine.name}: profile {profile.name} was measured under {measured.label} (its "
                     f"backend: line), so its kernel times are {measured.label}'s; only the engine's habits "
                     f"(CUDA graphs, host cycle, scheduler, caps) are {serving.label}'s")
    return notes
