"""A replica's prefix reuse as engines keep it: a GPU prefix cache per attention rank, a host tier behind it.

Place in the data flow: with `engine.prefix_cache` (chunked prefill) the
simulation gives each replica a `ReplicaTiers`; the decode core asks it at
admission how many leading prompt tokens the request's rank holds
(`cached_tokens(rid, tokens, rank)`: its prompt chunks start after them) and
tells it when prompts complete (`prompts_done`: their blocks are kept). The
replica's clock (`LoadingClock`) makes the step that computes a request's
first chunk wait for the request's host load.

    GPU tier   one LRU block cache per data-parallel attention rank (each rank keeps its own KV,
               as SGLang's and vLLM's DP ranks do), the replica's capacity split evenly; keyed by
               the trace's block hashes (specplan.simulator.engine.cluster.prefix_cache.BlockCache)
    host tier  optional (`prefix_cache.host`: SGLang HiCache, vLLM CPU KV offload): per rank, `ratio` ×
               the GPU tier (default: the engine's row, SGLang's 2), capacity_tokens, or capacity_gb
               (GB / the layout's bytes per cached token: the layout sets what DRAM holds), LRU by write
               and load (a GPU hit does not refresh the host copy); the blocks a prompt computed are
               written to it when the prompt completes (write-through, HiCache's default policy); a
               prompt's blocks found there after its GPU hits are loaded back: bytes = tokens × the layout's bytes per
               token (hwprofiles.kv_layout), time = bytes / the rank's link + latency, FIFO on the
               link; the loaded blocks join the GPU tier
    window     DeepSeek-V4 (`layout: deepseek-v4-*`) keeps, per sequence, only the sliding-window
               tail at its end (for `window_tails` sequences, LRU: the SWA pool): a hit that ends
               where no kept tail is recomputes its last window (128 tokens)

A hit is the run of leading blocks held (GPU first, then host); cached
tokens are min(hit blocks × block_tokens, prompt − 1) (the last prompt token
is always computed), less the window where it must be recomputed.

Where the load is paid: the step that computes the request's first prompt
chunk waits until its load is done (the step's overhead grows by the wait),
so the whole batch pays it. That is SGLang's HiCache: the scheduler starts
the load back when it admits the request and the forward waits for the
layers to arrive (overlapped layer by layer, which this does not credit: an
upper bound while the load is shorter than the step's compute). vLLM's
offloading connector loads asynchronously and only the request waits; not
modelled.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from specplan.engines import EngineTraits
from specplan.hwprofiles.kv_layout import KvLayout, kv_layout
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.batch import RID
from specplan.simulator.engine.cluster.prefix_cache import BlockCache
from specplan.simulator.engine.core.state import BatchState
from specplan.simulator.engine.core.step import PRICED, StepPlan, StepTiming
from specplan.simulator.scenario.deployment import HostTier, PrefixCacheSpec


class HasBatch(Protocol):
    """What the loading clock reads of a decode core: its batch (the rows a step's prompt chunks belong to)."""

    state: BatchState


class RankTiers:
    """One attention rank's GPU cache, host tier, kept window tails and host link."""

    def __init__(self, gpu_blocks: int, host_blocks: int, block_tokens: int, tails: int) -> None:
        self.gpu = BlockCache(gpu_blocks, block_tokens)
        self.host = BlockCache(host_blocks, block_tokens) if host_blocks else None
        self.tails: OrderedDict[int, None] | None = OrderedDict() if tails else None
        self.tail_capacity = tails
        self.link_free_at = 0.0

    def keep_tail(self, block: int) -> None:
        tails = self.tails
        assert tails is not None
        tails[block] = None
        tails.move_to_end(block)
        while len(tails) > self.tail_capacity:
            tails.popitem(last=False)


class TierCounts:
    """Prompt tokens by where they came from, and the host tier's traffic."""

    def __init__(self) -> None:
        self.looked_up_tokens = 0
        self.gpu_hit_tokens = 0
        self.host_hit_tokens = 0
        self.window_recomputed_tokens = 0
        self.loaded_bytes = 0.0
        self.written_bytes = 0.0
        self.load_s = 0.0
        self.stall_s = 0.0

    @property
    def saved_tokens(self) -> int:
        return self.gpu_hit_tokens + self.host_hit_tokens


class ReplicaTiers:
    """A replica's prefix reuse (the module docstring): what the decode core asks at admission."""

    def __init__(self, spec: PrefixCacheSpec, capacity_tokens: int, ranks: int, layout: KvLayout | None,
                 tails: int, now: Callable[[], float]) -> None:
        self.block_tokens, self.now = spec.block_tokens, now
        self.layout = layout
        self.host = spec.host
        gpu_blocks = capacity_tokens // ranks // spec.block_tokens
        host_blocks = host_capacity_blocks(spec.host, gpu_blocks, ranks, spec.block_tokens)
        window = layout is not None and layout.window_tokens > 0
        self.ranks = [RankTiers(gpu_blocks, host_blocks, spec.block_tokens, tails if window else 0)
                      for _ in range(ranks)]
        self.blocks: dict[int, Sequence[int]] = {}
        self.rank_of: dict[int, int] = {}
        self.found: dict[int, int] = {}       # request → leading blocks its rank held at its lookup (not computed)
        self.pending: dict[int, float] = {}   # request → when its host load is done (its first chunk waits)
        self.counts = TierCounts()

    # ---- what the decode core asks (specplan.simulator.engine.prompts.Chunked) --------------------------------
    def remember(self, rid: int, blocks: Sequence[int]) -> None:
        self.blocks[rid] = blocks

    def forget(self, rid: int) -> None:
        """A request ended (finished or rejected): its blocks are no longer needed."""
        self.blocks.pop(rid, None)
        self.rank_of.pop(rid, None)
        self.found.pop(rid, None)
        self.pending.pop(rid, None)

    def block_list(self, rid: int) -> list[int]:
        """A request's block hashes as Python ints (the caches' keys); kept as given (an int64 array for
        sessions)."""
        blocks = self.blocks.get(rid)
        if blocks is None:
            return []
        return blocks.tolist() if isinstance(blocks, np.ndarray) else list(blocks)

    def cached_tokens(self, rid: int, tokens: int, rank: int = 0) -> int:
        """Prompt tokens the request's rank holds (GPU, then host: loaded), less a window to recompute."""
        blocks = self.block_list(rid)
        self.rank_of[rid] = rank
        if not blocks:
            return 0
        tiers, counts = self.ranks[rank], self.counts
        on_gpu = tiers.gpu.match(blocks)
        on_host = 0 if tiers.host is None else tiers.host.match(blocks[on_gpu:])
        held = on_gpu + on_host
        self.found[rid] = held
        hit = max(0, min(held * self.block_tokens, tokens - 1))
        if tiers.tails is not None and hit and blocks[held - 1] not in tiers.tails:
            recomputed = min(hit, self.layout.window_tokens if self.layout else 0)
            counts.window_recomputed_tokens += recomputed
            hit -= recomputed
        gpu_tokens = min(hit, on_gpu * self.block_tokens)
        tiers.gpu.touch(blocks, on_gpu)
        counts.looked_up_tokens += tokens
        counts.gpu_hit_tokens += gpu_tokens
        counts.host_hit_tokens += hit - gpu_tokens
        if on_host:
            self.load(rid, tiers, blocks[on_gpu:held], hit - gpu_tokens)
        return hit

    def load(self, rid: int, tiers: RankTiers, blocks: Sequence[int], tokens: int) -> None:
        """Host blocks back to the GPU tier over the rank's link, FIFO; the request's first chunk waits for it."""
        assert tiers.host is not None and self.host is not None and self.layout is not None
        tiers.host.touch(blocks, len(blocks))
        tiers.gpu.insert(blocks)
        size = self.layout.prefix_bytes(tokens, with_window=tiers.tails is not None)
        now = self.now()
        start = max(now, tiers.link_free_at)
        tiers.link_free_at = start + size / (self.host.gbytes_per_s * 1e9)
        self.pending[rid] = tiers.link_free_at + self.host.latency_ms / 1000.0
        self.counts.loaded_bytes += size
        self.counts.load_s += self.pending[rid] - start

    def prompts_done(self, ids: Sequence[int]) -> None:
        """Completed prompts: their blocks join the rank's GPU tier (and are written to its host tier)."""
        for rid in ids:
            rid = int(rid)
            blocks = self.block_list(rid)
            if not blocks:
                continue
            tiers = self.ranks[self.rank_of.get(rid, 0)]
            tiers.gpu.insert(blocks)
            if tiers.host is not None:
                self.write(tiers.host, blocks[self.found.get(rid, 0):])
            if tiers.tails is not None:
                tiers.keep_tail(blocks[-1])

    def write(self, host: BlockCache, computed: Sequence[int]) -> None:
        """Write-through: the blocks a prompt computed (past what its rank held) cross the link to the host tier
        (bytes counted, not priced); its recency is its writes and loads (a GPU hit does not refresh a block's
        host copy, nor write it again)."""
        new = host.insert(computed) if computed else 0
        if new and self.layout is not None:
            self.counts.written_bytes += new * self.block_tokens * self.layout.bytes_per_token

    # ---- what the replica and the summary read ---------------------------------------------------------------
    def ready_at(self, rids: Sequence[int]) -> float | None:
        """When the host loads of these requests (their first chunks run now) are done; None: none pending."""
        ready = [self.pending.pop(rid) for rid in rids if rid in self.pending]
        return max(ready) if ready else None

    def gpu_caches(self) -> list[BlockCache]:
        return [tiers.gpu for tiers in self.ranks]

    @property
    def looked_up_tokens(self) -> int:
        return self.counts.looked_up_tokens

    @property
    def saved_tokens(self) -> int:
        return self.counts.saved_tokens


def host_capacity_blocks(host: HostTier | None, gpu_blocks: int, ranks: int, block_tokens: int) -> int:
    if host is None:
        return 0
    if host.capacity_tokens is not None:
        return host.capacity_tokens // ranks // block_tokens
    assert host.ratio is not None  # replica_tiers resolves it
    return int(host.ratio * gpu_blocks)


def replica_tiers(spec: PrefixCacheSpec, capacity_tokens: int, ranks: int, max_batch_requests: int,
                  now: Callable[[], float], serving: EngineTraits) -> ReplicaTiers:
    """A replica's tiers from `engine.prefix_cache` (the layout named there, its window tails defaulted, the host
    tier's size from the serving engine's row where the scenario gives none)."""
    layout = None if spec.layout is None else kv_layout(spec.layout, spec.kv_value_bytes)
    host = spec.host
    if host is not None and host.capacity_gb is not None and layout is not None:
        tokens = int(host.capacity_gb * 1e9 / layout.bytes_per_token)
        spec = dataclasses.replace(spec, host=dataclasses.replace(host, capacity_tokens=max(tokens, 1)))
    elif host is not None and host.ratio is None and host.capacity_tokens is None:
        if serving.kv_offload is None:
            raise ScenarioError("engine.prefix_cache.host.ratio", f"{serving.label} states no host tier size as a "
                                "ratio: give ratio or capacity_tokens")
        spec = dataclasses.replace(spec, host=dataclasses.replace(host, ratio=serving.kv_offload.host_ratio))
    return ReplicaTiers(spec, capacity_tokens, ranks, layout, spec.window_tails or max_batch_requests, now)


class LoadingClock:
    """The priced step, made to wait for the host loads of the requests whose first prompt chunk it computes."""

    def __init__(self, core: HasBatch, tiers: ReplicaTiers) -> None:
        self.core, self.tiers = core, tiers

    def time(self, plan: StepPlan, now: float) -> tuple[StepTiming, float]:
        timing, wait_s = PRICED.time(plan, now)
        if not self.tiers.pending or plan.prefill_take is None:
            return timing, wait_s
        rids = self.core.state.batch.ints[RID][: plan.prefill_take.size][plan.prefill_take > 0]
        ready = self.tiers.ready_at(rids.tolist())
        stall_s = 0.0 if ready is None else max(0.0, ready - now)
        if stall_s <= 0:
            return timing, wait_s
        self.tiers.counts.stall_s += stall_s
        return timing._replace(overhead_ms=timing.overhead_ms + stall_s * 1000.0), wait_s + stall_s


def tier_fields(tiers: Sequence[ReplicaTiers]) -> dict[str, float | int]:
    """The summary's per-tier figures over every replica (prefix_cache_hit_rate, from prefix_cache, is both)."""
    counts = [t.counts for t in tiers]
    looked = sum(c.looked_up_tokens for c in counts)

    def share(value: float) -> float:
        return value / looked if looked else float("nan")

    return {"prefix_cache_gpu_hit_rate": share(sum(c.gpu_hit_tokens for c in counts)),
            "prefix_cache_host_hit_rate": share(sum(c.host_hit_tokens for c in counts)),
            "prefix_cache_window_recomputed_tokens": int(sum(c.window_recomputed_tokens for c in counts)),
            "kv_host_loaded_bytes": float(sum(c.loaded_bytes for c in counts)),
            "kv_host_written_bytes": float(sum(c.written_bytes for c in counts)),
            "kv_host_load_s": float(sum(c.load_s for c in counts)),
            "kv_host_stall_s": float(sum(c.stall_s for c in counts))}

