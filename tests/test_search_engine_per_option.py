"""A search prices each hardware option with its own engine memory settings (issue 45 follow-up).

A base scenario that states engine.kv_capacity_tokens, memory_fraction or
all_to_all states them for its own deployment (its decode profile): an
option on that profile keeps them, another GPU type or parallelism takes
its own profile's KV pool at its engine's own fraction and no all-to-all
backend, unless the option states its own. Each point is then the
simulation `plan` runs for the same deployment written plainly (one point
key); what an option did not inherit is said in one note, and a KV pool
an option's GPUs could never hold is refused in one line naming the option.
"""

from __future__ import annotations

import copy

import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import memory_model, serving_engine
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.memory import engine_kv_pool
from specplan.simulator.scenario.search import search_notes, search_points
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.search import expanded, plan_notes
from specplan.simulator.study.search_check import checked_points
from tests.conftest import REPO
from tests.test_search_prices_as_plan import (
    FLASH,
    TARGET,
    deployment,
    plan_key,
    search_keys,
    search_scenario,
)

H200 = "builtin:h200-deepseek-v4-flash-tp8ep8-sglang-fp8"
B200_KV = 20_000_000  # less than either GPU's pool: the old search priced the H200 with it, silently


def two_gpus(**h200: object) -> dict:
    """The issue's B200 deployment as a search's base, stating its KV pool and memory fraction, over its own B200
    option and an H200 option (the same model at TP8 EP8 on the other GPU)."""
    raw = search_scenario()
    raw["engine"].update(kv_capacity_tokens=B200_KV, memory_fraction=0.85)
    raw["search"]["serving"] = raw["search"]["serving"][:1]
    raw["search"]["hardware"].append({"label": "H200 TP8EP8", "profile": H200, "gpus_per_replica": 8, **h200})
    return raw


def plain(profile: str, **engine: object) -> dict:
    """The same deployment written plainly on `profile` (no prefill built-in of its own on the H200: its prefill
    batches are priced on its decode profile), with `engine` keys."""
    raw = deployment(host=False)
    raw["hardware"]["profile"] = profile
    if profile != FLASH:
        raw["engine"]["prefill"].pop("profile")
    raw["engine"].update(engine)
    return raw


def point_engines(raw: dict) -> dict:
    points = search_points(raw, scenario_from_mapping(raw, REPO).search, REPO)
    return {p.label.split(" / ")[0]: scenario_from_mapping(p.mapping(1), REPO).engine for p in points}


def profile_pool(profile: str) -> int:
    """One replica's KV pool as the profile's memory model gives it at the serving engine's own fraction."""
    scenario = scenario_from_mapping(plain(profile), REPO)
    step = load_profile(profile)
    pool = engine_kv_pool(scenario.engine, serving_engine("auto", None, step), step, 0)
    assert pool is not None
    return pool


def test_each_gpu_prices_its_own_kv_pool_and_each_point_is_plans_simulation() -> None:
    raw = two_gpus()
    engines = point_engines(raw)
    assert (engines["B200 TP8EP8"].kv_capacity_tokens, engines["B200 TP8EP8"].memory_fraction) == (B200_KV, 0.85)
    h200 = engines["H200 TP8EP8"]
    assert h200.memory_fraction is None and h200.kv_capacity_tokens == profile_pool(H200) != B200_KV
    assert profile_pool(H200) < profile_pool(FLASH)  # the two memory models differ: 141 GB against 180 GB GPUs
    keys = search_keys(raw, 2)
    assert keys["B200 TP8EP8 / aggregated + prefix cache / none"] == plan_key(
        plain(FLASH, kv_capacity_tokens=B200_KV, memory_fraction=0.85, prefix_cache=dict(raw["search"]["serving"][0]
                                                                                        ["prefix_cache"])), 2)
    assert keys["H200 TP8EP8 / aggregated + prefix cache / none"] == plan_key(
        plain(H200, prefix_cache=dict(raw["search"]["serving"][0]["prefix_cache"])), 2)


def test_an_option_states_its_own_kv_pool_fraction_and_all_to_all() -> None:
    a2a = {"backend": "deepep", "mode": "low_latency", "tokens_per_rank": 256}
    h200 = point_engines(two_gpus(kv_capacity_tokens=25_000_000, memory_fraction=0.8,
                                  all_to_all=a2a))["H200 TP8EP8"]
    assert (h200.kv_capacity_tokens, h200.memory_fraction) == (25_000_000, 0.8)
    assert (h200.all_to_all.backend, h200.all_to_all.mode, h200.all_to_all.tokens_per_rank) == (
        "deepep", "low_latency", 256)
    # a fraction alone sizes the option's pool at that fraction (the base's pool was for the base's fraction)
    at_08 = point_engines(two_gpus(memory_fraction=0.8))["H200 TP8EP8"]
    assert at_08.kv_capacity_tokens == scenario_from_mapping(plain(H200, memory_fraction=0.8),
                                                             REPO).engine.kv_capacity_tokens


