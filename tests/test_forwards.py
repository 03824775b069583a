"""The rule that keeps a case off another model's built-ins (simulator/study/replication/forwards.py).

DeepSeek-V4.1-Flash's forward does not have V4-Flash's shapes (hidden 5120 against 4096, 40 layers
against 43, 384 experts of 2304 against 256 of 2048, CSA2 and Engram): a V4.1 case that names a
V4-Flash built-in waits, with the differences in its status; a V4-Flash case is untouched; and
the V4-Flash side of the rule is what the built-ins' headers say they priced.
"""

from __future__ import annotations

import re
import shutil

import yaml

from specplan.hwprofiles.fileformat import DATA_DIR, builtin_names
from specplan.simulator.study.replication.case_runner import availability, model_key
from specplan.simulator.study.replication.forwards import (
    V4_FLASH,
    V41_FLASH,
    foreign_forward,
    priced_model,
)
from specplan.simulator.study.replication.published import read_case
from tests.conftest import REPO

STEP_CASE = REPO / "benchmarks" / "published" / "sglang-25052-v4-flash-megamoe-w4a8-b200-step"
V41 = "deepseek-ai/DeepSeek-V4.1-Flash (revision dba1be0a40aa45a94ad051997016db3960a90277)"


def as_model(tmp_path, model: str):
    """The W4A8 MegaMoE step case (it runs on V4-Flash built-ins) with source.yaml's model replaced."""
    folder = tmp_path / STEP_CASE.name
    shutil.copytree(STEP_CASE, folder)
    source = yaml.safe_load((folder / "source.yaml").read_text())
    source["model"] = model
    (folder / "source.yaml").write_text(yaml.safe_dump(source, sort_keys=False))
    return read_case(folder)


def test_a_v41_flash_case_on_a_v4_flash_builtin_waits_and_says_how_the_forwards_differ(tmp_path):
    case = as_model(tmp_path, V41)
    assert model_key(case) == "deepseek-v4.1-flash"
    status = availability(case)
    assert status is not None and status.startswith("another model's forward: builtin:b200-deepseek-v4-flash-")
    for difference in ("layers 40 vs 43", "hidden 5120 vs 4096", "routed_experts 384 vs 256", "expert_ffn 2304 vs 2048"):
        assert difference in status
    assert "NVIDIA/TensorRT-LLM" in status   # the rule names its sources


def test_a_v4_flash_case_on_its_own_builtins_is_untouched(tmp_path):
    assert availability(read_case(STEP_CASE)) is None
    assert availability(as_model(tmp_path, "deepseek-ai/DeepSeek-V4-Flash-0731 (FP4)")) is None


def test_only_a_different_forward_is_refused():
    v4 = "builtin:b200-deepseek-v4-flash-tp8ep8-sglang"
    assert priced_model(v4) == "deepseek-v4-flash"
    assert priced_model("builtin:h200-llama3.1-8b-vllm") is None
    assert foreign_forward("deepseek-v4-flash", [v4]) is None          # its own model
    assert foreign_forward("llama3.1-8b", [v4]) is None                 # no stated shapes: not this rule's call
    assert foreign_forward("deepseek-v4.1-flash", ["builtin:h200-llama3.1-8b-vllm"]) is None
    assert foreign_forward("deepseek-v4.1-flash", [v4]) is not None


def test_the_v4_flash_side_of_the_rule_is_what_the_builtins_priced():
    """Every V4-Flash built-in's `# model:` header states the layers, hidden size, experts, top-k and expert ffn
    that forwards.V4_FLASH compares V4.1-Flash with (a rebuilt table of another shape would fail here)."""
    names = [n for n in builtin_names() if priced_model(n) == "deepseek-v4-flash"]
    assert len(names) > 20
    for name in names:
        header = next(line for line in (DATA_DIR / f"{name}.csv").read_text().splitlines() if line.startswith("# model:"))
        backbone = re.search(r"\((\d+) layers, hidden (\d+),", header)
        moe = re.search(r"MoE (\d+) experts top-(\d+), expert ffn (\d+)", header)
        assert backbone and moe, name
        assert tuple(map(int, backbone.groups())) == (V4_FLASH.layers, V4_FLASH.hidden), name
        assert tuple(map(int, moe.groups())) == (V4_FLASH.routed_experts, V4_FLASH.top_k, V4_FLASH.expert_ffn), name
    assert V41_FLASH.hidden != V4_FLASH.hidden
