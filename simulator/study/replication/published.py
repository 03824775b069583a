"""A public measurement as a replication case: its source, its scenario, its figures.

A case is a folder (benchmarks/published/NAME/):

    source.yaml     where the figures come from and what was run: repository,
                    pr or issue, engine and version, model checkpoint, GPUs,
                    parallelism, server and client flags; the `arms` (scenario
                    overrides per compared configuration, e.g. dspark / none)
                    and `workloads` (overrides per benchmarked workload);
                    `client` (vllm | sglang: whose metrics are compared);
                    `requires` (built-in profiles and acceptance presets the
                    case needs; `unsupported`: a GPU, engine version or kernel
                    the database lacks; `nearest_version`: the database's
                    nearest engine version stands in for the one that was
                    run, said in every output; `stand_ins`: what else
                    stands in); `runnable: false` with a `reason`
                    keeps a case that the model cannot run yet;
                    `recipe` (a cookbook cell: its strategy, checkpoint,
                    speculation, MoE backend and parallelism, each checked
                    against server_flags, RECIPE_* below);
                    `acceptance_assumption` (where no acceptance is
                    published: the preset standing in and the AL it
                    implies, with override lists for AL -/+ 10%);
                    `length_rule` (a random-dataset cell: the lengths the
                    client drew, uniform or fixed, with the evidence;
                    length_rules.py checks the scenario draws them);
                    `spread` (an older run of the same cell, kept in
                    spread.csv: version_spread.py reports it apart)
    scenario.yaml   the base scenario (a bench_client workload)
    published.csv   the figures, units exactly as published:
                    workload,arm,metric,value,unit,concurrency[,num_prompts,note,statistic,length_rule]
    spread.csv      (with `spread`) the older run's figures, the same columns

**Step cases** (`kind: step` in source.yaml; serving cases are `kind: serving`, the
default): a static batch measured with no scheduler in between
(`bench_one_batch_server`, `bench_one_batch`, `vllm bench latency`, an engine's
per-step log lines). `concurrency` is the batch size; each workload states
`input_len` and `output_len` (step_cases.py checks them); the metrics are the
STEP_METRICS below, and an engine log line's figure gives the batch's KV tokens in
the optional column `context_tokens`. They are predicted by the step price alone
(step_price.py), never simulated.

`arm` is an arm's name, or `A/B` for a ratio of two arms (a speed-up). A
metric names what the engines' clients print, with its statistic (mean_ttft
against median_ttft: the mean or the P50 over requests); METRICS maps it to
the summary key of the same statistic it is compared with and the units it
may be published in. The optional `statistic` column says what the source
labelled it (Mean, P50) and must agree with the metric; `length_rule` must
agree with source.yaml's. Every malformed row is a one-line SpecplanError
naming the file and line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from specplan.engines import ENGINE_NAMES, engine_traits
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.study.replication.length_rules import (
    check_length_rule,
    check_scenario_lengths,
)

# metric -> (summary key after the client's prefix; unit -> factor to the key's unit)
TIME_MS = {"ms": 1.0, "s": 1000.0}
METRICS: dict[str, tuple[str, dict[str, float]]] = {
    "output_throughput": ("output_throughput_tok_s", {"tok/s": 1.0}),
    "total_throughput": ("total_token_throughput_tok_s", {"tok/s": 1.0}),
    "output_throughput_per_gpu": ("output_throughput_tok_s_per_gpu", {"tok/s/GPU": 1.0}),
    "total_throughput_per_gpu": ("total_token_throughput_tok_s_per_gpu", {"tok/s/GPU": 1.0}),
    "mean_ttft": ("mean_ttft_ms", TIME_MS), "median_ttft": ("median_ttft_ms", TIME_MS),
    "mean_tpot": ("mean_tpot_ms", TIME_MS), "median_tpot": ("median_tpot_ms", TIME_MS),
    "mean_itl": ("mean_itl_ms", TIME_MS), "median_itl": ("median_itl_ms", TIME_MS),
    "speedup_output_throughput": ("output_throughput_tok_s", {"x": 1.0}),
    "speedup_sign": ("output_throughput_tok_s", {"sign": 1.0}),
    # a step case's figures (STEP_METRICS), priced by step_price.py: the key names the quantity, no summary reads it
    "step_itl": ("step:itl_ms", TIME_MS),                       # bench_one_batch_server's (latency - TTFT) / output
    "batch_ttft": ("step:prefill_ms", TIME_MS),                 # the batch's prefill, to its last first token
    "batch_median_ttft": ("step:median_first_token_ms", TIME_MS),   # the median request's first token
    "batch_latency": ("step:latency_ms", TIME_MS),              # prefill and every decode step of the batch
    "batch_output_throughput": ("step:output_tok_s", {"tok/s": 1.0}),   # batch x output tokens / latency
    "batch_input_throughput": ("step:input_tok_s", {"tok/s": 1.0}),     # batch x input tokens / the batch's TTFT
    "batch_total_throughput": ("step:total_tok_s", {"tok/s": 1.0}),     # batch x (input + output) tokens / latency
    "gen_throughput": ("step:gen_tok_s", {"tok/s": 1.0}),       # a log line: running requests / one decode step
}
STEP_METRICS = ("step_itl", "batch_ttft", "batch_median_ttft", "batch_latency", "batch_output_throughput",
                "batch_input_throughput", "batch_total_throughput", "gen_throughput")
CASE_KINDS = ("serving", "step")
RATIO_METRICS = ("speedup_output_throughput", "speedup_sign")
GOAL_METRICS = ("output_throughput", "total_throughput", "output_throughput_per_gpu", "total_throughput_per_gpu",
                "mean_tpot", "median_tpot", "speedup_output_throughput")
COLUMNS = ("workload", "arm", "metric", "value", "unit", "concurrency")
SOURCE_KEYS = ("title", "repository", "reference", "url", "engine", "model", "gpus", "parallelism",
               "server_flags", "client_flags", "client", "arms", "workloads", "requires", "runnable", "reason",
               "notes", "group", "recipe", "acceptance_assumption", "length_rule", "spread", "kind")
SPREAD_KEYS = ("engine_version", "reference", "url", "conditions")
SPREAD_FILE = "spread.csv"
# the statistic a latency metric's prefix names, as a source labels it (the column `statistic`)
STATISTICS = {"mean_": "mean", "median_": "P50"}
STATISTIC_WORDS = {"mean": "mean", "p50": "P50", "median": "P50"}

# A cookbook recipe (the SGLang cookbook's cells): the server flags each of its choices needs.
RECIPE_STRATEGIES = ("low-latency", "balanced", "high-throughput")
RECIPE_CHECKPOINTS = ("fp4", "fp8", "nvfp4")
RECIPE_SPECULATIVE: dict[str, tuple[str, ...]] = {
    "none": (),
    "mtp-3-1-4": ("--speculative-algorithm EAGLE", "--speculative-num-steps 3", "--speculative-eagle-topk 1",
                  "--speculative-num-draft-tokens 4"),
    "mtp-1-1-2": ("--speculative-algorithm EAGLE", "--speculative-num-steps 1", "--speculative-eagle-topk 1",
                  "--speculative-num-draft-tokens 2"),
    "dspark": ("--speculative-algorithm DSPARK",),  # the Flash Official (0731) checkpoint's bundled head
}
RECIPE_MOE_FLAG = {"default": "", "flashinfer_mxfp4": "--moe-runner-backend", "marlin": "--moe-runner-backend",
                   "flashinfer_trtllm_routed": "--moe-runner-backend", "deepep": "--moe-a2a-backend",
                   "megamoe": "--moe-a2a-backend"}
RECIPE_KEYS = ("strategy", "checkpoint", "speculative", "moe_backend", "tp", "dp_attention")
ACCEPTANCE_KEYS = ("preset", "family", "drafted_tokens", "implied_al", "why", "sensitivity")


@dataclass(frozen=True)
class Figure:
    """One published number and the run that predicts it."""

    workload: str
    arm: str
    metric: str
    value: float        # in the unit of the summary key (converted from `unit`)
    published: float    # as published
    unit: str
    concurrency: int
    num_prompts: int | None
    line: int
    statistic: str = ""     # mean or P50 for a latency, "" for a figure over the run
    length_rule: str = ""   # the lengths the client drew (uniform, fixed), where stated
    context_tokens: int | None = None   # a step case's log line: the batch's KV tokens (#token)

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(self.arm.split("/"))


@dataclass(frozen=True)
class Case:
    """A replication case folder, read and validated."""

    folder: Path
    source: dict[str, Any]
    figures: list[Figure]
    problems: list[str] = field(default_factory=list)  # why (parts of) it cannot run
    spread: list[Figure] = field(default_factory=list)  # an older run of the same cell (spread.csv), never a goal

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def kind(self) -> str:
        """`step` (a static batch, priced by the step model) or `serving` (a benchmark client, simulated)."""
        return str(self.source.get("kind", "serving"))

    @property
    def client(self) -> str:
        return str(self.source.get("client", "vllm"))

    @property
    def group(self) -> str:
        """The calibration group: engine, GPU and the step's layout (parameters are shared within it).

        The layout is `dp-attention` where the case runs data-parallel attention (`parallelism.dp` > 1:
        an all-to-all behind per-rank attention, SGLang's min-reduced modes) and `tp` otherwise: the two
        run different steps on the same GPUs, so one level cannot serve both."""
        if "group" in self.source:
            return str(self.source["group"])
        engine, gpus = self.source.get("engine", {}), self.source.get("gpus", {})
        parallel = self.source.get("parallelism", {})
        layout = "dp-attention" if isinstance(parallel, dict) and int(parallel.get("dp", 1) or 1) > 1 else "tp"
        return f"{engine.get('name', '?')}/{gpus.get('type', '?')}/{layout}"


def read_case(folder: str | Path) -> Case:
    folder = Path(folder)
    for name in ("source.yaml", "published.csv"):
        if not (folder / name).is_file():
            raise SpecplanError(f"{folder}: no {name} (a replication case needs source.yaml and published.csv)")
    source = read_source(folder / "source.yaml")
    figures = read_figures(folder / "published.csv", source)
    if "length_rule" in source and (folder / "scenario.yaml").is_file():
        check_scenario_lengths(source["length_rule"], folder / "scenario.yaml")
    return Case(folder, source, figures, spread=read_spread(folder, source))


def read_spread(folder: Path, source: dict[str, Any]) -> list[Figure]:
    """The older run's figures (spread.csv) where source.yaml has `spread`; a file without the key is refused."""
    path = folder / SPREAD_FILE
    if "spread" not in source:
        if path.exists():
            raise SpecplanError(f"{path}: source.yaml has no 'spread' saying which run these figures are")
        return []
    entry = source["spread"]
    if not isinstance(entry, dict) or "engine_version" not in entry:
        raise SpecplanError(f"{folder / 'source.yaml'}: spread must be a mapping with engine_version "
                            f"({', '.join(SPREAD_KEYS)})")
    check_keys(entry, SPREAD_KEYS, f"{folder / 'source.yaml'}: spread")
    if not path.is_file():
        raise SpecplanError(f"{folder}: source.yaml has 'spread' but there is no {SPREAD_FILE}")
    return read_figures(path, source)


def read_source(path: Path) -> dict[str, Any]:
    try:
        source = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SpecplanError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(source, dict):
        raise SpecplanError(f"{path}: must be a YAML mapping")
    check_keys(source, SOURCE_KEYS, str(path))
    if source.get("kind", "serving") not in CASE_KINDS:
        raise SpecplanError(f"{path}: kind must be one of {', '.join(CASE_KINDS)}, got {source.get('kind')!r}")
    clients = [name for name in ENGINE_NAMES if engine_traits(name).client is not None]
    if source.get("client", "vllm") not in clients:
        raise SpecplanError(f"{path}: client must be one of {', '.join(clients)}, got {source.get('client')!r}")
    if not isinstance(source.get("arms", {}), dict) or not source.get("arms"):
        raise SpecplanError(f"{path}: arms must be a mapping of arm name -> list of scenario overrides")
    if "recipe" in source:
        check_recipe(source["recipe"], str(source.get("server_flags") or ""), f"{path}: recipe")
    if "acceptance_assumption" in source:
        check_acceptance_assumption(source["acceptance_assumption"], f"{path}: acceptance_assumption")
    if "length_rule" in source:
        check_length_rule(source["length_rule"], f"{path}: length_rule")
    if source.get("kind") == "step":
        check_step_workloads(source.get("workloads") or {}, f"{path}: workloads")
    return source


STEP_LENGTHS = ("input_len", "output_len")
STEP_WORKLOAD_KEYS = (*STEP_LENGTHS, "overrides", "unavailable", "note")


def check_step_workloads(workloads: Any, where: str) -> None:
    """A step case's workloads: each a mapping with its batch's input_len and output_len (whole numbers >= 1)."""
    if not isinstance(workloads, dict) or not workloads:
        raise SpecplanError(f"{where} must map each workload to its input_len and output_len")
    for name, spec in workloads.items():
        if not isinstance(spec, dict):
            raise SpecplanError(f"{where}.{name} must be a mapping ({', '.join(STEP_WORKLOAD_KEYS)})")
        check_keys(spec, STEP_WORKLOAD_KEYS, f"{where}.{name}")
        for key in STEP_LENGTHS:
            if not whole(spec.get(key)):
                raise SpecplanError(f"{where}.{name}: {key} must be a whole number >= 1, got {spec.get(key)!r}")


def check_recipe(recipe: Any, server_flags: str, where: str) -> None:
    """Known choices, each with the server flags it needs present in server_flags (one line if not)."""
    if not isinstance(recipe, dict):
        raise SpecplanError(f"{where} must be a mapping ({', '.join(RECIPE_KEYS)})")
    check_keys(recipe, RECIPE_KEYS, where)
    for key, valid in (("strategy", RECIPE_STRATEGIES), ("checkpoint", RECIPE_CHECKPOINTS),
                       ("speculative", tuple(RECIPE_SPECULATIVE)), ("moe_backend", tuple(RECIPE_MOE_FLAG))):
        if recipe.get(key) not in valid:
            raise SpecplanError(f"{where}: unknown {key} {recipe.get(key)!r} (valid: {', '.join(valid)})")
    dp = recipe.get("dp_attention")
    if not whole(recipe.get("tp")) or not (dp is None or whole(dp)):
        raise SpecplanError(f"{where}: tp must be a whole number >= 1 and dp_attention one or null, "
                            f"got tp {recipe.get('tp')!r}, dp_attention {dp!r}")
    for flag in recipe_flags(recipe):
        if flag not in server_flags:
            raise SpecplanError(f"{where}: server_flags lack '{flag}', which the recipe's "
                                f"{recipe_reason(recipe, flag)} needs")
    if recipe["speculative"] == "none" and "--speculative-algorithm" in server_flags:
        raise SpecplanError(f"{where}: speculative 'none', but server_flags set --speculative-algorithm")


def recipe_flags(recipe: dict[str, Any]) -> list[str]:
    """The server flags a recipe implies: parallelism, MoE backend, speculation."""
    flags = [f"--tp {recipe['tp']}"]
    if recipe.get("dp_attention"):
        flags += [f"--dp {recipe['dp_attention']}", "--enable-dp-attention"]
    if RECIPE_MOE_FLAG[recipe["moe_backend"]]:
        flags.append(f"{RECIPE_MOE_FLAG[recipe['moe_backend']]} {recipe['moe_backend']}")
    return flags + list(RECIPE_SPECULATIVE[recipe["speculative"]])


def recipe_reason(recipe: dict[str, Any], flag: str) -> str:
    if flag in RECIPE_SPECULATIVE[recipe["speculative"]]:
        return f"speculative '{recipe['speculative']}'"
    if flag.startswith("--moe"):
        return f"moe_backend '{recipe['moe_backend']}'"
    return f"parallelism (tp {recipe.get('tp')}, dp_attention {recipe.get('dp_attention')})"


def check_acceptance_assumption(entry: Any, where: str) -> None:
    """The preset that stands in for an unpublished acceptance and the AL it implies (a number > 1)."""
    if not isinstance(entry, dict):
        raise SpecplanError(f"{where} must be a mapping ({', '.join(ACCEPTANCE_KEYS)})")
    check_keys(entry, ACCEPTANCE_KEYS, where)
    for key in ("preset", "family", "drafted_tokens", "implied_al"):
        if key not in entry:
            raise SpecplanError(f"{where}: missing '{key}'")
    if not whole(entry["drafted_tokens"]):
        raise SpecplanError(f"{where}: drafted_tokens must be a whole number >= 1, got {entry['drafted_tokens']!r}")
    al = number(str(entry["implied_al"]), "implied_al", where)
    if not 1.0 < al <= 1 + entry["drafted_tokens"]:
        ceiling = 1 + entry["drafted_tokens"]
        raise SpecplanError(f"{where}: implied_al {al:g} is outside (1, {ceiling}] (1 + drafted_tokens)")


def whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_keys(entry: dict[str, Any], valid: tuple[str, ...], where: str) -> None:
    for key in entry:
        if key not in valid:
            raise SpecplanError(f"{where}: unknown key '{key}' (valid: {', '.join(valid)})")


def read_figures(path: Path, source: dict[str, Any]) -> list[Figure]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    header = rows[0].keys() if rows else next(csv.reader([first_line(path)]), [])
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise SpecplanError(f"{path}: missing column(s) {', '.join(missing)} (need {','.join(COLUMNS)})")
    return [figure(row, source, path, i + 2) for i, row in enumerate(rows)]


def first_line(path: Path) -> str:
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            return line
    return ""


def figure(row: dict[str, str], source: dict[str, Any], path: Path, line: int) -> Figure:
    """One CSV row, checked: known workload, arm(s) and metric, a number, a unit the metric takes."""
    where = f"{path}:{line}"
    metric, unit, arm = row["metric"].strip(), (row["unit"] or "").strip(), row["arm"].strip()
    if metric not in METRICS:
        raise SpecplanError(f"{where}: unknown metric '{metric}' (valid: {', '.join(METRICS)})")
    if not unit:
        raise SpecplanError(f"{where}: missing unit for {metric} (valid: {', '.join(METRICS[metric][1])})")
    if unit not in METRICS[metric][1]:
        raise SpecplanError(f"{where}: unit '{unit}' is not one {metric} is published in "
                            f"(valid: {', '.join(METRICS[metric][1])})")
    check_arm(arm, metric, source, where)
    check_level(metric, str(source.get("kind", "serving")), where)
    workload = row["workload"].strip()
    if workload not in source.get("workloads", {}):
        raise SpecplanError(f"{where}: unknown workload '{workload}' (source.yaml workloads: "
                            f"{', '.join(source.get('workloads', {})) or 'none'})")
    value = number(row["value"], "value", where)
    return Figure(workload, arm, metric, value * METRICS[metric][1][unit], value, unit,
                  int(number(row["concurrency"], "concurrency", where)), prompts(row, where), line,
                  statistic(row, metric, where), length_rule(row, source, where), context(row, metric, where))


def check_level(metric: str, kind: str, where: str) -> None:
    """A step case's figures are STEP_METRICS, a serving case's are not (one line naming the other kind's)."""
    if (metric in STEP_METRICS) != (kind == "step"):
        valid = STEP_METRICS if kind == "step" else tuple(m for m in METRICS if m not in STEP_METRICS)
        raise SpecplanError(f"{where}: {metric} is not a {kind} case's figure (valid: {', '.join(valid)})")


def context(row: dict[str, str], metric: str, where: str) -> int | None:
    """A log line's KV tokens (`context_tokens`): required by gen_throughput, a whole number >= 1."""
    text = (row.get("context_tokens") or "").strip()
    if not text:
        if metric == "gen_throughput":
            raise SpecplanError(f"{where}: gen_throughput needs context_tokens (the log line's #token)")
        return None
    tokens = number(text, "context_tokens", where)
    if tokens < 1 or tokens != int(tokens):
        raise SpecplanError(f"{where}: context_tokens must be a whole number >= 1, got {text!r}")
    return int(tokens)


def statistic(row: dict[str, str], metric: str, where: str) -> str:
    """The statistic the metric names (mean, P50), checked against the label the row gives, if any."""
    named = next((word for prefix, word in STATISTICS.items() if metric.startswith(prefix)), "")
    label = (row.get("statistic") or "").strip()
    if label and label != "-" and STATISTIC_WORDS.get(label.lower()) != named:
        raise SpecplanError(f"{where}: statistic '{label}' is not what {metric} compares "
                            f"({named or 'no statistic: a figure over the run'}); use "
                            + (f"{'median' if named == 'mean' else 'mean'}_{metric.split('_', 1)[1]}"
                               if named else "'-' or nothing"))
    return named


def length_rule(row: dict[str, str], source: dict[str, Any], where: str) -> str:
    """The row's length rule: source.yaml's, which a `length_rule` column may repeat but not contradict."""
    stated = str((source.get("length_rule") or {}).get("rule", ""))
    label = (row.get("length_rule") or "").strip()
    if label and label != stated:
        raise SpecplanError(f"{where}: length_rule '{label}' disagrees with source.yaml's "
                            f"({stated or 'none stated'})")
    return stated


def check_arm(arm: str, metric: str, source: dict[str, Any], where: str) -> None:
    names = arm.split("/")
    ratio = metric in RATIO_METRICS
    if ratio != (len(names) == 2):
        raise SpecplanError(f"{where}: {metric} needs " + ("a ratio of two arms 'A/B'" if ratio else "one arm")
                            + f", got '{arm}'")
    for name in names:
        if name not in source["arms"]:
            raise SpecplanError(f"{where}: unknown arm '{name}' (source.yaml arms: {', '.join(source['arms'])})")


def number(text: str | None, column: str, where: str) -> float:
    try:
        value = float((text or "").strip())
    except ValueError:
        raise SpecplanError(f"{where}: {column} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise SpecplanError(f"{where}: {column} must be finite, got {text!r}")
    return value


def prompts(row: dict[str, str], where: str) -> int | None:
    text = (row.get("num_prompts") or "").strip()
    return int(number(text, "num_prompts", where)) if text else None
