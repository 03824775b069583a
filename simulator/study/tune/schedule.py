"""Per-batch-size speculation lengths: scenario → static-length sweep → best length per bucket → verified schedule.

    tuned = tune_schedule("scenarios/default.yaml", TuneAsk(seeds=3), RunOptions(out_dir="out", workers=2))
                                                          (specplan.simulator.study.tune.run)
    tuned.schedule       {batch-size upper bound: length}: the `length-schedule` policy's table, merged
    tuned.buckets        one BucketChoice per batch-size bucket: every length's figures there, the pick
    tuned.verification   SweepResult over the scenario's load axis: its variants, every static length
                         and the tuned schedule (points.csv, frontier.csv, comparisons.csv in out_dir)
    tuned.comparison     the tuned schedule against every label, per SLA (or matched throughput)
    tuned.warning        set when the schedule loses to the best static length there

The search space comes in as values (`lengths`, `buckets`, `loads`:
tuples; `specplan tune` parses its command-line strings into them); the
engine files that export a schedule are written by
`specplan.simulator.study.tune.export` (schedule.yaml, trtllm.yaml, schedule.json,
tune.json).

A length schedule decides from the step's decoding requests alone, so it is
tuned per bucket of batch sizes (b_{i−1}, b_i]. Search: every static length
ℓ in `lengths` on the base scenario's drafter is swept over the load axis
(`specplan.simulator.study.sweep.run` machinery: generated variants, points stored under
out_dir/points, so a killed tune resumes). Each (length, load) operating
point is placed at its mean decoding batch (`mean_decode_requests`); a
bucket reads every length at its representative batch √((b_{i−1}+1)·b_i),
linearly interpolated in log batch between operating points (the nearest
one outside them, flagged as not measured).

Objective, per bucket, with an SLA (`sla.tps_user`: the first threshold, or
`sla_tps`; its statistic; `sla.ttft_s` when given): the length with the
highest throughput per GPU among those whose tokens/s/user statistic meets
the threshold (and whose TTFT p99 meets the bound) at that batch; when none
does, the length with the highest tokens/s/user there (the bucket is past
the SLA; the fastest length keeps the frontier closest to it). Without an
SLA: the length with the highest tokens/s/user statistic at that batch. At
one batch size throughput ≈ batch × per-user rate, so that length also
reaches the bucket's throughput at the highest tokens/s/user: the best
tokens/s/user at matched throughput.

Every figure carries a 95% half-width: Student-t over seeds when the search
ran two or more, else over requests (one seed: the figure × the spread of
its requests' tokens/s/user, (p90 − p10) / 2.563 ÷ the mean, over
√(requests completed in the window)). A length is tied with the best when
their difference lies within its 95% half-width: Student-t over the seeds'
paired differences (under one seed every length runs the same requests, so
their difference is far steadier than either figure: on tune.yaml at batch
2 the seeds' figures spread by 50 tok/s/GPU, lengths 4 and 5's difference
by 10), or, for one seed, √(h_best² + h_n²) of their intervals over
requests (wider than the paired spread there: 27 against 10). A tie
is broken toward the schedule's shape, not by the noise: the first bucket
takes the longest tied length (it caps every later one), a later bucket the
previous bucket's length if tied, else the tied length nearest below it
(else nearest above). TensorRT-LLM requires the first bucket's length to be
the schedule's largest (`max_draft_len`), so later buckets choose among
lengths no longer than the first's; a bucket whose best length is longer
than that is **capped**, and says so (`capped_from`).

Verification runs the schedule as a `length-schedule` variant over the
scenario's own load axis beside its variants and every static length, and
reads each frontier at every SLA threshold (`specplan.simulator.study.frontier`); a
tune is only as good as that table says. A schedule that reads below the
best static length there carries a warning (`TunedSchedule.warning`),
which the command, report.md and every export file print.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specplan.policies.baselines import MTP1, Static
from specplan.policies.dspark import DSparkAsync
from specplan.policies.schedule import LengthSchedule
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.merge import strip_study_blocks
from specplan.simulator.scenario.policy import verify_length_error
from specplan.simulator.scenario.scaling import natural_axis
from specplan.simulator.scenario.study import COUNTED_AXES, tps_column
from specplan.simulator.study.frontier import (
    THROUGHPUT,
    ci95,
    frontier_vertices,
    throughput_at,
    throughput_edge,
    tps_user_at,
    tps_user_edge,
)
from specplan.simulator.study.points import SweepDesign, design_sweep, read_source
from specplan.simulator.study.sweep.run import SweepResult, collect, sweep_frames

TUNED = "tuned schedule"
STATIC_PREFIX = "static "
STATIC_ROLE = "static length"
TUNED_ROLE = "tuned"


def static_label(length: int) -> str:
    return f"{STATIC_PREFIX}{length}"


@dataclass(frozen=True)
class Objective:
    """What a bucket maximises: throughput/GPU at an SLA, or tokens/s/user without one."""

    statistic: str
    sla_tps: float | None
    ttft_s: float | None

    @property
    def column(self) -> str:
        return tps_column(self.statistic)

    def describe(self) -> str:
        if self.sla_tps is None:
            return (f"per batch-size bucket, the highest tokens/s/user ({self.statistic}) at the bucket's batch "
                    "size, i.e. the best tokens/s/user at matched throughput (no SLA given)")
        ttft = f" and TTFT p99 ≤ {self.ttft_s:g} s" if self.ttft_s is not None else ""
        return (f"per batch-size bucket, the highest throughput per GPU among lengths meeting tokens/s/user "
                f"({self.statistic}) ≥ {self.sla_tps:g}{ttft} at the bucket's batch size; where none does, "
                "the highest tokens/s/user")


@dataclass(frozen=True)
class LengthFigures:
    """One static length read at a bucket's batch size, with its figures' 95% half-widths."""

    throughput_per_gpu: float
    tps_user: float
    ttft_p99_s: float
    measured: bool
    throughput_ci95: float = 0.0
    tps_user_ci95: float = 0.0
    seed_throughput: tuple[float, ...] = ()  # each seed's own reading (the ties pair them: same requests)
    seed_tps_user: tuple[float, ...] = ()

    def meets(self, objective: Objective) -> bool:
        if objective.sla_tps is None:
            return True
        ttft_ok = objective.ttft_s is None or (math.isfinite(self.ttft_p99_s) and self.ttft_p99_s <= objective.ttft_s)
        return math.isfinite(self.tps_user) and self.tps_user >= objective.sla_tps and ttft_ok


@dataclass(frozen=True)
class BucketChoice:
    """Batch sizes low+1..high, read at `batch`; the length picked and every candidate's figures."""

    low: int
    high: int
    batch: float
    length: int
    figures: dict[int, LengthFigures]
    tied: tuple[int, ...] = ()        # every length within the best's interval (the pick among them)
    capped_from: int | None = None    # the length the bucket would take without the first bucket's cap

    @property
    def sizes(self) -> str:
        return f"{self.low + 1}" if self.low + 1 == self.high else f"{self.low + 1}–{self.high}"


