"""Profile the reference engine's own models with the harness, on this machine.

`capture_profiles(scenario, settings, out_dir)` runs `hwprofiles.harness`
twice and writes two profile files the simulator then reads:

    target.csv   the target decoder's verify forward: tokens B = 1 ..
                 max_step_tokens (the harness's default grid) × a context
                 axis of total KV tokens 0 .. max_batch × (longest prompt +
                 output + γ), so the simulator prices KV-dependent step time
    drafter.csv  the parallel drafter's forward over R·γ tokens (R requests of
                 one block each, no context), priced by the simulator's
                 `drafter.latency: {kind: profile}` model as F(R·γ)

Both are measured the way the engine runs them (same shape, dtype, threads,
eager CPU forwards), never fitted or smoothed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwprofiles.fileformat import write_profile_csv
from hwprofiles.grid import default_grid
from hwprofiles.modelshape import ModelShape
from simulator.scenario import Scenario


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
    from simulator.errors import SpecplanError

    raise SpecplanError(f"reference engine: a {spec.KIND} length needs a maximum (give 'max')")


def context_axis(max_total: int, rows: int) -> tuple[int, ...]:
    """0 and then `rows − 1` totals doubling up to `max_total` (halving down from it)."""
    tops = [round(max_total / 2**i) for i in range(rows - 1)]
    return tuple(sorted({0, *tops}))


def max_step_tokens(scenario: Scenario, profile_max: int | None = None) -> int:
    engine = scenario.engine
    if engine.max_step_tokens is None and profile_max is None:
        from simulator.errors import SpecplanError

        raise SpecplanError("reference engine: set engine.max_step_tokens (the profile's token range)")
    return int(engine.max_step_tokens or profile_max)


def capture_profiles(scenarios: list[Scenario], settings: CaptureSettings, out_dir: Path,
                     progress: Any = None) -> tuple[Path, Path]:
    """Measure and write target.csv and drafter.csv for every scenario of a study; returns both paths.

    The token range is the largest `engine.max_step_tokens`; the context axis
    reaches the largest batch × longest request; the drafter is timed at
    every R·γ any scenario can draft (R = 1 .. max_batch, each γ used).
    """
    from hwprofiles.harness import HarnessConfig, run_harness

    gammas = sorted({s.drafter.block_size for s in scenarios if s.drafter.speculates}) or [1]
    top = max(max_step_tokens(s) for s in scenarios)
    batch = max(s.engine.max_batch_requests for s in scenarios)
    longest = max(longest_request_tokens(s, max(gammas)) for s in scenarios)
    tokens = list(settings.tokens) or default_grid(1, top)
    common = dict(shape=settings.shape, repeats=settings.repeats, warmup=settings.warmup, rounds=settings.rounds,
                  command="specplan fidelity (validation.capture)")
    target_cfg = HarnessConfig(tokens=tokens, total_context=context_axis(batch * longest, settings.context_rows),
                               tokens_per_request=settings.tokens_per_request, **common)
    drafter_tokens = sorted({g * r for g in gammas for r in range(1, batch + 1)})
    drafter_cfg = HarnessConfig(tokens=drafter_tokens, context_tokens=0, drafter="parallel",
                                drafter_layers=settings.drafter_layers, block_size=max(gammas), **common)
    target = run_harness(target_cfg, "reference-engine-target", progress)
    drafter = run_harness(drafter_cfg, "reference-engine-drafter", progress)
    return (write_profile_csv(target, out_dir / "target.csv"),
            write_profile_csv(drafter, out_dir / "drafter.csv"))


def retime(target_csv: Path, settings: CaptureSettings) -> dict[str, Any]:
    """Re-measure a few points of a captured target profile: how far the machine drifted.

    Three token counts (first, middle, last) at two contexts (none and the
    middle row); `ratio` is the median of re-measured / captured.
    """
    from hwprofiles import load_profile
    from hwprofiles.harness import HarnessConfig, run_harness

    captured = load_profile(str(target_csv))
    tokens = sorted({int(captured.tokens[0]), int(captured.tokens[len(captured.tokens) // 2]),
                     int(captured.tokens[-1])})
    axis = captured.context_tokens if captured.context_tokens is not None else np.array([0])
    contexts = tuple(sorted({int(axis[0]), int(axis[len(axis) // 2])}))
    cfg = HarnessConfig(shape=settings.shape, tokens=tokens, total_context=contexts, repeats=settings.repeats,
                        warmup=settings.warmup, tokens_per_request=settings.tokens_per_request,
                        command="specplan fidelity (drift check)")
    again = run_harness(cfg, "drift-check")
    b, c = np.meshgrid(tokens, contexts)
    before = captured.step_ms(b, c if captured.context_tokens is not None else None)
    ratios = np.atleast_2d(again.step_ms_table) / before
    return {"tokens": tokens, "context_tokens": list(contexts), "ratio": float(np.median(ratios)),
            "ratios": ratios.round(3).tolist()}
