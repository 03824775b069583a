"""Running a replication case's figures: its scenario per figure and arm, the prediction, and why it cannot run.

Place in the data flow: `replicate.py` (every figure, nothing fitted) and
`calibration.py` (every figure at each grid point) ask a `CaseRunner` for a
figure's predicted value: the case's scenario with its workload's and arm's
overrides at the figure's concurrency (`workload.arrivals.max_concurrency`,
and `num_prompts` from the figure, the workload, or
`prompts_per_concurrency` x c, default 4), extra overrides (an acceptance
sensitivity) and the calibration's parameters, simulated once and cached;
the client's metric is read from summary.json (a speed-up is the ratio of
the two arms' output throughput). Signed error = predicted / published - 1.

Availability is checked before anything runs, and never silently: a case
with `runnable: false`, a `requires.unsupported` entry (a GPU, engine
version or kernel the database lacks), a built-in that prices another
model's forward (forwards.py: V4.1-Flash on a V4-Flash built-in), a required
built-in profile that is not installed, a workload marked `unavailable`, or a scenario that does not
load gets that reason as its status and stays out of every error statistic.
A case run on the database's nearest version of its engine says so
(`requires.nearest_version`: basis "nearest database version", else "as
run"), with what else stands in (`requires.stand_ins`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from specplan.hwprofiles.fileformat import builtin_names
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.presets import check_preset
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.records.bench_metrics import metric_key
from specplan.simulator.scenario import load_scenario
from specplan.simulator.scenario.calibration import scaled_profile_overrides
from specplan.simulator.study.replication.forwards import foreign_forward
from specplan.simulator.study.replication.published import METRICS, RATIO_METRICS, Case, Figure

DEFAULT_PROMPTS_PER_CONCURRENCY = 4
NEAREST = "nearest database version"
PR_CASE = "PR case"
AS_RUN = "as run"


@dataclass(frozen=True)
class Params:
    """The free parameters of one group (None: the scenario's own host time, the engine's own extend cost)."""

    host_ms: float | None = None
    verify_scale: float = 1.0
    extend_op_us: float | None = None   # engine.cuda_graph.extend_op_us (only where steps are priced by launches)


class CaseRunner:
    """Runs a case's scenarios, cached by (workload, arm, concurrency, prompts, params, extra overrides)."""

    def __init__(self, case: Case, out_dir: Path) -> None:
        self.case, self.out_dir = case, out_dir
        self.cache: dict[tuple, float | dict[str, Any]] = {}

    def workload(self, name: str) -> dict[str, Any]:
        entry = self.case.source.get("workloads", {}).get(name) or {}
        return {"overrides": entry} if isinstance(entry, list) else entry

    def prompts(self, figure: Figure) -> int:
        spec = self.workload(figure.workload)
        if figure.num_prompts is not None:
            return figure.num_prompts
        if spec.get("num_prompts"):
            return int(spec["num_prompts"])
        return int(spec.get("prompts_per_concurrency", DEFAULT_PROMPTS_PER_CONCURRENCY)) * figure.concurrency

    def overrides(self, figure: Figure, arm: str) -> list[str]:
        arms = self.case.source["arms"]
        return [*map(str, self.workload(figure.workload).get("overrides", [])), *map(str, arms[arm] or []),
                f"workload.arrivals.max_concurrency={figure.concurrency}",
                f"workload.arrivals.num_prompts={self.prompts(figure)}"]

    def summary(self, figure: Figure, arm: str, params: Params, extra: tuple[str, ...] = ()) -> dict[str, Any]:
        key = (figure.workload, arm, figure.concurrency, self.prompts(figure), params, extra)
        if key not in self.cache:
            self.cache[key] = simulate(self.scenario(figure, arm, params, extra)).summary
        return self.cache[key]  # type: ignore[return-value]

    def scenario(self, figure: Figure, arm: str, params: Params, extra: tuple[str, ...] = ()) -> Any:
        return calibrated_scenario(self.case, [*self.overrides(figure, arm), *extra], params, self.out_dir)

    def modes(self, figure: Figure, params: Params) -> dict[str, Any]:
        """How the figure's first arm ran its steps: the share of steps and of time that ran eager, and the
        reason most steps left the decode graph for (the summary's mode keys; empty where no mode is modelled,
        "graph" where every step replayed one)."""
        summary = self.summary(figure, figure.arms[0], params)
        reasons = {key.split(".", 1)[1]: value for key, value in summary.items()
                   if key.startswith("mode_reason_step_share.") and isinstance(value, float)}
        if not reasons:
            return {}
        off_graph = {reason: share for reason, share in reasons.items() if reason != GRAPH_REASON}
        main = max(off_graph, key=lambda reason: off_graph[reason]) if off_graph else GRAPH_REASON
        return {"eager_step_share": summary.get("mode_step_share.eager", 0.0),
                "eager_time_share": summary.get("mode_time_share.eager", 0.0),
                "main_mode_reason": f"{main} {reasons[main]:.0%}"}

    def predict(self, figure: Figure, params: Params, extra: tuple[str, ...] = ()) -> float:
        """The figure's predicted value, in the unit of its summary key (a ratio for speed-ups)."""
        key = metric_key(self.case.client, METRICS[figure.metric][0])
        values = [float(self.summary(figure, arm, params, extra)[key]) for arm in figure.arms]
        if figure.metric in RATIO_METRICS:
            ratio = values[0] / values[1] if values[1] > 0 else math.nan
            return float(np.sign(ratio - 1.0)) if figure.metric == "speedup_sign" else ratio
        return values[0]


