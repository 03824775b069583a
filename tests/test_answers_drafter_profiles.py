"""Issue 39, item 3: drafting is priced on the target's own deployment (model, GPU, topology), or the mismatch is named.

Stories: `run` refused a DeepSeek-V4 target drafted by a Llama-3.1-8B profile
without a word; the shipped Azure search priced B200's drafting with an H200
drafter profile; a search over topologies kept one `-mtp` file for TP4 and
TP8.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.scenario import load_scenario, scenario_from_mapping
from specplan.simulator.scenario.search import search_points
from tests.conftest import BASE, REPO

V4_TP8 = "builtin:b200-deepseek-v4-flash-tp8ep8-sglang"
V4_TP4 = "builtin:b200-deepseek-v4-flash-tp4-sglang"
V4_DP4 = "builtin:b200-deepseek-v4-flash-dp4ep4-sglang"
LLAMA_DRAFTER = "builtin:h200-llama3.1-8b-vllm-drafter-1l"


def v4(drafter_path: str, **latency) -> dict:
    raw = copy.deepcopy(BASE)
    raw["hardware"] = {"profile": V4_TP8, "gpus_per_replica": 8}
    raw["engine"].pop("kv_capacity_tokens")
    raw["drafter"]["latency"] = {"kind": "profile", "path": drafter_path, **latency}
    return raw


def test_run_refuses_a_drafter_profile_of_another_model_gpu_and_topology(cli, tmp_path) -> None:
    path = tmp_path / "v4.yaml"
    path.write_text(yaml.safe_dump(v4(LLAMA_DRAFTER)))
    status, _out, err = cli("run", path, "--out", tmp_path / "out")
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "drafter.latency.path" in err and "h200-llama3.1-8b-vllm-drafter-1l" in err
    for difference in ("model deepseek-ai/DeepSeek-V4-Flash vs meta-llama/Meta-Llama-3.1-8B", "GPU B200 vs H200",
                       "topology TP8 EP8 DP1 vs TP1 EP1 DP1"):
        assert difference in err, err
    assert f"{V4_TP8}-mtp" in err  # the target's own drafter profiles are offered
    assert not (tmp_path / "out").exists()


def test_a_matching_drafter_profile_loads() -> None:
    scenario = scenario_from_mapping(v4(f"{V4_TP8}-mtp"), REPO)
    assert scenario.drafter.latency.path == f"{V4_TP8}-mtp"


def test_an_explicit_cross_deployment_drafter_runs_with_a_warning(cli, tmp_path) -> None:
    path = tmp_path / "v4.yaml"
    path.write_text(yaml.safe_dump(v4(LLAMA_DRAFTER, match_target=False)))
    status, _out, err = cli("check", path)
    assert status == 0, err
    assert err.startswith("specplan: warning: drafter.latency.path") and "GPU B200 vs H200" in err, err
    assert "match_target: false" in err


def test_a_topology_mismatch_alone_is_refused() -> None:
    with pytest.raises(ScenarioError, match="topology TP8 EP8 DP1 vs TP4 EP1 DP1"):
        scenario_from_mapping(v4(f"{V4_TP4}-mtp"), REPO)


def search_over(hardware: list[dict], variants: list[dict]) -> tuple[dict, list]:
    raw = v4(f"{V4_TP8}-mtp")
    raw["search"] = {"hardware": hardware, "variants": variants}
    scenario = scenario_from_mapping(raw, REPO)
    return raw, search_points(raw, scenario.search)


def test_a_search_over_topologies_picks_each_candidates_own_drafter_file() -> None:
    """TP4 and TP8 need different `-mtp` files: the variant names TP8's, the TP4 candidate gets TP4's."""
    hardware = [{"label": "TP8", "profile": V4_TP8, "gpus_per_replica": 8},
                {"label": "TP4", "profile": V4_TP4, "gpus_per_replica": 4}]
    variants = [{"label": "MTP-1", "drafter": {"block_size": 1,
                                               "latency": {"kind": "profile", "path": f"{V4_TP8}-mtp"}},
                 "policy": {"name": "mtp-1"}}]
    _raw, points = search_over(hardware, variants)
    drafters = {p.hardware.label: scenario_from_mapping(p.mapping(1), REPO).drafter.latency.path for p in points}
    assert drafters == {"TP8": f"{V4_TP8}-mtp", "TP4": f"{V4_TP4}-mtp"}


def test_a_hardware_options_drafter_latency_key_sets_each_familys_drafting() -> None:
    hardware = [{"label": "TP8", "profile": V4_TP8, "gpus_per_replica": 8},
                {"label": "TP4", "profile": V4_TP4, "gpus_per_replica": 4,
                 "drafter_latency": {"mtp": {"kind": "layers", "target_layers": 43, "drafter_layers": 1}}}]
    variants = [{"label": "MTP-1", "drafter": {"block_size": 1}, "policy": {"name": "mtp-1"}}]
    _raw, points = search_over(hardware, variants)
    tp4 = scenario_from_mapping(next(p for p in points if p.hardware.label == "TP4").mapping(1), REPO)
    assert tp4.drafter.latency.KIND == "layers" and tp4.drafter.latency.drafter_layers == 1


def test_a_search_candidate_without_a_drafter_of_its_own_is_refused_naming_the_key() -> None:
    """No DP4 DSpark built-in: the DP4 candidate is refused, naming search.hardware[1].drafter_latency.dspark."""
    hardware = [{"label": "TP8", "profile": V4_TP8, "gpus_per_replica": 8},
                {"label": "DP4", "profile": V4_DP4, "gpus_per_replica": 4}]
    variants = [{"label": "DSpark", "drafter": {"family": "dspark", "block_size": 3,
                                                "latency": {"kind": "profile", "path": f"{V4_TP8}-dspark"}},
                 "policy": {"name": "dspark-async"}}]
    raw = v4(f"{V4_TP8}-mtp")
    raw["search"] = {"hardware": hardware, "variants": variants}
    with pytest.raises(ScenarioError, match=r"search\.hardware\[1\]\.drafter_latency\.dspark") as err:
        scenario_from_mapping(raw, REPO)
    assert "topology TP1 EP4 DP4 vs TP8 EP8 DP1" in str(err.value) and "\n" not in str(err.value)


def test_the_shipped_azure_search_drafts_each_gpu_on_its_own_gpu() -> None:
    """scenarios/azure-conv-search.yaml priced B200's MTP and DSpark drafting with H200 drafter profiles."""
    scenario = load_scenario(REPO / "scenarios" / "azure-conv-search.yaml")
    raw = yaml.safe_load((REPO / "scenarios" / "azure-conv-search.yaml").read_text())
    for point in search_points(raw, scenario.search):
        built = scenario_from_mapping(point.mapping(1), (REPO / "scenarios").resolve())
        latency = built.drafter.latency
        if point.hardware.label == "B200":
            assert latency.KIND != "profile" or "h200" not in latency.path, point.label
        assert getattr(latency, "match_target", True) is not False, point.label


def test_a_harness_drafter_derived_from_its_target_matches_it() -> None:
    """The harness names a drafter after its target's shape (`micro-parallel-drafter-1l` for `micro`)."""
    from specplan.hwprofiles.deployment import Deployment, differences

    target = Deployment("micro", "CPU", None)
    assert differences(target, Deployment("micro-parallel-drafter-1l", "CPU", None)) == []
    assert differences(target, Deployment("microscope", "CPU", None)) == ["model micro vs microscope"]
