"""The replication record beside an answer (issue 45, item 11): how well public figures validate a deployment.

A plan on SGLang with DP attention on B200 (median |error| 49% in the
manual's own table) printed no caveat. `plan` and `run` now print the
record's line for the deployment's engine / GPU / layout, or that no public
figure covers it, and say when prompts are priced on the decode table. The
record ships as a derived table (benchmarks/ is not installed); it must
match the committed record.
"""

from __future__ import annotations

import copy
import csv

import pytest
import yaml

from specplan.hwprofiles import load_profile
from specplan.simulator.scenario.load import scenario_from_mapping
from specplan.simulator.study.replication_record import (
    RECORD,
    derive_record,
    model_name,
    read_record,
    validation_lines,
)
from tests.conftest import BASE, REPO, merged
from tests.test_planner import KNOWN, RATE
from tests.test_search_plan import SLA, space_scenario

PUBLISHED = REPO / "benchmarks" / "published"
V4_FLASH = merged(BASE, {
    "horizon": {"duration_s": 10, "warmup_s": 1},
    "hardware": {"profile": "builtin:b200-deepseek-v4-flash-tp8ep8-sglang", "gpus_per_replica": 8},
    "engine": {"max_batch_requests": 32},
    "drafter": {"family": "none", "block_size": 0}, "policy": {"name": "none"},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 2}, "prompt_tokens": {"kind": "fixed", "value": 1000},
                 "output_tokens": {"kind": "fixed", "value": 100}},
})


def lines_of(mapping, tmp_path):
    scenario = scenario_from_mapping(mapping, tmp_path)
    return validation_lines(scenario, load_profile(scenario.hardware.profile))


def test_the_shipped_table_matches_the_committed_record():
    assert RECORD.read_text() == derive_record(PUBLISHED), (
        "simulator/study/replication_record.csv is stale: run python -m specplan.simulator.study.replication_record")


def test_the_table_carries_the_records_own_group_figures():
    """The figures written out from benchmarks/published/results/replication.json, not read from the code."""
    stats = yaml.safe_load((PUBLISHED / "results" / "replication.json").read_text())["statistics"]["predicted"]
    record = read_record()
    for group, expected in stats["by_group"].items():
        assert record[group].figures == expected["figures"]
        if expected["figures"]:
            assert abs(record[group].median_abs_error - expected["median_abs_error"]) < 5e-5
    with RECORD.open() as handle:
        assert {row["group"] for row in csv.DictReader(handle)} == set(stats["by_group"])


def test_the_table_is_installed_as_package_data():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"specplan.simulator.study" = ["replication_record.csv"]' in pyproject


def test_model_names_drop_organisation_revision_and_repackaging():
    assert model_name("deepseek-ai/DeepSeek-V4-Flash-0731 (revision 9e16), FP4") == "DeepSeek-V4-Flash"
    assert model_name("nvidia/DeepSeek-V4-Flash-NVFP4") == "DeepSeek-V4-Flash"
    assert model_name("deepseek-ai/DeepSeek-V4-Flash-DSpark (284B, FP4 MoE)") == "DeepSeek-V4-Flash"
    assert model_name("meta-llama/Meta-Llama-3.1-8B") == "Meta-Llama-3.1-8B"


def test_a_covered_group_states_its_predicted_error_and_figures(tmp_path):
    record = read_record()["sglang/B200/tp"]
    (line,) = lines_of(V4_FLASH, tmp_path)
    assert line == (f"validation: SGLang on B200 with TP: predicted median |error| {record.median_abs_error:.0%} "
                    f"(max {record.max_abs_error:.0%}) over {record.figures} public figures of DeepSeek-V4-Flash "
                    "(docs/results/replication.md)")