def test_an_option_on_the_base_profile_keeps_the_bases_settings_unless_it_states_a_fraction() -> None:
    raw = two_gpus()
    raw["engine"]["all_to_all"] = {"backend": "deepep", "mode": "low_latency"}
    raw["search"]["hardware"].append({"label": "B200 at 0.8", "profile": FLASH, "gpus_per_replica": 8,
                                      "memory_fraction": 0.8})
    engines = point_engines(raw)
    assert engines["B200 TP8EP8"].all_to_all.backend == "deepep" and engines["H200 TP8EP8"].all_to_all is None
    at_08 = engines["B200 at 0.8"]
    assert at_08.memory_fraction == 0.8 and at_08.all_to_all.backend == "deepep"
    assert at_08.kv_capacity_tokens == scenario_from_mapping(plain(FLASH, memory_fraction=0.8),
                                                             REPO).engine.kv_capacity_tokens != B200_KV


def test_what_an_option_does_not_inherit_is_said_once() -> None:
    raw = two_gpus()
    notes = search_notes(raw, scenario_from_mapping(raw, REPO).search, REPO)
    assert notes == (
        "search.hardware[1] (H200 TP8EP8): the base scenario's engine.kv_capacity_tokens, engine.memory_fraction are "
        f"for its own deployment (profile {FLASH}), not this option's; its points take their own (KV pool: its "
        "profile's memory model at the engine's memory fraction; memory fraction: the engine's own rule for this "
        "GPU and parallelism): set search.hardware[1].kv_capacity_tokens / search.hardware[1].memory_fraction to "
        "state this option's",)
    stated = two_gpus(kv_capacity_tokens=25_000_000, memory_fraction=0.8)
    assert search_notes(stated, scenario_from_mapping(stated, REPO).search, REPO) == ()


def test_a_kv_pool_the_options_gpus_cannot_hold_is_refused_in_one_line_naming_the_option() -> None:
    most = memory_model(load_profile(H200)).most_tokens
    raw = two_gpus(kv_capacity_tokens=most + 1)
    with pytest.raises(SpecplanError, match=rf"search point 'H200 TP8EP8 / [^']*': search\.hardware\[1\]\."
                       rf"kv_capacity_tokens: {most + 1:,} KV tokens is more than profile "
                       r"h200-deepseek-v4-flash-tp8ep8-sglang-fp8's GPUs can hold at all") as err:
        expanded(raw, TARGET, RunOptions())
    assert "\n" not in str(err.value)
    with pytest.raises(SpecplanError, match=r"search\.hardware\[1\]\.kv_capacity_tokens: "):
        checked_points(raw)  # `specplan check` refuses it alike
    bad_fraction = two_gpus(memory_fraction=1.5)
    with pytest.raises(SpecplanError, match=r"search\.hardware\[1\]\.memory_fraction"):
        scenario_from_mapping(bad_fraction, REPO)


def test_an_option_whose_profile_has_no_memory_model_keeps_the_bases_pool_and_says_so() -> None:
    raw = copy.deepcopy(two_gpus())
    linear = {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.05}
    raw["search"]["hardware"][1] = {"label": "toy", "profile": linear, "gpus_per_replica": 8}
    assert point_engines(raw)["toy"].kv_capacity_tokens == B200_KV
    notes = search_notes(raw, scenario_from_mapping(raw, REPO).search, REPO)
    assert notes[-1] == (f"search.hardware[1] (toy): an inline profile has no memory model, so its points keep the "
                         f"base scenario's engine.kv_capacity_tokens ({B200_KV:,}); set "
                         "search.hardware[1].kv_capacity_tokens to state this option's own")


def test_a_search_plans_notes_are_the_searchs_then_each_points_once() -> None:
    raw = two_gpus()
    dp8 = "builtin:b200-deepseek-v4-flash-dp8ep8-sglang"
    raw["search"]["hardware"].append({"label": "B200 DP8", "profile": dp8, "gpus_per_replica": 8,
                                      "kv_capacity_tokens": 30_000_000, "memory_fraction": 0.8})
    raw["search"]["variants"] = [{"label": "a"}, {"label": "b"}]  # two points per option: each note once
    _raw, folder, name, points = expanded(raw, TARGET, RunOptions())
    notes = plan_notes(raw, folder, name, points, TARGET, RunOptions())
    assert len(notes) == 2 and notes[0].startswith("search.hardware[1] (H200 TP8EP8): the base scenario's")
    assert notes[1].startswith(f"engine.dp_attention: 8 ranks, from profile {dp8.removeprefix('builtin:')}'s header")
