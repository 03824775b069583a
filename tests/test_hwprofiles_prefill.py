"""Prefill-step profiles from AIConfigurator's context-phase tables: the built-ins and their layout."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.aiconfigurator import prefill_layout
from specplan.hwprofiles.builtins import PREFILL_BUILTINS
from specplan.hwprofiles.fileformat import DATA_DIR, builtin_names
from specplan.hwprofiles.profile import StepProfile
from tests.conftest import REPO

needs_aic = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                               reason="aiconfigurator-core (the 'aic' extra) is not installed")


@pytest.mark.slow("regenerates built-in profiles from AIConfigurator's kernel database")
@needs_aic
def test_prefill_builtins_regenerate_byte_for_byte(tmp_path) -> None:
    from specplan.hwprofiles.builtins import prefill_builtins, write_all

    written = write_all(prefill_builtins(), tmp_path)
    assert {p.stem for p in written} == set(PREFILL_BUILTINS) <= set(builtin_names())
    for path in written:
        assert path.read_bytes() == (DATA_DIR / path.name).read_bytes(), path.name
        assert path.stat().st_size < 45_000, path.name


@pytest.mark.slow("regenerates built-in profiles from AIConfigurator's kernel database")
@needs_aic
def test_uniform_batches_match_the_estimators_own_prefill() -> None:
    """At measured (T, C) points of a uniform batch the table is the estimator's context phase (LM head aside)."""
    from specplan.hwprofiles.aiconfigurator import (
        AicTarget,
        PrefillPricer,
        compile_target,
        context_op_list,
    )

    target = AicTarget("meta-llama/Meta-Llama-3.1-8B", "h200_sxm")
    compiled = compile_target(target, 16384, 1, 0.9)
    handle = PrefillPricer(compiled, context_op_list(compiled)).handle
    profile = load_profile("builtin:h200-llama3.1-8b-vllm-prefill")
    for requests, isl, prefix in ((1, 1024, 0), (8, 1024, 0), (1, 8192, 0), (16, 512, 0), (1, 4096, 1024)):
        new = isl - prefix
        tokens, pairs = requests * new, requests * new * (new + 2 * prefix)
        expected = handle.predict_prefill_latency(requests, isl, prefix)
        assert float(profile.step_ms(tokens, pairs)) == pytest.approx(expected, rel=0.02), (requests, isl, prefix)


def test_the_canonical_layout_reads_uniform_batches_back() -> None:
    assert prefill_layout(8192, 8 * 1024**2) == (8, 1024, 0)
    assert prefill_layout(1024, 1024 * (1024 + 2 * 7168)) == (1, 1024, 7168)
    assert prefill_layout(64, 10) == (64, 1, 0)        # below one token per request: clamped


def test_prefill_builtins_are_prefill_phase_and_physical() -> None:
    for name in PREFILL_BUILTINS:
        profile = load_profile(f"builtin:{name}")
        meta = profile.provenance
        assert meta["phase"] == "prefill" and "NVIDIA AIConfigurator" in meta["source"]
        assert "past the last row the last two rows' slope continues (an estimate" in meta["context_axis"], name
        assert profile.max_tokens == 16384 and int(meta["kv_capacity_tokens"].split()[0]) > 100_000
        t = np.array([1024, 4096, 16384])
        ms = profile.step_ms(t, t * t)
        assert np.all(np.diff(ms) > 0)
        # compute bound: every model here does at least an 8B dense model's ~16 GFLOP per prompt token; no GPU here
        # beats 2.5 PFLOP/s dense bf16, and a replica has PREFILL_BUILTINS[name].gpus of them
        assert np.all(ms / 1000 > t * 16e9 / (2.5e15 * PREFILL_BUILTINS[name].gpus))
    h200 = load_profile("builtin:h200-llama3.1-8b-vllm-prefill")
    b200 = load_profile("builtin:b200-llama3.1-8b-vllm-prefill")
    assert float(b200.step_ms(8192, 8192 * 1024)) < float(h200.step_ms(8192, 8192 * 1024))


def two_row_profile(phase: str | None) -> StepProfile:
    provenance = {"source": "hand-made"} | ({"phase": phase} if phase else {})
    return StepProfile(name="two-rows", tokens=np.array([1, 1000]), context_tokens=np.array([0.0, 1e6]),
                       step_ms_table=np.array([[1.0, 10.0], [2.0, 30.0]]), provenance=provenance)


def test_a_prefill_profile_continues_its_pairs_axis_past_the_last_row() -> None:
    """Context-phase attention is bound by the pairs it computes: at B = 1000 the rows are 10 ms at 0 pairs and
    30 ms at 1e6, so 3e6 pairs cost 30 + 20 x 2 = 70 ms (held at 30 ms before); a decode profile still clamps."""
    from specplan.hwprofiles.dense import DenseCurve

    prefill, decode = two_row_profile("prefill"), two_row_profile(None)
    assert float(prefill.step_ms(1000, 3e6)) == pytest.approx(70.0)
    assert float(prefill.step_ms(1000, 5e5)) == pytest.approx(20.0)          # inside the axis: unchanged
    assert float(decode.step_ms(1000, 3e6)) == pytest.approx(30.0)
    assert DenseCurve(prefill, 1000).ms(1000, 3e6) == pytest.approx(70.0)    # the engine's tables agree
    assert DenseCurve(decode, 1000).ms(1000, 3e6) == pytest.approx(30.0)


def test_the_v4_prefill_builtin_prices_a_chunk_over_a_1m_prefix_past_its_last_row() -> None:
    """b200-deepseek-v4-flash-tp8ep8-sglang-prefill's last pairs row is 8,589,934,592 (an 8,192-token chunk over
    a ~520K prefix); a chunk over a 1M prefix (8,192 x (8,192 + 2 x 1,000,000) pairs) costs more than that row, by
    the last two rows' slope."""
    profile = load_profile("builtin:b200-deepseek-v4-flash-tp8ep8-sglang-prefill")
    c = profile.context_tokens.astype(float)
    pairs = 8192 * (8192 + 2 * 1_000_000)
    last, before = (float(profile.step_ms(8192, x)) for x in (c[-1], c[-2]))
    assert pairs > c[-1]
    assert float(profile.step_ms(8192, pairs)) == pytest.approx(last + (last - before) / (c[-1] - c[-2])
                                                                * (pairs - c[-1]))


def test_a_scenario_whose_prompts_read_past_the_pairs_axis_says_so_in_one_note() -> None:
    """vLLM #51454's TP8 case: a 1,040,000-token prompt's last 8,192-token chunk reaches 8,192 x (8,192 + 2 x
    1,031,808) = 1.70e10 pairs, past the prefill built-in's last row (8.59e9): its notes say the slope is an
    estimate; at 65,536 tokens the chunk stays inside the table and nothing is said."""
    from specplan.simulator.scenario import load_scenario

    case = REPO / "benchmarks" / "published" / "vllm-51454-v4-flash-b200-tp8-step" / "scenario.yaml"
    (note,) = [n for n in load_scenario(case).notes if n.startswith("engine.prefill.profile")]
    assert "a prompt of 1,040,000 tokens reaches 1.7e+10 attention pairs in its last chunk of 8,192" in note
    assert "past the profile's last row (8.59e+09)" in note and "an estimate" in note
    short = load_scenario(case, ["workload.prompt_tokens={kind: fixed, value: 65536}"])
    assert not [n for n in short.notes if n.startswith("engine.prefill.profile")]
