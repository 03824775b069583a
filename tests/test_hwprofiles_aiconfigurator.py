"""Profiles imported from NVIDIA AIConfigurator's kernel database: importer, built-ins, limits.

Tests that call the package skip without it (the `aic` extra); the ones
about the committed files and the missing-package message run everywhere.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.builtins import AIC_BUILTINS
from specplan.hwprofiles.fileformat import DATA_DIR, builtin_names, read_profile_csv
from specplan.simulator.core.errors import SpecplanError

needs_aic = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                               reason="aiconfigurator-core (the 'aic' extra) is not installed")
LLAMA = "meta-llama/Meta-Llama-3.1-8B"
H200_8B = ("h200-llama3.1-8b-vllm", "h200-qwen3-8b-vllm")


def aic_cli(cli, out: Path, *extra: str) -> tuple[int, str, str]:
    return cli("profile", "--source", "aiconfigurator", "--model", LLAMA, "--system", "h200_sxm",
               "--backend", "vllm", "--backend-version", "0.24.0", "--out", out, *extra)


# --- the importer ----------------------------------------------------------------------------


@pytest.mark.slow("regenerates built-in profiles from AIConfigurator's kernel database")
@needs_aic
def test_importer_writes_a_verify_profile_that_keeps_tile_edges_and_regenerates_identically(cli, tmp_path):
    small = ("--max-tokens", "160", "--total-context", "0,65536", "--name", "small", "--quiet")
    assert aic_cli(cli, tmp_path / "a.csv", *small)[0] == 0
    assert aic_cli(cli, tmp_path / "b.csv", *small)[0] == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()   # no date, no noise
    profile = read_profile_csv(tmp_path / "a.csv")
    assert profile.max_tokens == 160 and list(profile.context_tokens) == [0, 65536]
    assert {1, 16, 17, 32, 33, 64, 65, 80, 81, 128, 129, 160} <= set(profile.tokens.tolist())
    meta = profile.provenance
    for key in ("package", "database", "backend", "parallelism", "dtype", "layout", "composition",
                "approximations", "provenance", "public_rule", "part.attention", "part.mlp_down", "kv_capacity_tokens"):
        assert meta[key], key
    assert "aiconfigurator-core 0.12.0" in meta["package"] and meta["backend"] == "vllm 0.24.0"
    assert "--source aiconfigurator --model meta-llama/Meta-Llama-3.1-8B --system h200_sxm" in meta["source"]
    attention = profile.extra["columns"]["attention_ms"]
    assert np.all(attention[1] > attention[0]) and np.all(attention < profile.step_ms_table)
    parts = profile.extra["parts"]     # the dense model's parts: no overlap, so they add up to the step at C = 0
    np.testing.assert_allclose(sum(parts.values()) + attention[0], profile.step_ms_table[0], atol=1e-5 * len(parts))


@pytest.mark.slow("runs AIConfigurator's compiled step estimator")
@needs_aic
def test_one_token_per_request_is_the_estimators_own_decode_step() -> None:
    """With q = 1 the composition is AIConfigurator's decode step; DESIGN §4's figures come out."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    from specplan.hwprofiles.aiconfigurator import AicTarget, VerifyPricer, compile_target

    compiled = compile_target(AicTarget(LLAMA, "h200_sxm"), 512, 1, 0.9)
    pricer = VerifyPricer(compiled, list(compiled.ops), 1)
    handle = EngineHandle.compile(LLAMA, "h200_sxm", "vllm", backend_version="0.24.0")
    for b, design_ms in ((1, 4.86), (128, 9.94), (512, 29.1)):
        ours = pricer.plain_ms(b) + pricer.attention_ms(b, b * 1025)   # KV 1024 + osl/2 + 1, as the estimator
        assert ours == pytest.approx(handle.decode_step_latency(b, 1024, 2), rel=1e-9)
        assert round(ours, 2 if design_ms < 10 else 1) == design_ms


@needs_aic
def test_a_verify_reads_each_cache_once_unlike_independent_decodes() -> None:
    from specplan.hwprofiles.aiconfigurator import AicTarget, VerifyPricer, compile_target

    compiled = compile_target(AicTarget(LLAMA, "h200_sxm"), 512, 4, 0.9)
    verify = VerifyPricer(compiled, list(compiled.ops), 4)     # 32 requests x 4 query tokens
    decodes = VerifyPricer(compiled, list(compiled.ops), 1)    # 128 one-token requests, each its own cache
    assert verify.attention_ms(128, 32 * 4096) * 2.5 < decodes.attention_ms(128, 128 * 4096)
    # the multi-token query costs little over one token per request at the same caches
    assert verify.attention_ms(128, 32 * 4096) < 1.15 * decodes.attention_ms(32, 32 * 4096)


@needs_aic
def test_an_operator_that_reads_the_cache_without_a_rule_is_refused() -> None:
    from specplan.hwprofiles.aiconfigurator import AicTarget, VerifyPricer, compile_target

    compiled = compile_target(AicTarget(LLAMA, "h200_sxm"), 64, 4, 0.9)
    ops = [copy.deepcopy(op) for op in compiled.ops]
    hidden = [{"Overlap": {"name": "wrapped_attention", "group_a": [op], "group_b": []}}
              if "GenerationAttention" in op else op for op in ops]
    with pytest.raises(SpecplanError, match="depends on the KV length and has no verify-shaped rule"):
        VerifyPricer(compiled, hidden, 4)


