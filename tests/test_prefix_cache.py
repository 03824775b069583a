"""Prefix caching: an LRU of block hashes whose hits are known exactly, and cache-aware routing."""

from __future__ import annotations

import json

import pytest

from specplan.simulator.engine.cluster.prefix_cache import BlockCache
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.traces.readers import TraceFile, TraceReader
from tests.test_prefill_pool import pool_scenario

# (seconds, prompt tokens, block hashes): requests 1 s apart, so each one's prefill has ended before the next
TRACE = [(0, 1536, [1, 2, 3]), (1, 1536, [1, 2, 5]), (2, 1536, [1, 2, 3]), (3, 512, [9])]


def write_trace(path, rows=TRACE) -> str:
    lines = [json.dumps({"timestamp": t * 1000, "input_length": n, "output_length": 4, "hash_ids": h})
             for t, n, h in rows]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run(tmp_path, replicas: int, router: str, capacity_tokens: int = 1 << 20) -> dict:
    trace = write_trace(tmp_path / "trace.jsonl")
    scenario = pool_scenario(
        {"replicas": replicas, "router": router, "max_batch_tokens": 2048,
         "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.01},
         "prefix_cache": {"block_tokens": 512, "capacity_tokens": capacity_tokens}},
        horizon={"duration_s": 10, "warmup_s": 0},
        workload={"arrivals": {"kind": "trace", "path": trace, "format": "mooncake"}})
    return simulate(scenario)


def test_the_mooncake_reader_keeps_hash_ids(tmp_path) -> None:
    rows = list(TraceReader(TraceFile(write_trace(tmp_path / "t.jsonl"), "mooncake")))
    assert [r.blocks for r in rows] == [tuple(h) for _, _, h in TRACE]


def test_hits_of_a_known_reuse_pattern(tmp_path) -> None:
    """One replica: r1 reuses 2 blocks (1,024 tokens); r2 all 3 (1,535: the last token is computed)."""
    result = run(tmp_path, 1, "round_robin")
    s = result.summary
    assert s["prefill_tokens_saved"] == 1024 + 1535
    assert s["prefill_tokens_looked_up"] == 3 * 1536 + 512
    assert s["prefix_cache_hit_rate"] == pytest.approx(2559 / 5120)
    assert s["prefix_cache_block_hit_rate"] == pytest.approx(5 / 10)
    assert result.requests["cached_prompt_tokens"].tolist() == [0, 1024, 1535, 0]
    assert result.prefill_steps["prompt_tokens"].tolist() == [1536, 512, 1, 512]   # only the uncached suffix


def test_lru_evicts_a_prefix_from_its_tail(tmp_path) -> None:
    """Room for 3 blocks: r1's block 5 evicts block 3 (r0's last), so r2 finds 1, 2 and not 3."""
    s = run(tmp_path, 1, "round_robin", capacity_tokens=3 * 512).summary
    assert s["prefill_tokens_saved"] == 1024 + 1024


def test_cache_aware_routing_finds_the_replica_holding_the_prefix(tmp_path) -> None:
    rr = run(tmp_path, 2, "round_robin")
    aware = run(tmp_path, 2, "cache_aware")
    assert rr.requests["prefill_replica"].tolist() == [0, 1, 0, 1]
    assert rr.summary["prefill_tokens_saved"] == 1535                     # only r2 meets r0's blocks
    assert aware.requests["prefill_replica"].tolist() == [0, 0, 0, 0]      # longest prefix, ties to index 0
    assert aware.summary["prefill_tokens_saved"] == 1024 + 1535


def test_block_cache_unit() -> None:
    cache = BlockCache(capacity_blocks=2, block_tokens=4)
    assert cache.lookup((1, 2), 8) == 0
    cache.insert((1, 2))
    assert cache.match((1, 2, 3)) == 2 and cache.lookup((1, 2, 3), 12) == 8
    assert cache.lookup((1, 2), 8) == 7          # a whole-prompt hit still computes the last token
    cache.insert((7,))                            # evicts block 2 (a prefix's tail goes first)
    assert cache.match((1, 2)) == 1 and cache.match((7,)) == 1


def test_an_aggregated_replica_skips_its_cached_prefix(tmp_path) -> None:
    """Chunked prefill inside the decode replica: the same reuse pattern, the same hits, fewer chunk tokens."""
    from tests.conftest import make_scenario

    trace = write_trace(tmp_path / "trace.jsonl")
    scenario = make_scenario(
        horizon={"duration_s": 10, "warmup_s": 0},
        engine={"prefill": {"mode": "chunked", "chunk_tokens": 512},
                "prefix_cache": {"block_tokens": 512, "capacity_tokens": 1 << 20}},
        workload={"arrivals": {"kind": "trace", "path": trace, "format": "mooncake"}})
    result = simulate(scenario)
    s = result.summary
    assert s["prefill_tokens_saved"] == 1024 + 1535 and s["prefix_cache_hit_rate"] == pytest.approx(2559 / 5120)
    assert int(result.steps["prefill_tokens"].sum()) == 3 * 1536 + 512 - 2559
    assert s["requests_completed"] == 4


def test_a_cache_on_disaggregated_replicas_is_refused() -> None:
    from specplan.simulator.core.errors import ScenarioError
    from tests.conftest import make_scenario

    with pytest.raises(ScenarioError, match="needs chunked prefill"):
        make_scenario(engine={"prefix_cache": {"block_tokens": 512}})
