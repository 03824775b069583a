"""The traits table (specplan.engines): one row per engine and version, asked by everything else.

Stories: a version picks its row (its own, else the newest at or below it); a
profile's `backend:` line names a row; `engine.name` and `engine.version`
choose the serving engine, and every `auto` of the engine block takes that
row's habit; no module outside specplan.engines decides by an engine's name.
"""

from __future__ import annotations

import ast

import pytest

from specplan.engines import ENGINE_NAMES, NO_ENGINE, backend_traits, engine_traits, engine_versions
from specplan.errors import SpecplanError
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.aiconfigurator.physical_rule import RULE, twin_of
from specplan.hwprofiles.aiconfigurator.targets import AicTarget, engine_tables
from specplan.hwprofiles.builtins import v4_builtins
from specplan.hwprofiles.errors import ProfileError
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.config import EngineConfig
from tests.conftest import REPO, make_scenario

# the database ships DeepEP all-to-all tables for SGLang alone (comm/sglang/0.5.12): which tables exist, not a habit
DATABASE_NAMES = ("hwprofiles/aiconfigurator/deepep.py",)
# what an engine is in AIConfigurator's database, once columns of hwprofiles' own (now `EngineTraits.aic`)
MOVED_TO_ROWS = ("MEMORY_FRACTION_KIND", "TWIN_ENGINES", "BACKENDS = {")


def test_a_version_takes_its_own_row_else_the_newest_at_or_below_it():
    assert engine_traits("sglang", "0.5.14").version == "0.5.14"
    assert engine_traits("sglang", "0.5.13").version == "0.5.12.post1"
    assert engine_traits("sglang", "0.6.0").version == engine_versions("sglang")[-1]
    assert engine_traits("vllm").version == engine_versions("vllm")[-1]
    with pytest.raises(SpecplanError, match="older than every row"):
        engine_traits("vllm", "0.1")
    with pytest.raises(SpecplanError, match="unknown serving engine 'tgi'"):
        engine_traits("tgi")
    assert engine_traits("none") is NO_ENGINE


def test_a_profiles_backend_line_names_its_row():
    assert backend_traits("sglang 0.5.14").label == "SGLang 0.5.14"
    assert backend_traits("vllm 0.24.0").name == "vllm"
    assert backend_traits("trtllm 1.2.0rc5").name == "trtllm"
    assert backend_traits("") is NO_ENGINE and backend_traits("tgi 2.0") is NO_ENGINE


def test_every_row_says_its_habits():
    for name in ENGINE_NAMES:
        for version in engine_versions(name):
            row = engine_traits(name, version)
            assert row.graphs.axis in ("tokens", "requests") and row.graphs.source
            assert row.graphs.default_sizes(64, True)[0] == 1
            assert row.scheduler.budget in ("truncate", "defer")
            assert row.launch is not None


def config(engine: dict, profile: str = "builtin:h200-llama3.1-8b-vllm", block: int = 3) -> EngineConfig:
    scenario = make_scenario(hardware={"profile": profile}, engine=engine)
    return EngineConfig.from_scenario(scenario, load_profile(scenario.hardware.profile), block)


def test_auto_is_the_engine_a_built_in_was_read_for():
    vllm = config({"max_batch_requests": 64, "kv_capacity_tokens": 500_000})
    assert (vllm.serving.name, vllm.truncate_budget, vllm.prefill_schedule) == ("vllm", True, "mixed")
    assert vllm.spec_step_fraction == pytest.approx(engine_traits("vllm").host.spec_step_fraction)


def test_naming_the_engine_gives_a_plain_profile_its_habits():
    linear = {"kind": "linear", "base_ms": 8.0, "per_token_ms": 0.02}
    plain = config({"max_batch_requests": 64}, profile=linear)
    assert plain.serving is NO_ENGINE and plain.spec_step_fraction == 0.0 and not plain.truncate_budget
    named = config({"max_batch_requests": 64, "name": "sglang", "version": "0.5.15",
                    "prefill": {"mode": "chunked", "chunk_tokens": 512},
                    "cuda_graph": {}}, profile=linear)
    assert (named.serving.label, named.prefill_schedule, named.graph_axis) == ("SGLang 0.5.15", "separate",
                                                                               "requests")
    assert named.spec_step_fraction == pytest.approx(engine_traits("sglang").host.spec_step_fraction)


def test_a_version_without_an_engine_or_older_than_the_rows_is_refused():
    with pytest.raises(ScenarioError, match=r"engine.version: a version needs an engine"):
        make_scenario(engine={"max_batch_requests": 8, "version": "0.5.14"})
    with pytest.raises(ScenarioError, match=r"engine.version: .*older than every row"):
        make_scenario(engine={"max_batch_requests": 8, "name": "sglang", "version": "0.1"})


def engine_name_decisions(path) -> list[str]:
    """Comparisons against an engine's name, and mappings keyed by one, in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        values = []
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values += side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
        elif isinstance(node, ast.Dict):
            values = [key for key in node.keys if key is not None]
        if any(isinstance(v, ast.Constant) and v.value in ENGINE_NAMES for v in values):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_no_module_outside_the_table_decides_by_an_engines_name():
    folders = ("simulator", "policies", "hwprofiles", "traces", "reports", "validation", "specplan")
    files = [f for folder in folders for f in (REPO / folder).rglob("*.py")
             if not str(f.relative_to(REPO)).startswith(DATABASE_NAMES)]
    assert not [hit for f in files for hit in engine_name_decisions(f)]


def test_a_row_says_what_its_engine_is_in_aiconfigurators_database():
    vllm, sglang, trtllm = (engine_traits(name).aic for name in ("vllm", "sglang", "trtllm"))
    assert (vllm.memory_fraction, vllm.version, vllm.twin) == ("of_total", "0.24.0", "sglang")
    assert (sglang.memory_fraction, sglang.version, sglang.twin) == ("of_total", "0.5.14", "vllm")
    assert (trtllm.memory_fraction, trtllm.version, trtllm.twin) == ("of_free", None, None)
    assert all(row.aic == sglang for row in (engine_traits("sglang", v) for v in engine_versions("sglang")))
    assert engine_tables("tgi") is NO_ENGINE.aic and NO_ENGINE.aic.twin is None
    assert twin_of("vllm") == ("sglang", "0.5.14") and twin_of("sglang") == ("vllm", "0.24.0")
    assert twin_of("trtllm") is None and "vLLM 0.24.0 <-> SGLang 0.5.14" in RULE


def test_a_target_and_the_built_ins_read_the_table_version_from_the_row():
    assert AicTarget("m", "h200_sxm").backend_version == "0.24.0"
    assert AicTarget("m", "h200_sxm", "sglang").backend_version == "0.5.14"
    assert AicTarget("m", "h200_sxm", "sglang", "0.5.12").backend_version == "0.5.12"
    with pytest.raises(ProfileError, match="--backend-version: no built-in reads trtllm"):
        AicTarget("m", "h200_sxm", "trtllm")
    versions = {(t.backend, t.backend_version) for t, _layout, _drafter in v4_builtins().values()}
    assert versions == {("vllm", "0.24.0"), ("sglang", "0.5.14")}


def test_no_module_but_the_rows_defines_an_engines_database_columns():
    sources = [f for folder in ("hwprofiles", "simulator", "specplan", "engines") for f in (REPO / folder).rglob("*.py")]
    assert not [f"{f.relative_to(REPO)}: {name}" for f in sources for name in MOVED_TO_ROWS if name in f.read_text()]