def calibrated_scenario(case: Case, overrides: list[str], params: Params, out_dir: Path) -> Any:
    """The case's scenario under `overrides` at a calibration's params: host time as engine.host_overhead_ms (None:
    the scenario's own), the extend step's host cost per kernel as engine.cuda_graph.extend_op_us (None: the
    engine's own; set only on a case whose engine prices steps by their launches, `extend_priced`), the verify scale
    as scaled copies of its profiles (scaled_profile_overrides, written under `out_dir`). The one way a replication
    case takes params: a serving case's runs and a step case's steps alike."""
    overrides = list(overrides)
    if params.host_ms is not None:
        overrides.append(f"engine.host_overhead_ms={params.host_ms}")
    if params.extend_op_us is not None:
        overrides.append(f"engine.cuda_graph.extend_op_us={params.extend_op_us}")
    scenario = load_scenario(case.folder / "scenario.yaml", overrides)
    if params.verify_scale != 1.0:
        scaled = scaled_profile_overrides(scenario, params.verify_scale, out_dir / "profiles")
        scenario = load_scenario(case.folder / "scenario.yaml", [*overrides, *scaled])
    return scenario


GRAPH_REASON = "decode_graph"  # a step that replayed its decode graph (specplan.engines.REASONS)


def availability(case: Case) -> str | None:
    """Why the case cannot run at all (None: it can)."""
    source = case.source
    if source.get("runnable", True) is False:
        return f"not runnable: {source.get('reason', 'no reason given')}"
    requires = source.get("requires") or {}
    unsupported = requires.get("unsupported") or []
    if unsupported:
        return "database lacks: " + "; ".join(map(str, unsupported))
    foreign = foreign_forward(model_key(case), [str(p) for p in requires.get("profiles") or []])
    if foreign:
        return f"another model's forward: {foreign}"
    installed = set(builtin_names())
    missing = [p for p in requires.get("profiles") or [] if p.removeprefix("builtin:") not in installed]
    if missing:
        return "profile not available: " + ", ".join(missing)
    absent = [p for p in requires.get("presets") or [] if not preset_known(*str(p).split(":", 1))]
    if absent:
        return "acceptance preset not available: " + ", ".join(map(str, absent))
    return None


def basis(case: Case) -> str:
    """Whether the case runs on the engine version that was measured, or the database's nearest."""
    return NEAREST if (case.source.get("requires") or {}).get("nearest_version") else AS_RUN