def test_dp_attention_is_its_own_group(tmp_path):
    dp = merged(V4_FLASH, {"hardware": {"profile": "builtin:b200-deepseek-v4-flash-dp8ep8-sglang"},
                           "engine": {"dp_attention": {"ranks": 8}}})
    (line,) = lines_of(dp, tmp_path)
    assert line.startswith("validation: SGLang on B200 with DP attention: predicted median |error| 39% (max 97%) "
                           "over 16 public figures")


def test_a_group_no_public_figure_covers_says_so(tmp_path):
    (line,) = lines_of(merged(V4_FLASH, {"hardware": {"profile": "builtin:b300-deepseek-v4-flash-tp1-vllm",
                                                      "gpus_per_replica": 1}}), tmp_path)
    assert line == ("validation: vLLM on B300 with TP: no public figure covers this engine, GPU and layout "
                    "(docs/results/replication.md)")


def test_another_model_in_a_covered_group_is_not_covered(tmp_path):
    llama = merged(V4_FLASH, {"engine": {"name": "sglang", "kv_capacity_tokens": 500_000}, "hardware": {
        "profile": "builtin:h200-llama3.1-8b-vllm", "gpus_per_replica": 1}})
    (line,) = lines_of(llama, tmp_path)
    assert "are of DeepSeek-R1-0528, DeepSeek-V4-Flash, not Meta-Llama-3.1-8B's: no public figure covers this model" in line


def test_a_profile_of_no_engine_is_not_covered(tmp_path):
    (line,) = lines_of(BASE, tmp_path)
    assert "names no serving engine and GPU of the replication record: no public figure covers" in line


def test_prefill_on_the_decode_table_is_said_with_the_prefill_built_in_that_ships(tmp_path):
    chunked = merged(V4_FLASH, {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 8192}}})
    _, prefill = lines_of(chunked, tmp_path)
    assert prefill.startswith("validation: prefill is priced on the decode table; "
                              "builtin:b200-deepseek-v4-flash-tp8ep8-sglang-prefill ships")
    priced = merged(chunked, {"engine": {"prefill": {
        "profile": "builtin:b200-deepseek-v4-flash-tp8ep8-sglang-prefill"}}})
    assert len(lines_of(priced, tmp_path)) == 1


def test_prefill_on_the_decode_table_without_a_prefill_built_in(tmp_path):
    b300 = merged(V4_FLASH, {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 8192}}, "hardware": {
        "profile": "builtin:b300-deepseek-v4-flash-tp8ep8-sglang"}})
    _, prefill = lines_of(b300, tmp_path)
    assert "no -prefill built-in exists for this profile" in prefill


def test_run_and_plan_print_the_line_under_their_answer(cli, tmp_path):
    path = tmp_path / "v4.yaml"
    path.write_text(yaml.safe_dump(V4_FLASH))
    status, out, _ = cli("run", path, "--out", tmp_path / "out")
    assert status == 0 and "  validation: SGLang on B200 with TP: predicted median |error|" in out
    raw = copy.deepcopy(KNOWN)
    raw["sweep"]["variants"] = raw["sweep"]["variants"][1:]
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, out, _ = cli("plan", path, "--rate", RATE, "--sla", "tps_user_p50>=1", "--seeds", "1", "--quiet")
    assert status == 0 and "validation: profile linear(" in out and "no public figure covers this deployment" in out


@pytest.mark.slow("a whole capacity plan: a deployment search")
def test_a_search_prints_the_line_of_its_winner(cli, tmp_path):
    raw = space_scenario()
    raw["search"]["hardware"] = raw["search"]["hardware"][1:]        # the fast GPU alone
    raw["search"]["serving"] = raw["search"]["serving"][:1]          # aggregated alone
    raw["sla"] = {"bounds": [SLA]}
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, out, _ = cli("plan", path, "--rate", RATE, "--seeds", "1", "--max-replicas", "2", "--workers", "1",
                         "--quiet")
    assert status == 0 and "winner: fast / " in out
    assert "validation: profile linear(" in out and "no public figure covers this deployment" in out
