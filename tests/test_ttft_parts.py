"""TTFT and its parts: queue, prefill, transfer, the wait for a decode slot, the first decode step (issue 32, item 2).

requests.csv gives each part (`records.TTFT_PARTS`); in every prefill mode they add up to TTFT.
With disaggregated prefill the client's first token comes from the decode side, as in the
engines' disaggregated serving, so a full decode batch shows in TTFT; `engine.prefill.first_token:
prefill` keeps the stage's own token, which the decode side's wait does not delay.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.core.request_log import TTFT_PARTS
from specplan.simulator.scenario import load_scenario, scenario_from_mapping
from tests.conftest import BASE, REPO, merged

DEFAULT = REPO / "scenarios" / "default.yaml"
FIXED_RATE = {"mode": "disaggregated", "tokens_per_s": 20_000}
NO_STAGE = {"mode": "disaggregated", "tokens_per_s": 1e12}
POOL = {"replicas": 1, "router": "least_loaded", "max_batch_tokens": 512, "link": {"gbps": 50.0, "latency_ms": 1.0},
        "kv_bytes_per_token": 131072, "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.01}}
CACHE = {"block_tokens": 512, "capacity_tokens": 1 << 20}
BUSY = {"arrivals": {"kind": "poisson", "rate_per_s": 30}}   # the decode batch of 16 fills, KV runs short
MODES = {  # every way a prompt reaches the decode side
    "chunked-mixed": {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 64, "schedule": "mixed"}}},
    "chunked-separate": {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 64, "schedule": "separate"}}},
    "chunked-dp": {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 64}, "max_batch_requests": 32,
                              "dp_attention": {"ranks": 2}}},
    "fixed-rate": {"engine": {"prefill": FIXED_RATE}},
    "fixed-rate-first-token-prefill": {"engine": {"prefill": {**FIXED_RATE, "first_token": "prefill"}}},
    "pool": {"engine": {"prefill": NO_STAGE}, "cluster": {"prefill": POOL}},
}
PREEMPTING = {"chunked-mixed", "chunked-separate", "fixed-rate", "fixed-rate-first-token-prefill", "pool"}
TRACE_MODES = {  # prefix caches need a trace's block hashes
    "chunked-prefix-cache": {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 256}, "prefix_cache": CACHE}},
    "pool-prefix-cache": {"engine": {"prefill": NO_STAGE},
                          "cluster": {"prefill": {**POOL, "router": "cache_aware", "prefix_cache": CACHE}}},
}


def mooncake_trace(folder: Path) -> Path:
    """40 requests every 0.1 s sharing leading blocks (Mooncake's hash_ids), so a prefix cache hits."""
    path = folder / "trace.jsonl"
    rows = [{"timestamp": t * 100, "input_length": 1536 if t % 3 else 512, "output_length": 30,
             "hash_ids": [1, 2, 3 + t % 4]} for t in range(40)]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return path


def run_mode(changes: dict, workload: dict):
    """6 s of the base scenario in `changes`' mode, its KV cache tight enough that most modes preempt."""
    raw = merged(BASE, {"horizon": {"duration_s": 6, "warmup_s": 1}, "engine": {"kv_capacity_tokens": 2000},
                        "workload": workload})
    return simulate(scenario_from_mapping(merged(raw, changes), REPO))


def answered(requests: pd.DataFrame) -> pd.DataFrame:
    return requests[requests["first_token_s"].notna()]


@pytest.mark.parametrize("mode", [*MODES, *TRACE_MODES])
def test_the_parts_add_up_to_ttft_in_every_mode(mode, tmp_path):
    if mode in MODES:
        result = run_mode(MODES[mode], BUSY)
    else:
        trace = {"arrivals": {"kind": "trace", "path": str(mooncake_trace(tmp_path)), "format": "mooncake"}}
        result = run_mode(TRACE_MODES[mode], trace)
    requests = result.requests
    done = answered(requests)
    assert len(done) > 20
    parts = done[list(TTFT_PARTS)].to_numpy()
    assert not np.isnan(parts).any()
    assert (parts >= -1e-12).all()
    np.testing.assert_allclose(parts.sum(axis=1), done["ttft_s"], rtol=0, atol=1e-9)
    assert requests.loc[requests["first_token_s"].isna(), list(TTFT_PARTS)].isna().all().all()
    if mode in PREEMPTING:
        assert requests["preemptions"].sum() > 0   # re-passes through prefill kept their first pass's marks


def test_each_mode_has_its_own_stages():
    """Chunked prefill: admitted, then its chunks emit the first token; the fixed-rate stage: no transfer; the
    stage's own first token: nothing after it; a pool: every part."""
    spent = {mode: answered(run_mode(changes, BUSY).requests)[list(TTFT_PARTS)].sum()
             for mode, changes in MODES.items()}
    for mode in ("chunked-mixed", "chunked-separate", "chunked-dp"):
        assert (spent[mode][["ttft_transfer_s", "ttft_decode_wait_s", "ttft_first_step_s"]] == 0).all()
        assert (spent[mode][["ttft_queue_s", "ttft_prefill_s"]] > 0).all()
    assert spent["fixed-rate"]["ttft_transfer_s"] == 0
    assert (spent["fixed-rate"].drop("ttft_transfer_s") > 0).all()
    stage_token = spent["fixed-rate-first-token-prefill"]
    assert (stage_token[["ttft_transfer_s", "ttft_decode_wait_s", "ttft_first_step_s"]] == 0).all()
    assert (spent["pool"] > 0).all()


def one_request(prefill: dict):
    """One request: 100 prompt tokens at 1000 tokens/s, then steps of 1 + (10 + 3·1) ms emitting 3 tokens."""
    return simulate(scenario_from_mapping(merged(BASE, {
        "horizon": {"requests": 1, "warmup_s": 0},
        "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 1.0}},
        "engine": {"max_batch_requests": 4, "prefill": prefill},
        "drafter": {"family": "mtp", "block_size": 2, "latency": {"kind": "fixed", "ms": 1.0},
                    "acceptance": {"per_position": {"chat": [1.0, 1.0]}, "domains": {"chat": 1.0}}},
        "policy": {"name": "static", "params": {"length": 2}},
        "workload": {"arrivals": {"kind": "closed_loop", "users": 1, "think_s": 0},
                     "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 7}},
    }), REPO)).requests.iloc[0]


def test_one_request_gets_its_first_token_from_its_first_decode_step():
    req = one_request({"mode": "disaggregated", "tokens_per_s": 1000})
    parts = req[list(TTFT_PARTS)].to_numpy(dtype=float)
    np.testing.assert_allclose(parts, [0, 0.1, 0, 0, 0.014], atol=1e-12)
    assert req["ttft_s"] == pytest.approx(0.114)
    assert req["finish_s"] == pytest.approx(0.1 + 3 * 0.014)   # 7 tokens: 3 + 3 + 1, the first among them


def test_the_stage_can_stream_its_own_first_token():
    req = one_request({"mode": "disaggregated", "tokens_per_s": 1000, "first_token": "prefill"})
    np.testing.assert_allclose(req[list(TTFT_PARTS)].to_numpy(dtype=float), [0, 0.1, 0, 0, 0], atol=1e-12)
    assert req["finish_s"] == pytest.approx(0.1 + 2 * 0.014)   # the decode's 6: 3 + 3


@functools.cache
def full_decode_batch(*sets: str):
    """The issue's case: 400 closed-loop users on the default scenario's 128-request batch, 10 s."""
    scenario = load_scenario(DEFAULT, ["workload.arrivals.users=400", "horizon.duration_s=10", *sets])
    result = simulate(scenario, itl=True)
    requests = result.requests
    return result.summary, answered(requests[requests["arrival_s"] >= scenario.horizon.warmup_s])


def test_a_full_decode_batch_shows_in_ttft():
    """Every measured request waited seconds for a decode slot; its first token came after the slot, so TTFT's
    p99 holds the wait (it read 0.015 s under an ITL p99 of 3,383 ms, the wait counted as a token gap)."""
    summary, done = full_decode_batch()
    wait = done["ttft_decode_wait_s"]
    assert wait.median() > 1.0                                  # the batch is full
    assert (done["first_token_s"] > done["admitted_s"]).all()   # the decode side held it first
    assert (done["admitted_s"] >= done["kv_ready_s"]).all()
    assert summary["ttft_p99_s"] >= wait.quantile(0.99)
    assert summary["ttft_p99_s"] * 1000 > summary["itl_p99_ms"]


def test_a_prefill_pool_defines_ttft_the_same_way():
    """The same decode side behind a prefill pool with room to spare: the same parts, and the same wait for a
    slot as the fixed-rate stage's (400 users cycle through the same 128 slots at the same decode speed)."""
    pool = ("cluster.prefill={replicas: 12, router: pull, link: {gbps: 400, latency_ms: 0.5}, model: llama3-8b}",
            "engine.prefill={mode: disaggregated, tokens_per_s: 1e12}")
    summary, done = full_decode_batch(*pool)
    wait = done["ttft_decode_wait_s"]
    assert (done["first_token_s"] > done["admitted_s"]).all()
    assert summary["ttft_p99_s"] >= wait.quantile(0.99)
    assert done[list(TTFT_PARTS)].median().idxmax() == "ttft_decode_wait_s"
    _, fixed = full_decode_batch()
    assert wait.median() == pytest.approx(fixed["ttft_decode_wait_s"].median(), rel=0.1)


def test_the_stage_s_own_first_token_does_not_wait_for_a_slot():
    """`first_token: prefill`: the token comes before any decode slot, so TTFT misses the wait (named, not default)."""
    summary, done = full_decode_batch("engine.prefill={mode: disaggregated, tokens_per_s: 400000, first_token: prefill}")
    assert (done["ttft_decode_wait_s"] == 0).all()
    waited = done[done["admitted_s"].notna()]
    assert ((waited["admitted_s"] - waited["first_token_s"]).median()) > 1.0
    assert summary["ttft_p99_s"] < 0.1


def test_a_pool_s_requests_get_their_first_token_from_decode():
    with pytest.raises(ScenarioError, match="first_token"):
        scenario_from_mapping(merged(BASE, {"engine": {"prefill": {**NO_STAGE, "first_token": "prefill"}},
                                            "cluster": {"prefill": POOL}}), REPO)