@dataclass
class TunedSchedule:
    """A finished tune: the inputs it ran with, the per-bucket picks, the schedule and its verification."""

    base: Scenario
    source: str
    objective: Objective
    lengths: tuple[int, ...]
    buckets: list[BucketChoice]
    schedule: dict[int, int]
    search: SweepResult
    verification: SweepResult
    comparison: pd.DataFrame
    out_dir: Path | None = None
    interval: str = "seeds"           # what the figures' intervals are over: "seeds" or "requests"
    warning: str = ""                 # set when the schedule reads below the best static length in its verification

    @property
    def block_size(self) -> int:
        return self.base.drafter.block_size

    def per_batch(self) -> dict[int, int]:
        """The length at every batch size 1..max_batch_requests."""
        bounds = sorted(self.schedule)
        out = {}
        for size in range(1, self.base.engine.max_batch_requests + 1):
            index = int(np.searchsorted(bounds, size, side="left"))
            out[size] = self.schedule[bounds[index]] if index < len(bounds) else 0
        return out


# ---- the search space --------------------------------------------------------------------------
def candidate_lengths(values: tuple[int, ...] | None, block_size: int) -> tuple[int, ...]:
    """The static lengths to search: `values` (each within 0..γ), default every length 0..γ."""
    if values is None:
        return tuple(range(block_size + 1))
    problem = verify_length_error(values, block_size)
    if problem is not None:
        outside = sorted({v for v in values if not 0 <= v <= block_size})
        raise SpecplanError(f"lengths: {problem.rsplit(', got ', 1)[0]}, got {runs_text(outside)}")
    return tuple(sorted(set(values)))


