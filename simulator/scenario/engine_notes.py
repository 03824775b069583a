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

A third line is about the prefill profile, not the engine: a context-phase
profile (`engine.prefill.profile`, a `*-prefill` built-in) continues its
attention-pairs axis past its last row by the last two rows' slope
(hwprofiles/profile.py), an estimate its header states; where the workload's
longest prompt reaches past that row in one chunk, the run says so
(`prefill_table_note`). The longest prompt is a fixed length or the largest
of stated values; a lognormal's tail, and lengths read from files (traces,
sessions), give no stated longest prompt, and no line is written for them.

`engine_notes(scenario, profile)` returns them; loading has already refused
what names no row (scenario.load.check_serving_engine).
"""

from __future__ import annotations

from typing import Any

from specplan.engines.table import version_row_note
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import profile_engine, serving_engine
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.scenario.spec import ChunkedPrefill, Scenario
from specplan.traces.spec import (
    EmpiricalLength,
    FixedLength,
    MixtureLength,
    SessionArrivals,
    TraceArrivals,
)


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
    past = prefill_table_note(scenario)
    return [*notes, *([past] if past else [])]


def prefill_table_note(scenario: Scenario) -> str | None:
    """The line for a prefill profile read past its last pairs row (module docstring), or None."""
    prefill, dp = scenario.engine.prefill, scenario.engine.dp_attention
    if not isinstance(prefill, ChunkedPrefill) or prefill.profile is None:
        return None
    arrivals = scenario.workload.arrivals
    from_files = isinstance(arrivals, SessionArrivals) or (isinstance(arrivals, TraceArrivals) and arrivals.use_lengths)
    longest = None if from_files else longest_tokens(scenario.workload.prompt_tokens)
    profile = load_profile(prefill.profile)
    if longest is None or not profile.extends_context or profile.context_tokens is None:
        return None
    chunk = prefill.chunk_tokens if dp is None else (dp.chunk_tokens or max(1, prefill.chunk_tokens // dp.ranks))
    new = min(chunk, longest)
    pairs, last = new * (new + 2 * (longest - new)), float(profile.context_tokens[-1])
    if pairs <= last:
        return None
    return (f"engine.prefill.profile {prefill.profile}: a prompt of {longest:,} tokens reaches {pairs:.3g} attention "
            f"pairs in its last chunk of {new:,}, past the profile's last row ({last:.3g}); such steps are priced "
            "by its last two rows' slope, an estimate (hwprofiles/profile.py)")


def longest_tokens(spec: Any) -> int | None:
    """The longest length a distribution states (None: a lognormal's tail, or lengths read from a file)."""
    if isinstance(spec, FixedLength):
        return spec.value
    if isinstance(spec, EmpiricalLength):
        return max(spec.values) if spec.values else None
    if isinstance(spec, MixtureLength):
        parts = [longest_tokens(part) for part in spec.components.values()]
        return None if any(p is None for p in parts) else max(p for p in parts if p is not None)
    return None
