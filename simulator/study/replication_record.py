"""How well public figures validate a deployment: the replication record's line beside a printed answer.

The replication suite (`specplan replicate benchmarks/published`, committed
in benchmarks/published/results/ and shown on docs/results/replication.md)
predicts published serving figures and states the error per calibration
group: engine / GPU / layout, the layout `tp` or `dp-attention`
(replication.published.Case.group). A plan priced on a group whose figures
are predicted to within 6% reads differently from one whose median error is
49%, or one no public figure covers, so `plan` and `run` print one line
saying which it is:

    validation: SGLang on B200 with DP attention: predicted median |error| 49% (max 85%) over 4 public
    figures (docs/results/replication.md)

and, where the deployment prices its prompt chunks on the decode table (no
`engine.prefill.profile`), a line saying so and whether a `-prefill`
built-in exists for its profile.

The record is not package data (benchmarks/ is not installed), so a small
table derived from it ships here: replication_record.csv, one row per group
with the predicted figures' count, median and max |error|, written by
`python -m specplan.simulator.study.replication_record` from
benchmarks/published (results/replication.json's
`statistics.predicted.by_group`, and the models of each group's predicted
figures from results/replication.csv and the cases' source.yaml);
tests/test_replication_record.py checks that it matches. A group's figures
validate only the models they are of: a Llama plan on SGLang / H200 / TP is
told that the group's figures are DeepSeek-V4-Flash's. These are errors of predictions (nothing fitted on the
figures compared), not of the calibrated runs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from specplan.hwprofiles.facts import device_facts, model_facts, serving_engine
from specplan.hwprofiles.fileformat import builtin_names
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.scenario.calibration import model_name
from specplan.simulator.scenario.spec import ChunkedPrefill, Scenario

RECORD = Path(__file__).with_name("replication_record.csv")
SOURCE = "benchmarks/published"   # the replication suite whose committed record (results/) the table is from
PAGE = "docs/results/replication.md"
COLUMNS = ("group", "figures", "median_abs_error", "max_abs_error", "models")
LAYOUTS = {"tp": "TP", "dp-attention": "DP attention"}


@dataclass(frozen=True)
class GroupRecord:
    """One calibration group's predicted figures: how many, and their median and largest |relative error|."""

    group: str
    figures: int
    median_abs_error: float
    max_abs_error: float
    models: tuple[str, ...]   # model_name of the checkpoints the figures are of


def derive_record(published: str | Path) -> str:
    """The shipped table's text from a replication suite's folder (its results/replication.json and
    replication.csv, each case's source.yaml): one row per group of the predicted statistics, with the models
    its predicted figures are of."""
    published = Path(published)
    groups = json.loads((published / "results" / "replication.json").read_text())["statistics"]["predicted"]
    models = group_models(published)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for group, stats in sorted(groups["by_group"].items()):
        figures = int(stats.get("figures") or 0)
        writer.writerow([group, figures, rounded(stats.get("median_abs_error")), rounded(stats.get("max_abs_error")),
                         " ".join(sorted(models.get(group, ())))])
    return out.getvalue()


def group_models(published: Path) -> dict[str, set[str]]:
    """The models (model_name) of each group's predicted figures, from replication.csv and the cases'
    source.yaml."""
    models: dict[str, set[str]] = {}
    with (published / "results" / "replication.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["status"] == "ok" and row["predicted_error"]:
                source = yaml.safe_load((published / row["source"] / "source.yaml").read_text())
                models.setdefault(row["group"], set()).add(model_name(str(source["model"])))
    return models


def rounded(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def read_record(path: Path = RECORD) -> dict[str, GroupRecord]:
    """The shipped table, by group."""
    with path.open(newline="") as handle:
        return {row["group"]: GroupRecord(row["group"], int(row["figures"]),
                                          float(row["median_abs_error"] or math.nan),
                                          float(row["max_abs_error"] or math.nan), tuple(row["models"].split()))
                for row in csv.DictReader(handle)}


def deployment_group(scenario: Scenario, profile: StepProfile) -> tuple[str, str] | None:
    """(the calibration group, its words) of a scenario: its serving engine, the profile's GPU and the layout
    (dp-attention where the scenario or the profile runs more than one attention rank); None where the engine
    or the GPU is unknown."""
    engine = serving_engine(scenario.engine.name, scenario.engine.version, profile)
    device = device_facts(profile)
    if engine.name == "none" or device is None:
        return None
    ranks = scenario.engine.dp_attention.ranks if scenario.engine.dp_attention is not None else device.dp
    layout = "dp-attention" if ranks > 1 else "tp"
    engine_word = engine.label.rsplit(" ", 1)[0] if engine.version else engine.label
    return f"{engine.name}/{device.gpu}/{layout}", f"{engine_word} on {device.gpu} with {LAYOUTS[layout]}"


def validation_lines(scenario: Scenario, profile: StepProfile) -> list[str]:
    """One line on how well public figures validate the deployment's engine / GPU / layout, and one where its
    prompts are priced on the decode table (module docstring)."""
    return [group_line(scenario, profile), *prefill_lines(scenario)]


def group_line(scenario: Scenario, profile: StepProfile) -> str:
    found = deployment_group(scenario, profile)
    if found is None:
        return (f"validation: profile {profile.name} names no serving engine and GPU of the replication record: no "
                f"public figure covers this deployment ({PAGE})")
    group, words = found
    record = read_record().get(group)
    if record is None or record.figures == 0:
        return f"validation: {words}: no public figure covers this engine, GPU and layout ({PAGE})"
    figures = f"{record.figures} public {'figure' if record.figures == 1 else 'figures'}"
    model = model_facts(profile)
    own = None if model is None else model_name(model.name)
    if own not in record.models:
        return (f"validation: {words}: the record's {figures} are of {', '.join(record.models)}, not "
                f"{own or 'this profile'}'s: no public figure covers this model on it ({PAGE})")
    return (f"validation: {words}: predicted median |error| {record.median_abs_error:.0%} (max "
            f"{record.max_abs_error:.0%}) over {figures} of {own} ({PAGE})")


def prefill_lines(scenario: Scenario) -> list[str]:
    """Prompt chunks priced on the decode table (chunked prefill without a prefill profile): said, with the
    `-prefill` built-in that would price them where one ships."""
    prefill = scenario.engine.prefill
    if not isinstance(prefill, ChunkedPrefill) or prefill.profile is not None:
        return []
    spec = scenario.hardware.profile
    name = spec.removeprefix("builtin:") if isinstance(spec, str) and spec.startswith("builtin:") else None
    if name is not None and f"{name}-prefill" in builtin_names():
        return [f"validation: prefill is priced on the decode table; builtin:{name}-prefill ships: set "
                "engine.prefill.profile to price prompts on it"]
    return ["validation: prefill is priced on the decode table (no -prefill built-in exists for this profile): "
            "prompt time is the decode step's at the chunk's tokens"]


def main(argv: list[str] | None = None) -> int:
    """Rewrite replication_record.csv from a replication.json (default: the committed record's)."""
    args = sys.argv[1:] if argv is None else argv
    RECORD.write_text(derive_record(args[0] if args else SOURCE))
    print(f"wrote {RECORD}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