def runs_text(values: list[int]) -> str:
    """Sorted whole numbers as runs: [6, 7, 8, 9, 12] → '6–9, 12'."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs)


def bucket_bounds(values: tuple[int, ...] | None, max_batch: int) -> tuple[int, ...]:
    """Batch-size upper bounds (default 1, 2, 4, ... up to engine.max_batch_requests, which ends the list)."""
    if values is None:
        values = tuple(1 << i for i in range(max_batch.bit_length()) if 1 << i < max_batch)
    else:
        values = tuple(sorted(set(values)))
        if not values or values[0] < 1:
            raise SpecplanError(f"buckets: batch-size bounds must be whole numbers >= 1, got {list(values)}")
        if values[-1] > max_batch:
            raise SpecplanError(f"buckets: {values[-1]} is above engine.max_batch_requests ({max_batch}); "
                                "no step has more decoding requests")
    return (*(v for v in values if v < max_batch), max_batch)


def objective_of(base: Scenario, sla_tps: float | None) -> Objective:
    sla = base.sla
    statistic = sla.statistic if sla is not None else "p50"
    ttft = sla.ttft_s if sla is not None else None
    if sla_tps is not None:
        if not (math.isfinite(sla_tps) and sla_tps > 0):
            raise SpecplanError(f"--sla-tps must be a positive number, got {sla_tps:g}")
        return Objective(statistic, float(sla_tps), ttft)
    first = sla.tps_user[0] if sla is not None and sla.tps_user else None
    return Objective(statistic, first, ttft)


# ---- sweep mappings -----------------------------------------------------------------------------
def base_variants(base: Scenario) -> list[dict[str, Any]]:
    """The scenario's own variants (or the scenario itself), as a sweep lists them."""
    if base.sweep and base.sweep.variants:
        return [copy.deepcopy(dict(v)) for v in base.sweep.variants]
    return [{"label": base.policy.name}]


def static_variants(lengths: tuple[int, ...]) -> list[dict[str, Any]]:
    return [{"label": static_label(n), "policy": {"name": Static.name, "params": {"length": n}}} for n in lengths]


def schedule_policy(schedule: dict[int, int]) -> dict[str, Any]:
    """The `policy:` block that runs a schedule (what schedule.yaml holds)."""
    return {"name": LengthSchedule.name, "params": {"schedule": dict(schedule)}}


def schedule_variant(schedule: dict[int, int]) -> dict[str, Any]:
    return {"label": TUNED, "policy": schedule_policy(schedule)}


def sweep_mapping(raw: dict, variants: list[dict[str, Any]], load_kind: str, loads: tuple[float, ...],
                  seeds: tuple[int, ...] | None) -> dict:
    """The base mapping with a generated `sweep:` block (its `sla:` kept)."""
    out = strip_study_blocks(raw)
    if "sla" in raw:
        out["sla"] = copy.deepcopy(raw["sla"])
    load = [int(v) for v in loads] if load_kind in COUNTED_AXES else list(loads)
    out["sweep"] = {"load": {load_kind: load}, "variants": variants}
    if seeds is not None:
        out["sweep"]["seeds"] = list(seeds)
    return out


