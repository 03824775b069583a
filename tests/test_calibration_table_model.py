"""Table rows are keyed by model: a row carries to its own model only (a repackaged checkpoint is the same model),
a row written before the key (no `model`) to every model, and no cross-layout fold trains on another model."""

from __future__ import annotations

from pathlib import Path

import yaml

from specplan.simulator.scenario.calibration import Deployment, model_name
from specplan.simulator.scenario.calibration_table import read_table
from specplan.simulator.study.replication.transfer import Member, in_fold

TERMS = {"host_cycle_ms": {"value": 1.0, "interval": [0.5, 2.0], "source": "test"},
         "verify_scale": {"value": 1.2, "interval": [1.0, 1.5], "source": "test"}}


def table(tmp_path: Path, *matches: dict[str, str]) -> Path:
    path = tmp_path / "table.yaml"
    rows = [{"match": match, "label": f"row {i}", "terms": TERMS} for i, match in enumerate(matches)]
    path.write_text(yaml.safe_dump({"format": "specplan-calibration-table/1", "version": 7, "rows": rows}))
    return path


def here(model: str, layout: str = "tp") -> Deployment:
    return Deployment("sglang", "0.5.14", "H200", model, layout)


def test_a_row_of_one_model_is_carried_to_that_model_only(tmp_path):
    v4 = {"engine": "sglang", "engine_version": "0.5.14", "layout": "tp", "model": "DeepSeek-V4-Flash"}
    read = read_table(table(tmp_path, v4))
    assert read.find(here("deepseek-ai/DeepSeek-V4-Flash")).label == "row 0"
    assert read.find(here("sgl-project/DeepSeek-V4-Flash-FP8")).label == "row 0"   # a repackaging
    assert read.find(here("deepseek-ai/DeepSeek-V3")) is None
    assert read.find(here("deepseek-ai/DeepSeek-V4-Flash", "dp-attention")) is None


def test_a_row_without_a_model_matches_every_model_as_tables_before_v7_did(tmp_path):
    old = {"engine": "sglang", "engine_version": "0.5.14", "layout": "tp"}
    v3 = {"engine": "sglang", "engine_version": "0.5.14", "layout": "tp", "model": "DeepSeek-V3"}
    read = read_table(table(tmp_path, v3, old))
    assert read.find(here("deepseek-ai/DeepSeek-V3")).label == "row 0"
    assert read.find(here("meta-llama/Meta-Llama-3.1-8B")).label == "row 1"


def test_model_names_drop_organisation_and_repackaging():
    assert model_name("sgl-project/DeepSeek-V4-Flash-FP8") == model_name("deepseek-ai/DeepSeek-V4-Flash")
    assert model_name("deepseek-ai/DeepSeek-V3") == "DeepSeek-V3"


def test_leaving_a_layout_out_never_trains_on_another_model():
    def member(layout: str, model: str) -> Member:
        return Member(None, None, ("sglang", "0.5.14", layout, model), "H200")   # type: ignore[arg-type]

    members = [member("tp", "DeepSeek-V4-Flash"), member("tp", "DeepSeek-V3"), member("dp-attention", "DeepSeek-V4-Flash")]
    fold = ("transferred_layout", ("sglang", "0.5.14", "dp-attention", "DeepSeek-V4-Flash"), "dp-attention")
    assert in_fold(members, fold) == [members[0]]
