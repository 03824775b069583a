"""The `search:` block: a deployment space expanded into candidate scenarios; bad spaces refused in one line."""

from __future__ import annotations

import copy

import pytest
import yaml

from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.search import search_points, usd_per_hour, usd_per_million_tokens
from tests.conftest import BASE, REPO

SPACE = {
    "hardware": [
        {"label": "H200", "profile": "builtin:h200-llama3.1-8b-vllm", "gpu_hour_usd": 3.5,
         "prefill_profile": "builtin:h200-llama3.1-8b-vllm-prefill"},
        {"label": "B200", "profile": "builtin:b200-llama3.1-8b-vllm", "gpu_hour_usd": 5.0,
         "prefill_profile": "builtin:b200-llama3.1-8b-vllm-prefill"},
    ],
    "serving": [{"mode": "aggregated", "chunk_tokens": 2048},
                {"mode": "disaggregated", "prefill_per_decode": [0.25, 0.5], "link": {"gbps": 400},
                 "model": "llama3-8b"}],
    "variants": [{"label": "MTP-1", "drafter": {"block_size": 1}, "policy": {"name": "mtp-1"}},
                 {"label": "static", "policy": {"name": "static", "params": {"length": 3}}}],
    "block_sizes": [2, 3],
}


def with_search(space: dict) -> dict:
    raw = copy.deepcopy(BASE)
    raw["engine"]["kv_capacity_tokens"] = 400_000  # within every option's memory model (checked at load)
    raw["search"] = space
    return raw


def test_the_space_expands_into_valid_scenarios() -> None:
    raw = with_search(SPACE)
    scenario = scenario_from_mapping(raw, REPO)
    points = search_points(raw, scenario.search)
    # 2 GPUs × (aggregated + 2 ratios) × (MTP-1 + static at γ 2 and 3)
    assert len(points) == 2 * 3 * 3
    assert points[0].label == "H200 / aggregated / MTP-1"
    disagg = next(p for p in points if p.label == "B200 / disaggregated 0.5:1 / static / γ=3")
    built = scenario_from_mapping(disagg.mapping(5), REPO)
    assert built.cluster.replicas == 5 and built.cluster.prefill.replicas == 3 and built.drafter.block_size == 3
    assert built.cluster.prefill.profile == "builtin:b200-llama3.1-8b-vllm-prefill" and built.search is None
    assert disagg.gpus(5) == 8
    agg = scenario_from_mapping(points[0].mapping(2), REPO)
    assert agg.engine.prefill.KIND == "chunked" and agg.cluster.prefill is None and agg.drafter.block_size == 1
    assert usd_per_hour(8, 5.0) == 40.0 and usd_per_million_tokens(36.0, 10_000) == pytest.approx(1.0)


@pytest.mark.parametrize(("change", "message"), [
    ({"hardware": []}, "search.hardware: needs at least one hardware option"),
    ({"hardware": [SPACE["hardware"][0], {**SPACE["hardware"][0]}]}, "duplicate label 'H200'"),
    ({"hardware": [{**SPACE["hardware"][0], "prefill_profile": None}]}, "needs a prefill profile for 'H200'"),
    ({"hardware": [SPACE["hardware"][0], {**SPACE["hardware"][1], "gpu_hour_usd": None}]}, "give a price"),
    ({"serving": [{"mode": "hybrid"}]}, "unknown mode 'hybrid'"),
    ({"serving": [{"mode": "disaggregated", "prefill_per_decode": [0.5, 0.5], "link": {"gbps": 1},
                   "model": "llama3-8b"}]}, "ratios must be distinct"),
    ({"serving": [{"mode": "disaggregated", "prefill_per_decode": [0], "link": {"gbps": 1},
                   "model": "llama3-8b"}]}, "prefill_per_decode"),
    ({"variants": [{"policy": {"name": "mtp-1"}}]}, "needs a non-empty label"),
    ({"block_sizes": [0]}, "block_sizes"),
    ({"gpus": ["H200"]}, "unknown key"),
])
def test_bad_search_spaces_are_refused_in_one_line(change: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message) as err:
        scenario_from_mapping(with_search({**SPACE, **change}), REPO)
    assert "\n" not in str(err.value)


def test_the_cli_rejects_a_bad_space_with_exit_2(cli, tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(with_search({**SPACE, "serving": [{"mode": "hybrid"}]})))
    status, _out, err = cli("check", path)
    assert status == 2 and "search.serving" in err and len(err.strip().splitlines()) == 1