def run_design(design: SweepDesign, points_dir: Path | None, workers: int | None,
               progress: bool | None) -> SweepResult:
    """Collect a sweep design's points (stored ones reused) and assemble its frames."""
    summaries, computed = collect(design, points_dir, workers, "local", None, progress)
    return sweep_frames(design, summaries, computed)


# ---- the per-bucket choice ----------------------------------------------------------------------
def length_curves(points: pd.DataFrame, lengths: tuple[int, ...], objective: Objective) -> dict[int, pd.DataFrame]:
    """Per length: seed means per load of decoding batch, throughput/GPU, tokens/s/user, TTFT, by batch, with the
    95% half-widths of throughput and tokens/s/user (over seeds, or over requests for one seed)."""
    curves = {}
    for length in lengths:
        mine = points[points["label"] == static_label(length)]
        rows = [{"batch": group["mean_decode_requests"].mean(), **figure_intervals(group, objective.column)}
                for _, group in mine.groupby("load", sort=False)]
        curve = pd.DataFrame(rows, columns=["batch", *CURVE_FIGURES])
        curves[length] = curve.dropna(subset=["batch"]).query("batch > 0").sort_values("batch")
    return curves


def seed_curves(points: pd.DataFrame, lengths: tuple[int, ...], objective: Objective) -> dict[int, list[pd.DataFrame]]:
    """Per length, one curve per seed (in seed order): that seed's batch, throughput and tokens/s/user per load."""
    out: dict[int, list[pd.DataFrame]] = {}
    for length in lengths:
        mine = points[points["label"] == static_label(length)]
        out[length] = [pd.DataFrame({"batch": run["mean_decode_requests"], "throughput": run[THROUGHPUT],
                                     "tps": run[objective.column]}).dropna(subset=["batch"]).query("batch > 0")
                       .sort_values("batch") for _, run in mine.groupby("seed", sort=True)]
    return out


CURVE_FIGURES = ("throughput", "tps", "ttft", "throughput_ci95", "tps_ci95")
T_SPREAD = 2.563  # p90 − p10 of a normal distribution, in standard deviations


def figure_intervals(group: pd.DataFrame, column: str) -> dict[str, float]:
    """One (length, load)'s means and 95% half-widths: Student-t over seeds, or over requests for one seed."""
    out = {"throughput": float(group[THROUGHPUT].mean()), "tps": float(group[column].mean()),
           "ttft": float(group["ttft_p99_s"].mean())}
    if len(group) > 1:
        return {**out, "throughput_ci95": ci95(group[THROUGHPUT]), "tps_ci95": ci95(group[column])}
    spread = request_spread(group.iloc[0])
    return {**out, "throughput_ci95": spread * out["throughput"], "tps_ci95": spread * out["tps"]}


def request_spread(point: pd.Series) -> float:
    """One run's relative 95% half-width over its requests: 1.96 × their tokens/s/user coefficient of
    variation ((p90 − p10) / 2.563 ÷ mean) / √(requests completed in the window); inf without requests."""
    count = float(point.get("requests_completed_in_window", math.nan))
    mean = float(point.get("tps_user_mean", math.nan))
    spread = (float(point.get("tps_user_p90", math.nan)) - float(point.get("tps_user_p10", math.nan))) / T_SPREAD
    if not (count >= 2 and mean > 0 and math.isfinite(spread)):
        return math.inf
    return 1.96 * spread / mean / math.sqrt(count)


def read_at(curve: pd.DataFrame, batch: float, seeds: list[pd.DataFrame] | None = None) -> LengthFigures:
    """A length's figures at one batch size: linear in log batch between operating points (and each seed's
    own, from `seeds`, when two or more ran)."""
    if curve.empty:
        return LengthFigures(math.nan, math.nan, math.nan, False, math.nan, math.nan)
    at = math.log(batch)
    x = np.log(curve["batch"].to_numpy(dtype=float))
    measured = bool(x[0] - 1e-9 <= at <= x[-1] + 1e-9)
    runs = seeds if seeds is not None and len(seeds) > 1 else []
    return LengthFigures(logged(curve, "throughput", at), logged(curve, "tps", at), logged(curve, "ttft", at),
                         measured, logged(curve, "throughput_ci95", at), logged(curve, "tps_ci95", at),
                         tuple(logged(run, "throughput", at) for run in runs),
                         tuple(logged(run, "tps", at) for run in runs))


