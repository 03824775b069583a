"""`tune_schedule(source, ask, options)`: the tune's entry point, which writes its own files.

Searches, picks and verifies a per-batch-size length schedule
(specplan.simulator.study.tune.schedule); with `options.out_dir` it stores
its points and CSVs there and writes the files engines read
(specplan.simulator.study.tune.export). The report (report.md / .html) is
the reports layer's: `specplan tune` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.study.options import RunOptions, Source
from specplan.simulator.study.sweep.run import write_outputs
from specplan.simulator.study.tune.export import write_schedule_files
from specplan.simulator.study.tune.schedule import (
    TUNED,
    TunedSchedule,
    base_variants,
    choose_buckets,
    comparison_frame,
    losing_warning,
    merged_schedule,
    run_design,
    schedule_variant,
    static_label,
    static_variants,
    tune_design,
    tune_inputs,
)


@dataclass(frozen=True)
class TuneAsk:
    """What a tune searches: candidate lengths (default 0..γ), bucket bounds (default: powers of two to the
    batch limit), the load axis's values (default: the scenario's sweep.load), the tokens/s/user SLA it
    maximises at (default: throughput per GPU), and seeds per point (default: the scenario's sweep.seeds)."""

    lengths: tuple[int, ...] | None = None
    buckets: tuple[int, ...] | None = None
    loads: tuple[float, ...] | None = None
    sla_tps: float | None = None
    seeds: int | None = None


def tune_schedule(source: Source, ask: TuneAsk | None = None, options: RunOptions | None = None) -> TunedSchedule:
    """Search, pick and verify a per-batch-size length schedule; with options.out_dir, store its points, CSVs
    and engine files there."""
    ask, options = ask or TuneAsk(), options or RunOptions()
    inputs = tune_inputs(source, ask.lengths, ask.buckets, ask.loads, ask.sla_tps, options.overrides, ask.seeds)
    out = options.out_path
    points_dir = out / "points" if out is not None else None
    own = base_variants(inputs.base)
    clash = {v["label"] for v in own} & {TUNED, *map(static_label, inputs.lengths)}
    if clash:
        raise SpecplanError(f"{inputs.name}: variant label '{sorted(clash)[0]}' is one tune generates; rename it")
    statics = static_variants(inputs.lengths)
    search = run_design(tune_design(inputs, statics, inputs.search_loads), points_dir, options.workers,
                        options.progress)
    choices = choose_buckets(search.points, inputs.lengths, inputs.bounds, inputs.objective)
    schedule = merged_schedule(choices)
    verify_design = tune_design(inputs, [*own, *statics, schedule_variant(schedule)], inputs.verify_loads)
    verification = run_design(verify_design, points_dir, options.workers, options.progress)
    if out is not None:
        write_outputs(verification, out)
        verification.out_dir = out
    sla = inputs.base.sla
    sla_values = sorted({*(sla.tps_user if sla else ()), *([inputs.objective.sla_tps] if inputs.objective.sla_tps else [])})
    comparison = comparison_frame(verification, inputs.objective, [v["label"] for v in statics], sla_values)
    interval = "seeds" if search.points["seed"].nunique() > 1 else "requests"
    tuned = TunedSchedule(inputs.base, inputs.name, inputs.objective, inputs.lengths, choices, schedule, search,
                          verification, comparison, out, interval, losing_warning(comparison))
    if out is not None:
        write_schedule_files(tuned, out)
    return tuned