def case_label(case: Case) -> str:
    """What the case runs on instead of what was measured (empty when nothing stands in)."""
    requires = case.source.get("requires") or {}
    parts = [f"{NEAREST}: {requires['nearest_version']}"] if requires.get("nearest_version") else []
    parts += [f"stand-in: {s}" for s in requires.get("stand_ins") or []]
    return "; ".join(parts)


def preset_known(preset: str, family: str = "dspark") -> bool:
    try:
        check_preset(preset, family)
    except SpecplanError:
        return False
    return True


class FigureRunner(Protocol):
    """What a figure's status reads of its runner: a serving case's CaseRunner or a step case's StepRunner."""

    def workload(self, name: str) -> dict[str, Any]: ...

    def scenario(self, figure: Figure, arm: str, params: Params, extra: tuple[str, ...] = ()) -> Any: ...


def figure_status(runner: FigureRunner, figure: Figure) -> str | None:
    """Why this figure cannot be predicted (a workload marked unavailable, a scenario that does not load)."""
    reason = runner.workload(figure.workload).get("unavailable")
    if reason:
        return f"workload not available: {reason}"
    try:
        for arm in figure.arms:
            runner.scenario(figure, arm, Params())
    except SpecplanError as exc:
        return f"scenario does not load: {exc}"
    return None


def base_row(case: Case, figure: Figure) -> dict[str, Any]:
    return {"source": case.name, "reference": case.source.get("reference", ""), "group": case.group,
            "level": case.kind, "model": model_key(case),
            "kind": kind(case), "gpu": str((case.source.get("gpus") or {}).get("type", "?")),
            "gpu_count": int((case.source.get("gpus") or {}).get("count", 1) or 1), "moe_path": moe_path(case),
            "workload": figure.workload, "arm": figure.arm, "metric": figure.metric,
            "statistic": figure.statistic or "-", "length_rule": figure.length_rule or "-",
            "concurrency": figure.concurrency, "published": figure.published, "unit": figure.unit,
            "line": figure.line, "basis": basis(case)}


def moe_path(case: Case) -> str:
    """The MoE kernel path the case's built-ins price: `megamoe` (SGLang's fused DeepGEMM MegaMoE, a `-megamoe`
    built-in) or `default` (the engine's default MoE path for the checkpoint); a step case prices only the path it
    ran, so step and serving cases are matched on it."""
    profiles = (case.source.get("requires") or {}).get("profiles") or []
    return "megamoe" if any("-megamoe" in str(name) for name in profiles) else "default"


def kind(case: Case) -> str:
    """The kind of cell: a cookbook recipe's strategy (low-latency, balanced, high-throughput), a step case, else a
    PR case."""
    if case.kind == "step":
        return STEP_CASE
    return str((case.source.get("recipe") or {}).get("strategy", PR_CASE))


STEP_CASE = "step case"
MODEL_SUFFIXES = ("-0731", "-fp8", "-nvfp4", "-dspark", "-instruct")


def model_key(case: Case) -> str:
    """The model a case ran, as step and serving cases are matched on it: source.yaml's `model` without its
    organisation, notes, checkpoint date or precision ("deepseek-ai/DeepSeek-V4-Flash-0731 (FP4)" ->
    "deepseek-v4-flash"). DeepSeek-V4.1-Flash stays apart ("deepseek-v4.1-flash"): its forward does not have
    V4-Flash's shapes, so no V4-Flash built-in prices it (forwards.py states the rule and its sources)."""
    name = str(case.source.get("model", "?")).split()[0].split("/")[-1].lower()
    changed = True
    while changed:
        changed = False
        for suffix in MODEL_SUFFIXES:
            if name.endswith(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def in_unit(figure: Figure, value: float) -> float:
    """A predicted value in the unit the figure was published in."""
    return value / METRICS[figure.metric][1][figure.unit]


def signed_error(figure: Figure, predicted: float) -> float:
    if figure.metric == "speedup_sign":
        return 0.0 if predicted == figure.value else math.nan
    return predicted / figure.value - 1.0


