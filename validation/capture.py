"""Profile the reference engine's own models with the harness, on this machine.

`capture_profiles(scenario, settings, out_dir)` runs `specplan.hwprofiles.harness`
twice and writes two profile files the simulator then reads:

    target.csv   the target decoder's verify forward: tokens B = 1 ..
                 max_step_tokens (the harness's default grid) × a context
                 axis of total KV tokens 0 .. max_batch × (longest prompt +
                 output + γ), so the simulator prices KV-dependent step time
    drafter.csv  the parallel drafter's forward over R·(γ+1) tokens (R requests of
                 one block each, no context), priced by the simulator's
                 `drafter.latency: {kind: profile}` model as F(R·(γ+1))

Both are measured the way the engine runs them (same shape, dtype, threads,
eager CPU forwards), never fitted or smoothed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.fileformat import write_profile_csv
from specplan.hwprofiles.grid import default_grid
from specplan.hwprofiles.modelshape import ModelShape
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import Scenario


@dataclass(frozen=True)
class CaptureSettings:
    """How long to measure: repeats per point and the context axis's number of rows."""

    shape: ModelShape
    drafter_layers: int = 1
    repeats: int = 7
    warmup: int = 2
    context_rows: int = 5
    tokens_per_request: int = 3
    tokens: tuple[int, ...] = ()
    rounds: int = 3


def longest_request_tokens(scenario: Scenario, block_size: int) -> int:
    """The most KV one request can hold: the length distributions' maxima + the block."""
    workload = scenario.workload
    return max_length(workload.prompt_tokens) + max_length(workload.output_tokens) + block_size + 1


def max_length(spec: Any) -> int:
    for key in ("value", "max"):
        if getattr(spec, key, None) is not None:
            return int(getattr(spec, key))
    values = getattr(spec, "values", None)
    if values is not None:
        return int(np.max(values))

    raise SpecplanError(f"reference engine: a {spec.KIND} length needs a maximum (give 'max')")


def context_axis(max_total: int, rows: int) -> tuple[int, ...]:
    """0 and then `rows − 1` totals doubling up to `max_total` (halving down from it)."""
    tops = [round(max_total / 2**i) for i in range(rows - 1)]
    return tuple(sorted({0, *tops}))


def max_step_tokens(scenario: Scenario, profile_max: int | None = None) -> int:
    engine = scenario.engine
    if engine.max_step_tokens is None and profile_max is None:
        raise SpecplanError("reference engine: set engine.max_step_tokens (the profile's token range)")
    return int(engine.max_step_tokens or profile_max or 0)


def capture_profiles(scenarios: list[Scenario], settings: CaptureSettings, out_dir: Path,
                     progress: Any = None) -> tuple[Path, Path]:
    """Measure and write target.csv and drafter.csv for every scenario of a study; returns both paths.

    The token range is the largest `engine.max_step_tokens`; the context axis
    reaches the largest batch × longest request; the drafter is timed at
    every R·(γ+1) any scenario can draft (R = 1 .. max_batch, each γ used:
    the anchor and γ mask positions per request).
    """
    # the harness imports torch
    from specplan.hwprofiles.harness import HarnessConfig, run_harness

    gammas = sorted({s.drafter.block_size for s in scenarios if s.drafter.speculates}) or [1]
    top = max(max_step_tokens(s) for s in scenarios)
    batch = max(s.engine.max_batch_requests for s in scenarios)
    longest = max(longest_request_tokens(s, max(gammas)) for s in scenarios)
    tokens = list(settings.tokens) or default_grid(1, top)
    config = functools.partial(HarnessConfig, shape=settings.shape, repeats=settings.repeats,
                               warmup=settings.warmup, rounds=settings.rounds,
                               command="specplan fidelity (specplan.validation.capture)")
    target_cfg = config(tokens=tokens, total_context=context_axis(batch * longest, settings.context_rows),
                               tokens_per_request=settings.tokens_per_request)
    drafter_tokens = sorted({(g + 1) * r for g in gammas for r in range(1, batch + 1)})
    drafter_cfg = config(tokens=drafter_tokens, context_tokens=0, drafter="parallel",
                         drafter_layers=settings.drafter_layers, block_size=max(gammas) + 1)
    target = run_harness(target_cfg, "reference-engine-target", progress)
    drafter = run_harness(drafter_cfg, "reference-engine-drafter", progress)
    return (write_profile_csv(target, out_dir / "target.csv"),
            write_profile_csv(drafter, out_dir / "drafter.csv"))



def bracket(before: tuple[Path, Path], after: tuple[Path, Path], folder: Path) -> tuple[Path, Path]:
    """The element-wise mean of the profiles taken just before and just after a run.

    A shared machine's speed drifts over minutes; bracketing a measurement
    between two calibrations and using their mean is the usual remedy (it
    is exact for a linear drift). Both files must share one grid.
    """
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for first, last, name in ((before[0], after[0], "target.csv"), (before[1], after[1], "drafter.csv")):
        a, b = load_profile(str(first)), load_profile(str(last))
        provenance = {**a.provenance, "statistic": f"mean of two captures bracketing the run ({first.parent.name}, "
                      f"{last.parent.name}), each the {a.provenance.get('statistic', 'harness statistic')}"}
        mean = replace(a, step_ms_table=(a.step_ms_table + b.step_ms_table) / 2, provenance=provenance, extra={})
        out.append(write_profile_csv(mean, folder / name))
    return out[0], out[1]


def drift_ratio(before: Path, after: Path) -> float:
    """Median over the grid of after / before step times: how far the machine moved between them."""
    a, b = load_profile(str(before)), load_profile(str(after))
    return float(np.median(b.step_ms_table / a.step_ms_table))
