"""A deployment search prices exactly what `plan` prices for the same deployment (issue 45, item 1).

A search point's scenario at n replicas is compared with the scenario a
capacity plan runs for the same deployment written out plainly: the same
point key (the sha256 of the resolved scenario and every file it reads) is
the same simulation. Serving options that differ (a host tier, a prefix
cache's layout or value bytes, a chunk) never resolve to one scenario, and
their labels tell them apart; a hardware option carries its prefill
profile into an aggregated point's prefill batches and its data-parallel
attention into every point.
"""

from __future__ import annotations

import pytest

from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.search import search_points
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.planner import cluster_scenario, variant_mappings
from specplan.simulator.study.plan.search import expanded, point_scenario
from specplan.simulator.study.plan.target import Target
from specplan.simulator.study.points import point_key
from tests.conftest import REPO

FLASH = "builtin:b200-deepseek-v4-flash-tp8ep8-sglang"
CACHE = {"block_tokens": 64, "layout": "deepseek-v4-flash", "kv_value_bytes": 1}
HOST = {"ratio": 8, "gbytes_per_s": 64}


def deployment(host: bool) -> dict:
    """The issue's deployment written plainly: V4-Flash on 8 x B200 (TP8 EP8, SGLang), chunked prefill priced on
    its prefill built-in, a prefix cache in V4's FP8 layout, with or without a host tier."""
    cache = {**CACHE, "host": HOST} if host else dict(CACHE)
    return {
        "name": "flash-deployment", "seed": 45, "horizon": {"duration_s": 20, "warmup_s": 2},
        "hardware": {"profile": FLASH, "gpus_per_replica": 8},
        "cluster": {"replicas": 1, "router": "session"},
        "engine": {"max_batch_requests": 32, "cuda_graph": {}, "prefix_cache": cache,
                   "prefill": {"mode": "chunked", "chunk_tokens": 8192, "profile": f"{FLASH}-prefill"}},
        "policy": {"name": "none"},
        "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 2}, "prompt_tokens": {"kind": "fixed", "value": 4096},
                     "output_tokens": {"kind": "fixed", "value": 64}},
    }


def search_scenario() -> dict:
    """The same deployment as a search: the base states no serving of its own, the options state it all."""
    raw = deployment(host=False)
    raw["engine"] = {"max_batch_requests": 32, "cuda_graph": {}}
    raw["search"] = {
        "hardware": [{"label": "B200 TP8EP8", "profile": FLASH, "gpus_per_replica": 8,
                      "prefill_profile": f"{FLASH}-prefill"}],
        "serving": [{"mode": "aggregated", "chunk_tokens": 8192, "prefix_cache": dict(CACHE)},
                    {"mode": "aggregated", "chunk_tokens": 8192, "prefix_cache": {**CACHE, "host": HOST}}],
    }
    return raw


TARGET = Target("rate_per_s", 2.0, ("ttft_p90_s<=3",), seeds=1)


def plan_key(raw: dict, replicas: int) -> str:
    """The point key of the scenario `plan` runs for `raw` at `replicas` replicas and the target's demand."""
    [(_label, demand, where)], _folder, _name = variant_mappings(raw, TARGET, RunOptions())
    return point_key(cluster_scenario(demand, replicas, REPO, "<mapping>", where))


def search_keys(raw: dict, replicas: int) -> dict[str, str]:
    """Each search point's label and the point key of the scenario its probe at `replicas` runs."""
    _raw, folder, name, points = expanded(raw, TARGET, RunOptions())
    return {p.label: point_key(point_scenario(p, replicas, TARGET, RunOptions(), folder, name)) for p in points}


def test_a_search_point_is_the_simulation_plan_runs_for_the_same_deployment() -> None:
    keys = search_keys(search_scenario(), 3)
    assert list(keys) == ["B200 TP8EP8 / aggregated + prefix cache / none",
                          "B200 TP8EP8 / aggregated + prefix cache + host tier 8x / none"]
    without, with_host = keys.values()
    assert without == plan_key(deployment(host=False), 3)
    assert with_host == plan_key(deployment(host=True), 3)
    assert without != with_host