@needs_aic
def test_drafter_forward_from_the_same_operators(cli, tmp_path) -> None:
    status, out, _ = aic_cli(cli, tmp_path / "d.csv", "--drafter-layers", "2", "--drafter-fuse", "3",
                             "--max-tokens", "64", "--total-context", "0")
    assert status == 0 and "d.csv" in out
    drafter = read_profile_csv(tmp_path / "d.csv")
    assert "drafter forward: 2 dense decoder layers" in drafter.provenance["what"]
    assert "--drafter-layers 2 --drafter-fuse 3" in drafter.provenance["source"]
    target = load_profile("builtin:h200-llama3.1-8b-vllm")
    b = np.array([1, 16, 64])
    assert np.all(drafter.step_ms(b) < target.step_ms(b, 0) * (2 / 32 + 0.15))
    status, _, err = aic_cli(cli, tmp_path / "e.csv", "--drafter-layers", "1", "--drafter-moe")
    assert status == 2 and err.count("\n") == 1 and "has no MoE layers" in err


@needs_aic
@pytest.mark.parametrize(("extra", "message"), [
    (("--model", "nobody/Nothing-7B"), "ships no config for 'nobody/Nothing-7B'"),
    (("--system", "h900"), "--system: no AIConfigurator data for 'h900'"),
    (("--backend-version", "0.99"), "--backend-version: vllm 0.99 is not a version"),
    (("--repeats", "3"), "--repeats applies to --source torch"),
    (("--ep", "3"), "--ep: 3 must divide"),
])
def test_bad_importer_input_is_one_line_and_exit_2(cli, tmp_path, extra, message) -> None:
    status, _, err = aic_cli(cli, tmp_path / "x.csv", *extra)
    assert status == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "x.csv").exists()


