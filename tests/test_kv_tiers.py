"""Prefix reuse as engines keep it: hits per tier on a hand-made trace, the host tier's transfer time, DeepSeek-V4's
layout and window rule, per-rank caches and the sticky, DP-aware session router. Expected values are worked out
by hand in each docstring, never read from the code under test."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specplan.hwprofiles.kv_layout import kv_layout
from specplan.simulator.engine.cluster.kv_tiers import ReplicaTiers
from specplan.simulator.engine.cluster.router import Router
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario.deployment import HostTier, PrefixCacheSpec
from tests.conftest import merged
from tests.test_sessions import SESSION_BASE, STEP_S, TWO_TURNS, jsonl, sessions_scenario

LLAMA_BYTES = 2 * 32 * 8 * 128 * 2   # K and V, 32 layers, 8 KV heads of 128, bf16: 131,072 bytes a token


def tiers(gpu_blocks: int, host_blocks: int, layout: str = "llama3-8b", value_bytes: int = 2, tails: int = 0,
          gbytes_per_s: float = 1.0, latency_ms: float = 1.0, clock: list[float] | None = None) -> ReplicaTiers:
    spec = PrefixCacheSpec(block_tokens=64, host=HostTier(gbytes_per_s=gbytes_per_s, capacity_tokens=host_blocks * 64,
                                                          latency_ms=latency_ms),
                           layout=layout, kv_value_bytes=value_bytes)
    now = clock or [0.0]
    return ReplicaTiers(spec, gpu_blocks * 64, 1, kv_layout(layout, value_bytes), tails, lambda: now[0])


def test_hit_fractions_per_tier_on_a_hand_made_trace():
    """Request 0 (blocks 0-9, 640 tokens) finds nothing; its ten blocks go to the GPU tier, which keeps 4 (a prompt
    is inserted last block first, so its first blocks are the most recent: 0-3 stay) and to the host tier (all 10,
    write-through). Request 1 (blocks 0-12, 832 tokens) finds 0-3 on the GPU (256 tokens), 4-9 on the host (384
    tokens, loaded back), and computes the rest."""
    t = tiers(gpu_blocks=4, host_blocks=16)
    t.remember(0, list(range(10)))
    assert t.cached_tokens(0, 640) == 0
    t.prompts_done([0])
    assert t.counts.written_bytes == 10 * 64 * LLAMA_BYTES
    t.remember(1, list(range(13)))
    assert t.cached_tokens(1, 832) == 640
    counts = t.counts
    assert (counts.gpu_hit_tokens, counts.host_hit_tokens, counts.looked_up_tokens) == (256, 384, 640 + 832)
    assert counts.loaded_bytes == 384 * LLAMA_BYTES
    # the six loaded blocks joined the 4-block GPU tier, most recent, pushing 0-3 out: a third request for
    # blocks 0-9 finds no leading block on the GPU and loads all ten from the host
    t.remember(2, list(range(10)))
    assert t.cached_tokens(2, 640) == 639
    assert (t.counts.gpu_hit_tokens, t.counts.host_hit_tokens) == (256, 384 + 639)


def test_the_host_tier_load_takes_bytes_over_bandwidth_and_queues_on_the_link():
    """384 tokens × 131,072 bytes = 50,331,648 bytes at 1 GB/s: 50.33 ms, plus 1 ms latency. A second load on the
    same link waits for the first to leave it."""
    clock = [10.0]
    t = tiers(gpu_blocks=4, host_blocks=64, clock=clock)
    t.remember(0, list(range(10)))
    t.cached_tokens(0, 640)
    t.prompts_done([0])
    t.remember(1, list(range(13)))
    t.cached_tokens(1, 832)
    transfer = 384 * LLAMA_BYTES / 1e9
    assert t.pending[1] == pytest.approx(10.0 + transfer + 0.001)
    t.remember(2, [*range(10), 70])   # the GPU tier now holds 4-7 only: all ten blocks come from the host
    t.cached_tokens(2, 704)
    assert t.pending[2] == pytest.approx(10.0 + transfer + 640 * LLAMA_BYTES / 1e9 + 0.001)


def test_the_step_that_computes_a_host_hit_waits_for_its_load(tmp_path):
    """The two-turn session with a 4-block GPU tier: turn 1 finds 4 blocks on the GPU and 6 on the host (384
    tokens, 50.33 ms at 1 GB/s, + 1 ms): its first token comes one step and the load after it was sent."""
    path = jsonl(tmp_path / "s.jsonl", TWO_TURNS)
    tier = {"engine": {"prefix_cache": {"capacity_tokens": 256, "layout": "llama3-8b",
                                        "host": {"gbytes_per_s": 1.0, "capacity_tokens": 4096, "latency_ms": 1.0}}}}
    result = simulate(sessions_scenario(tmp_path, {"path": path, "format": "plain"}, **tier))
    second = result.requests.iloc[1]
    load_s = 384 * LLAMA_BYTES / 1e9 + 0.001
    assert second["ttft_s"] == pytest.approx(load_s + STEP_S)
    summary = result.summary
    assert summary["prefix_cache_host_hit_rate"] == pytest.approx(384 / (640 + 832))
    assert summary["prefix_cache_gpu_hit_rate"] == pytest.approx(256 / (640 + 832))
    assert summary["kv_host_stall_s"] == pytest.approx(load_s)
    assert summary["kv_host_loaded_bytes"] == 384 * LLAMA_BYTES


def test_deepseek_v4_keeps_the_compressed_kv_and_a_window_tail():
    """V4-Flash (config.json): 21 CSA layers keep a 512-value latent and a 128-value indexer key per 4 tokens,
    20 HCA layers a 512-value latent per 128 tokens: 21 × 640 / 4 + 20 × 512 / 128 = 3,440 values a token, one
    byte each in FP8; the window tail is 43 layers × 512 values per token for the last 128 tokens. V4-Pro: 30 CSA,
    31 HCA: 4,924."""
    flash, pro = kv_layout("deepseek-v4-flash", 1), kv_layout("deepseek-v4-pro", 1)
    assert flash.bytes_per_token == 3440 and pro.bytes_per_token == 4924
    assert flash.window_tokens == 128 and flash.window_bytes_per_token == 43 * 512
    assert flash.prefix_bytes(1000, with_window=True) == 1000 * 3440 + 128 * 43 * 512
    assert kv_layout("llama3-8b", 2).bytes_per_token == LLAMA_BYTES


def test_deepseek_v4_reuses_a_prefix_whole_only_where_its_window_tail_was_kept():
    """One kept tail (the SWA pool of one sequence). B extends A's prompt, whose tail (block 9) is kept: 640 tokens
    reused. C shares only A's first 5 blocks: the window before its cut is gone, so its last 128 of 320 tokens
    are computed again. After B's prompt (tail 11) the pool forgot block 9, so D, which extends A only, recomputes
    its window too."""
    t = tiers(gpu_blocks=100, host_blocks=0, layout="deepseek-v4-flash", value_bytes=1, tails=1)
    t.remember(0, list(range(10)))
    t.cached_tokens(0, 640)
    t.prompts_done([0])
    t.remember(1, list(range(12)))
    assert t.cached_tokens(1, 768) == 640
    t.remember(2, [*range(5), 50, 51])
    assert t.cached_tokens(2, 448) == 320 - 128
    t.prompts_done([1])
    t.remember(3, [*range(10), 99])
    assert t.cached_tokens(3, 704) == 640 - 128
    assert t.counts.window_recomputed_tokens == 256


# ---- routing --------------------------------------------------------------------------------------------------


def test_the_session_router_is_sticky_spreads_and_is_consistent():
    router = Router("session", [0] * 4, np.random.default_rng(0), ranks=2)
    keys = range(4000)
    slots = [router.route(k) for k in keys]
    assert slots == [router.route(k) for k in keys]                 # sticky
    counts = np.bincount([r * 2 + int(rank or 0) for r, rank in slots], minlength=8)
    assert counts.min() > 0.8 * 500 and counts.max() < 1.2 * 500   # 4000 keys over 8 slots
    grown = Router("session", [0] * 5, np.random.default_rng(0), ranks=2)
    moved = np.mean([grown.route(k) != s for k, s in zip(keys, slots, strict=True)])
    assert 0.15 < moved < 0.25                                       # 2 of 10 slots are new: ~1/5 move
    assert Router("session", [0] * 4, np.random.default_rng(0)).route(None) == (0, None)  # no key: round robin


def dp_scenario(tmp_path, router: str):
    path = jsonl(tmp_path / "s.jsonl", TWO_TURNS)
    return sessions_scenario(tmp_path, {"path": path, "format": "plain"},
                             cluster={"router": router},
                             engine={"dp_attention": {"ranks": 2, "balance": "round_robin"}})


def test_each_attention_rank_keeps_its_own_cache_and_the_session_router_keeps_a_session_on_one(tmp_path):
    """Two DP ranks, SGLang's round-robin dispatch: turn 1 lands on the other rank, whose cache never saw turn 0
    (nothing reused); routed by session, both turns land on one rank and turn 1 reuses 640 tokens."""
    scattered = simulate(dp_scenario(tmp_path, "round_robin")).summary
    sticky = simulate(dp_scenario(tmp_path, "session")).summary
    assert scattered["prefill_tokens_saved"] == 0
    assert sticky["prefill_tokens_saved"] == 640


def test_sticky_routing_over_replicas_reuses_as_much_as_one_replica_and_scattering_less(tmp_path):
    """Six sessions played once each on six lanes, caches too large to evict: a conversation that stays on its
    replica finds every prefix one replica would; round robin sends turns away from their prefix."""
    shape = {"sessions": 6, "turns_median": 5, "turns_sigma": 0, "first_prompt_median": 1000,
             "shared_prefix_tokens": 200, "output_median": 4, "output_sigma": 0, "gap_median_s": 0.2,
             "subagent_prompt_median": 1000}   # subagents as small as the sessions (routing is tested, not the defaults)
    saved = {}
    big = {"prefix_cache": {"capacity_tokens": 10_000_000}, "kv_capacity_tokens": 10_000_000}
    for name, cluster in (("one", {"replicas": 1}), ("sticky", {"replicas": 3, "router": "session"}),
                          ("scattered", {"replicas": 3, "router": "round_robin"})):
        scenario = sessions_scenario(tmp_path, {"generate": shape, "lanes": 6}, cluster=cluster, engine=big)
        saved[name] = simulate(scenario).summary["prefill_tokens_saved"]
    assert saved["sticky"] == saved["one"] > 0
    assert saved["scattered"] < saved["one"]


def test_a_host_tier_needs_a_layout_and_not_a_prefill_pool(tmp_path, cli):
    raw = merged(SESSION_BASE, {"engine": {"prefix_cache": {"host": {"gbytes_per_s": 64}}},
                                "workload": {"arrivals": {"kind": "sessions", "lanes": 1,
                                                          "generate": {"sessions": 2}}}})
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(raw))
    code, _, err = cli("check", path)
    assert code == 2 and "engine.prefix_cache.layout" in err
    raw["engine"]["prefix_cache"]["layout"] = "gpt-9"
    path.write_text(json.dumps(raw))
    code, _, err = cli("check", path)
    assert code == 2 and "unknown KV layout 'gpt-9'" in err


def test_the_host_tier_takes_its_size_from_the_engines_row_where_the_scenario_gives_none():
    """SGLang's row: --hicache-ratio 2, so a 10-block GPU tier has a 20-block host tier; vLLM states its
    offload in bytes, so the scenario must give a size."""
    from specplan.engines import engine_traits
    from specplan.simulator.core.errors import ScenarioError
    from specplan.simulator.engine.cluster.kv_tiers import replica_tiers

    spec = PrefixCacheSpec(block_tokens=64, host=HostTier(gbytes_per_s=64), layout="llama3-8b")
    sglang = replica_tiers(spec, 640, 1, 8, lambda: 0.0, engine_traits("sglang"))
    host = sglang.ranks[0].host
    assert host is not None and host.capacity_blocks == 20
    with pytest.raises(ScenarioError, match=r"engine\.prefix_cache\.host\.ratio"):
        replica_tiers(spec, 640, 1, 8, lambda: 0.0, engine_traits("vllm"))


def test_a_host_tier_in_gigabytes_holds_what_the_layout_says():
    """1.2 TB of host memory: 1.2e12 / 3,440 bytes = 348,837,209 DeepSeek-V4-Flash tokens (5,450,581 blocks of
    64), against 1.2e12 / 131,072 = 9,155,273 Llama-3.1-8B tokens (143,051 blocks)."""
    from specplan.engines import engine_traits
    from specplan.simulator.engine.cluster.kv_tiers import replica_tiers

    for layout, value_bytes, blocks in (("deepseek-v4-flash", 1, 5_450_581), ("llama3-8b", 2, 143_051)):
        spec = PrefixCacheSpec(block_tokens=64, host=HostTier(gbytes_per_s=64, capacity_gb=1200), layout=layout,
                               kv_value_bytes=value_bytes)
        host = replica_tiers(spec, 6400, 1, 8, lambda: 0.0, engine_traits("vllm")).ranks[0].host
        assert host is not None and host.capacity_blocks == blocks