def logged(curve: pd.DataFrame, column: str, at: float) -> float:
    """A curve's `column` at log batch `at`, linear between its points (NaN for an empty curve)."""
    if curve.empty:
        return math.nan
    return float(np.interp(at, np.log(curve["batch"].to_numpy(dtype=float)), curve[column].to_numpy(dtype=float)))


@dataclass(frozen=True)
class Pick:
    """A bucket's length, the lengths tied with the best, and the length it would take without a cap."""

    length: int
    tied: tuple[int, ...]
    capped_from: int | None


def pick(figures: dict[int, LengthFigures], objective: Objective, cap: int | None,
         previous: int | None = None) -> Pick:
    """The bucket's length under the objective, among lengths ≤ cap; lengths tied with the best (within the
    difference's 95% half-width) are broken toward the schedule's shape: the longest for the first bucket
    (`previous` None), else `previous` if tied, else the nearest below it, else the nearest above."""
    tied = tied_best(figures, objective, [n for n in figures if cap is None or n <= cap])
    length = shaped(tied, previous)
    free = shaped(tied_best(figures, objective, list(figures)), previous) if cap is not None else length
    return Pick(length, tuple(tied), free if free > length else None)


def tied_best(figures: dict[int, LengthFigures], objective: Objective, allowed: list[int]) -> list[int]:
    """The allowed lengths not told apart from the best under the objective (the best first: shortest on an
    exact tie)."""
    feasible = [n for n in sorted(allowed) if figures[n].meets(objective)]
    column = "throughput_per_gpu" if objective.sla_tps is not None and feasible else "tps_user"
    pool = feasible if column == "throughput_per_gpu" else sorted(allowed)

    def value(n: int) -> float:
        v = getattr(figures[n], column)
        return v if math.isfinite(v) else -math.inf

    best = max(pool, key=lambda n: (value(n), -n))
    return [best, *(n for n in pool if n != best
                    and value(best) - value(n) <= difference_half(figures[best], figures[n], column))]


def difference_half(best: LengthFigures, other: LengthFigures, column: str) -> float:
    """The 95% half-width of best − other: Student-t over the seeds' paired differences (every length ran the
    same requests under a seed), or, for one seed, √(h_best² + h_other²) of their intervals over requests."""
    seeds = "seed_throughput" if column == "throughput_per_gpu" else "seed_tps_user"
    paired = np.array(getattr(best, seeds), dtype=float) - np.array(getattr(other, seeds), dtype=float)
    if paired.size > 1 and np.isfinite(paired).all():
        return ci95(pd.Series(paired))
    half = "throughput_ci95" if column == "throughput_per_gpu" else "tps_user_ci95"
    width = math.hypot(getattr(best, half), getattr(other, half))
    return width if math.isfinite(width) else math.inf


def shaped(tied: list[int], previous: int | None) -> int:
    """The tied length that keeps a schedule's shape: the longest for the first bucket; else `previous`, the
    nearest below it, or the nearest above."""
    if previous is None:
        return max(tied)
    below = [n for n in tied if n <= previous]
    return max(below) if below else min(tied)


def choose_buckets(points: pd.DataFrame, lengths: tuple[int, ...], bounds: tuple[int, ...],
                   objective: Objective) -> list[BucketChoice]:
    """One choice per bucket, smallest batches first; later buckets capped at the first bucket's length."""
    curves, runs = length_curves(points, lengths, objective), seed_curves(points, lengths, objective)
    choices: list[BucketChoice] = []
    low = 0
    for high in bounds:
        batch = math.sqrt((low + 1) * high)
        figures = {n: read_at(curves[n], batch, runs[n]) for n in lengths}
        cap = choices[0].length if choices else None
        chosen = pick(figures, objective, cap, choices[-1].length if choices else None)
        choices.append(BucketChoice(low, high, batch, chosen.length, figures, chosen.tied, chosen.capped_from))
        low = high
    return choices