def test_without_the_package_the_command_says_how_to_install_it(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator_core", None)   # `import aiconfigurator_core` now fails
    status, _, err = aic_cli(cli, tmp_path / "x.csv")
    assert status == 2
    assert err == "specplan: error: --source aiconfigurator needs aiconfigurator-core: pip install 'specplan[aic]'\n"


# --- the built-ins -----------------------------------------------------------------------------


# DeepSeek-V4 files regenerated here: one per code path (folded heads + indexer and vLLM's FP4 experts,
# heads past the native count on a DP8 grid, SGLang's FP4 experts on TP4/EP1, an FP8 sliding-window DSpark
# drafter over 6 positions, a DP8 MTP module, a MegaMoE block set by its public measurement on a DP4 grid;
# issue 36: shared-expert GEMMs set from their SGLang twin by the physical rule, V4-Pro on 4 GB300s with its own
# attention rows, a V4-Pro MegaMoE block set by DeepGEMM #316 on a DP8 grid; issue 47: a MegaMoE block set by B200's
# EP8 rows carried to EP4, on B200 and, unscaled, on B300); all regenerate byte for byte
# with `python -m specplan.hwprofiles.builtins` (~4 min with the rest on the shared machine), and every one's
# recorded command is checked against its entry below.
V4_REGENERATED = ("b200-deepseek-v4-flash-tp8ep8-vllm", "b300-deepseek-v4-pro-dp8ep8-vllm",
                  "b200-deepseek-v4-flash-tp4-sglang", "h200-deepseek-v4-flash-tp8ep8-sglang-fp8-dspark",
                  "b300-deepseek-v4-flash-dp8ep8-sglang-mtp", "gb300-deepseek-v4-flash-dp4ep4-sglang-megamoe",
                  "b300-deepseek-v4-pro-tp8ep8-vllm", "gb300-deepseek-v4-pro-tp4-sglang-dspark",
                  "b200-deepseek-v4-pro-dp8ep8-sglang-megamoe", "b200-deepseek-v4-flash-dp4ep4-sglang-megamoe",
                  "b300-deepseek-v4-flash-dp4ep4-sglang-megamoe")


@pytest.mark.slow("regenerates built-in profiles from AIConfigurator's kernel database")
@needs_aic
def test_aic_builtins_regenerate_byte_for_byte(tmp_path) -> None:
    from specplan.hwprofiles.builtins import regenerate_aic

    names = [n for n in AIC_BUILTINS if "deepseek-v4" not in n] + list(V4_REGENERATED)
    written = regenerate_aic(tmp_path, names)
    assert {p.stem for p in written} == set(names) and set(AIC_BUILTINS) <= set(builtin_names())
    for path in written:
        assert path.read_bytes() == (DATA_DIR / path.name).read_bytes(), path.name
        assert path.stat().st_size < 40_000, path.name


def test_every_aic_builtin_records_the_command_of_its_entry() -> None:
    from specplan.hwprofiles.aiconfigurator import aic_command

    for name, (target, layout, drafter) in AIC_BUILTINS.items():
        assert (DATA_DIR / f"{name}.csv").stat().st_size < 40_000, name
        source = load_profile(f"builtin:{name}").provenance["source"]
        assert source.endswith(f"({aic_command(target, layout, drafter)})"), name


def test_every_builtin_names_its_source() -> None:
    families = ("AIConfigurator", "vidur", "splitwise", "synthetic roofline", "specplan profile")
    for name in builtin_names():
        source = load_profile(f"builtin:{name}").provenance["source"]
        assert any(f in source for f in families), f"{name}: {source}"
    for name in AIC_BUILTINS:
        meta = load_profile(f"builtin:{name}").provenance
        assert "NVIDIA AIConfigurator" in meta["source"] and "aiconfigurator-core 0.12.0" in meta["package"]
        assert meta["license"].startswith("Apache-2.0") and meta["backend"] in ("vllm 0.24.0", "sglang 0.5.14")
    for name in ("synthetic-h200-llama3-8b", "synthetic-b200-llama3-8b"):
        assert load_profile(f"builtin:{name}").provenance["synthetic"] == "yes"
    assert "h200-llama3-8b" not in builtin_names() and "b200-llama3-8b" not in builtin_names()


def test_aic_builtins_reach_a_production_token_budget_and_keep_the_cliffs() -> None:
    for name, (target, layout, _) in AIC_BUILTINS.items():
        profile = load_profile(f"builtin:{name}")
        top = layout.max_tokens   # 8,192, or the prefill batches a built-in also prices (its comment says)
        assert top >= 8192 and profile.max_tokens == top and profile.context_tokens[0] == 0, name
        dp = target.dp     # data-parallel attention: the edges are the rank's, at dp x its tokens
        edges = {dp * m for m in (64, 65, 128, 129, 512, 513, 4096, 4097) if dp * m <= top}
        assert edges <= set(profile.tokens.tolist()), name
        powers = {dp * layout.query_tokens * 2**k for k in range(14)}
        assert {p for p in powers if p <= top} <= set(profile.tokens.tolist()), name
        if dp > 1:
            assert set(profile.tokens.tolist()) - {1} <= set(range(dp, top + 1, dp)), name
    llama = load_profile("builtin:h200-llama3.1-8b-vllm")
    assert llama.step_ms(513, 0) > 1.03 * llama.step_ms(512, 0)     # a measured tile edge, not smoothed


def test_lookups_beyond_the_measured_range_error_as_for_any_profile() -> None:
    for name in ("h200-llama3.1-8b-vllm", "h200-deepseek-v3-tp8ep8-vllm-mtp"):
        profile = load_profile(f"builtin:{name}")
        assert profile.extrapolation == "none"
        with pytest.raises(SpecplanError, match=r"8193 tokens is beyond its last measured point \(8192\)"):
            profile.step_ms([1, 8193], 0)


@pytest.mark.parametrize("name", H200_8B)
def test_an_8b_model_on_an_h200_never_beats_its_weight_read(name: str) -> None:
    """16.1 GB of bf16 weights at 4.8 TB/s: >= 3.35 ms at every B and context of the table."""
    profile = load_profile(f"builtin:{name}")
    assert profile.step_ms_table.min() >= 3.35
    b = np.arange(1, profile.max_tokens + 1)
    for context in profile.context_tokens:
        assert profile.step_ms(b, context).min() >= 3.35


def test_design_reference_points_from_the_committed_files() -> None:
    """Sanity against DESIGN §4 under the verify layout (4 query tokens per request)."""
    llama = load_profile("builtin:h200-llama3.1-8b-vllm")
    assert 4.8 < float(llama.step_ms(1, 0)) < 5.0
    deepseek = load_profile("builtin:h200-deepseek-v3-tp8ep8-vllm")
    assert 14.5 < float(deepseek.step_ms(1, 0)) < 16.0
    mtp = load_profile("builtin:h200-deepseek-v3-tp8ep8-vllm-mtp")
    assert np.all(mtp.step_ms([1, 64, 256], 0) < deepseek.step_ms([1, 64, 256], 0) / 20)


def test_the_deepseek_scenario_prices_steps_and_drafting_from_the_imported_curves() -> None:
    from specplan.simulator.scenario import load_scenario
    from tests.conftest import REPO

    scenario = load_scenario(REPO / "scenarios" / "deepseek-v3-h200.yaml")
    assert scenario.hardware.profile == "builtin:h200-deepseek-v3-tp8ep8-vllm"
    assert scenario.hardware.gpus_per_replica == 8
    assert scenario.engine.kv_capacity_tokens <= load_profile(scenario.hardware.profile).context_tokens[-1]
    paths = {v["drafter"]["latency"]["path"] for v in scenario.sweep.variants if "drafter" in v}
    assert paths == {"builtin:h200-deepseek-v3-tp8ep8-vllm-mtp"}
    assert scenario.drafter.latency.path == "builtin:h200-deepseek-v3-tp8ep8-vllm-drafter-3moe"
    assert max(scenario.sweep.load.users) >= 256 and scenario.sla is not None
    assert "stand in the qwen3-8b preset" in scenario.description