def test_every_key_a_serving_option_states_reaches_its_points() -> None:
    raw = search_scenario()
    points = search_points(raw, scenario_from_mapping(raw, REPO).search)
    built = [scenario_from_mapping(p.mapping(2), REPO).engine for p in points]
    assert [e.prefill.profile for e in built] == [f"{FLASH}-prefill"] * 2
    assert [e.prefill.chunk_tokens for e in built] == [8192, 8192]
    assert [(e.prefix_cache.layout, e.prefix_cache.kv_value_bytes) for e in built] == [("deepseek-v4-flash", 1)] * 2
    assert built[0].prefix_cache.host is None
    assert (built[1].prefix_cache.host.ratio, built[1].prefix_cache.host.gbytes_per_s) == (8, 64)


def test_an_option_that_states_no_serving_keeps_the_base_scenarios() -> None:
    raw = deployment(host=True)
    raw["search"] = {"hardware": [{"label": "B200", "profile": FLASH, "gpus_per_replica": 8}],
                     "serving": [{"mode": "aggregated"}, {"mode": "aggregated", "prefix_cache": "none",
                                                         "chunk_tokens": 4096}]}
    base, without = search_keys(raw, 2).items()
    assert base[0] == "B200 / aggregated / none" and base[1] == plan_key(deployment(host=True), 2)
    assert without[0] == "B200 / aggregated + no prefix cache / none"
    plain = deployment(host=True)
    plain["engine"].pop("prefix_cache")
    plain["engine"]["prefill"]["chunk_tokens"] = 4096
    assert without[1] == plan_key(plain, 2)


def test_a_hardware_option_carries_its_data_parallel_attention() -> None:
    raw = search_scenario()
    dp8 = "builtin:b200-deepseek-v4-flash-dp8ep8-sglang"
    raw["search"]["hardware"].append({"label": "B200 DP8", "profile": dp8, "gpus_per_replica": 8,
                                      "dp_attention": {"ranks": 8, "balance": "fewest_requests"}})
    points = search_points(raw, scenario_from_mapping(raw, REPO).search)
    engines = {p.label: scenario_from_mapping(p.mapping(1), REPO).engine for p in points}
    dp = engines["B200 DP8 / aggregated + prefix cache / none"].dp_attention
    assert (dp.ranks, dp.balance) == (8, "fewest_requests")
    assert engines["B200 TP8EP8 / aggregated + prefix cache / none"].dp_attention is None
    # another GPU shape does not inherit the base's ranks, and a DP8 option without a prefill built-in of its own
    # prices its prefill batches on its decode profile rather than TP8's prefill profile
    assert engines["B200 DP8 / aggregated + prefix cache / none"].prefill.profile is None


def test_a_bad_dp_attention_on_a_hardware_option_is_refused_in_one_line() -> None:
    raw = search_scenario()
    raw["search"]["hardware"][0]["dp_attention"] = {"ranks": 0}
    with pytest.raises(Exception, match=r"search\.hardware\[0\]\.dp_attention\.ranks: must be >= 1") as err:
        expanded(raw, TARGET, RunOptions())
    assert "\n" not in str(err.value)


def test_serving_options_whose_labels_would_repeat_are_refused() -> None:
    raw = search_scenario()
    raw["search"]["serving"] = [{"mode": "aggregated", "chunk_tokens": 2048},
                                {"mode": "aggregated", "chunk_tokens": 8192}]
    with pytest.raises(ScenarioError, match=r"search\.serving\[1\]\.label: its deployments would be labelled "
                       "'aggregated', as search.serving\\[0\\]'s are"):
        scenario_from_mapping(raw, REPO)
    raw["search"]["serving"][1]["label"] = "aggregated 8k"
    points = search_points(raw, scenario_from_mapping(raw, REPO).search)
    assert [p.label for p in points] == ["B200 TP8EP8 / aggregated / none", "B200 TP8EP8 / aggregated 8k / none"]


def test_a_host_tier_on_a_prefill_pool_is_refused_naming_the_serving_option() -> None:
    raw = search_scenario()
    raw["search"]["serving"] = [{"mode": "disaggregated", "prefill_per_decode": [0.5], "link": {"gbps": 400},
                                 "kv_bytes_per_token": 1000, "prefix_cache": {**CACHE, "host": HOST}}]
    with pytest.raises(ScenarioError, match=r"search\.serving\[0\]\.prefix_cache\.host"):
        scenario_from_mapping(raw, REPO)