def merged_schedule(choices: list[BucketChoice]) -> dict[int, int]:
    """Buckets → {upper bound: length}: equal neighbours merged, a trailing 0 dropped (0 is the default above)."""
    schedule: dict[int, int] = {}
    for index, choice in enumerate(choices):
        following = choices[index + 1].length if index + 1 < len(choices) else None
        if choice.length != following:
            schedule[choice.high] = choice.length
    if len(schedule) > 1 and schedule[max(schedule)] == 0:
        del schedule[max(schedule)]
    return schedule


# ---- verification -------------------------------------------------------------------------------
def label_roles(result: SweepResult, statics: list[str]) -> dict[str, str]:
    """label → 'tuned', 'static length' (a generated static length) or a scenario variant's policy name."""
    roles = {}
    for label, scenario in result.design.variant_scenarios.items():
        roles[label] = TUNED_ROLE if label == TUNED else STATIC_ROLE if label in statics else scenario.policy.name
    return roles


def comparison_frame(result: SweepResult, objective: Objective, statics: list[str], sla_values: list[float]) -> pd.DataFrame:
    """Every label against the tuned schedule: throughput/GPU at each SLA, or tokens/s/user at matched throughput."""
    ops = result.operating
    vertices = {label: frontier_vertices(ops[ops["label"] == label]) for label in result.design.labels}
    loads = {label: ops.loc[ops["label"] == label, "load"] for label in result.design.labels}
    roles = label_roles(result, statics)
    rows = []
    if sla_values:
        for sla in sla_values:
            values = {label: throughput_at(v, sla) for label, v in vertices.items()}
            edges = {label: throughput_edge(v, loads[label], sla) for label, v in vertices.items()}
            rows += comparison_rows("throughput_per_gpu_at_sla", sla, values, roles, edges)
    else:
        for level in vertices[TUNED]["throughput_per_gpu"].tolist():
            values = {label: tps_user_at(v, level) for label, v in vertices.items()}
            edges = {label: tps_user_edge(v, loads[label], level) for label, v in vertices.items()}
            rows += comparison_rows("tps_user_at_matched_throughput", level, values, roles, edges)
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


COMPARISON_COLUMNS = ["measure", "level", "label", "role", "value", "tuned_gain", "best_static", "edge"]


def comparison_rows(measure: str, level: float, values: dict[str, float], roles: dict[str, str],
                    edges: dict[str, str]) -> list[dict]:
    """One row per label; `edge` says "max load L" / "min load L" when the value is a load-axis end's."""
    tuned = values[TUNED]
    statics = {label: v for label, v in values.items() if roles[label] == STATIC_ROLE and math.isfinite(v)}
    best = max(statics, key=lambda label: statics[label]) if statics else None
    return [{"measure": measure, "level": float(level), "label": label, "role": roles[label], "value": value,
             "tuned_gain": gain(tuned, value), "best_static": label == best,
             "edge": edges[label] if math.isfinite(value) else ""} for label, value in values.items()]


# the scenario variants every comparison shows beside the tuned schedule: the MTP-1 baseline, production DSpark
KEY_ROLES = (MTP1.name, DSparkAsync.name)


