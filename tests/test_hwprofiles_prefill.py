"""Prefill-step profiles from AIConfigurator's context-phase tables: the built-ins and their layout."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.aiconfigurator import prefill_layout
from specplan.hwprofiles.builtins import PREFILL_BUILTINS
from specplan.hwprofiles.fileformat import DATA_DIR, builtin_names

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