def key_rows(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per level: the tuned schedule, the best static length, and the scenario's MTP-1 and dspark-async variants."""
    rank = comparison["role"].map({TUNED_ROLE: 0, **{role: 2 + i for i, role in enumerate(KEY_ROLES)}})
    rank = rank.where(~comparison["best_static"], 1)
    keep = rank.notna()
    ordered = comparison[keep].assign(_rank=rank[keep]).sort_values(["level", "_rank"], kind="stable")
    return ordered.drop(columns="_rank").reset_index(drop=True)


def gain(value: float, baseline: float) -> float:
    if not (math.isfinite(value) and math.isfinite(baseline)) or baseline == 0:
        return math.nan
    return float(value / baseline - 1.0)


# ---- the whole tune -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TuneInputs:
    """A validated tune request: the base, its raw mapping and folder, the search space and the objective."""

    raw: dict
    folder: Path
    name: str
    base: Scenario
    lengths: tuple[int, ...]
    bounds: tuple[int, ...]
    load_kind: str
    search_loads: tuple[float, ...]
    verify_loads: tuple[float, ...]
    objective: Objective
    seeds: tuple[int, ...] | None = None  # the sweeps' seeds (None: the scenario's sweep.seeds)


def tune_inputs(source: str | Path | Scenario | dict, lengths: tuple[int, ...] | None,
                buckets: tuple[int, ...] | None, loads: tuple[float, ...] | None, sla_tps: float | None,
                overrides: tuple[str, ...] | list[str], seeds: int | None = None) -> TuneInputs:
    base = design_sweep(source, overrides).base
    raw, folder, name = read_source(source, overrides)
    if not base.drafter.speculates:
        raise SpecplanError(f"{name}: tune needs a drafter that speculates (drafter.family is '{base.drafter.family}')")
    load = base.sweep.load if base.sweep else None
    own = tuple(load.values) if load else ()
    search = tuple(sorted(set(loads))) if loads else own
    if len(search) < 2 or search[0] <= 0:
        raise SpecplanError(f"{name}: tune needs a load axis of at least two values, all positive (sweep.load, or loads)")
    kind = load.kind if load else natural_axis(base.workload.arrivals)
    if kind in COUNTED_AXES and any(v != int(v) for v in search):
        raise SpecplanError(f"loads: the load axis counts {kind}; give whole numbers, got {list(search)}")
    if seeds is not None and (not isinstance(seeds, int) or seeds < 1):
        raise SpecplanError(f"seeds must be a whole number >= 1, got {seeds}")
    return TuneInputs(raw, folder, name, base, candidate_lengths(lengths, base.drafter.block_size),
                      bucket_bounds(buckets, base.engine.max_batch_requests), kind, search, own or search,
                      objective_of(base, sla_tps),
                      None if seeds is None else tuple(base.seed + i for i in range(seeds)))


def tune_design(inputs: TuneInputs, variants: list[dict[str, Any]], loads: tuple[float, ...]) -> SweepDesign:
    """The design of a generated sweep, its errors naming the scenario file."""
    seeds = inputs.seeds or (inputs.base.sweep.seeds if inputs.base.sweep else None)
    mapping = sweep_mapping(inputs.raw, variants, inputs.load_kind, loads, seeds)
    try:
        design = design_sweep(mapping, base_dir=inputs.folder)
    except SpecplanError as exc:
        raise SpecplanError(str(exc).replace("<mapping>", inputs.name, 1)) from None
    return dataclasses.replace(design, source=inputs.name)


def losing_warning(comparison: pd.DataFrame) -> str:
    """One line when the tuned schedule reads below the best static length at some level of its verification
    (what to deploy instead); "" when it does not."""
    losses = []
    for level, group in comparison.groupby("level", sort=False):
        tuned = group[group["role"] == TUNED_ROLE]["value"]
        best = group[group["best_static"]]
        if tuned.empty or best.empty or not (math.isfinite(tuned.iloc[0]) and math.isfinite(best["value"].iloc[0])):
            continue
        if tuned.iloc[0] < best["value"].iloc[0]:
            at = f">= {level:,.0f} tok/s/user" if group["measure"].iloc[0].endswith("sla") else \
                f"{level:,.0f} tok/s/GPU"
            losses.append(f"at {at} it reads {tuned.iloc[0]:,.0f} against {best['label'].iloc[0]}'s "
                          f"{best['value'].iloc[0]:,.0f} ({100 * best['tuned_gain'].iloc[0]:+.1f}%)")
    if not losses:
        return ""
    return ("the tuned schedule loses to the best static length in its own verification (" + "; ".join(losses)
            + "): deploy that static length, or add seeds (--seeds) and tune again")
