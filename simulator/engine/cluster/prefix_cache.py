"""A prefix cache of KV blocks, keyed by block hashes, least recently used out first.

Place in the data flow: a prefill replica (specplan.simulator.engine.cluster.prefill)
asks it, when a prompt's first chunk is scheduled, how many leading blocks of
the prompt it holds, computes only the rest, and adds the prompt's blocks
when its prefill ends. The cache-aware router asks every replica's cache the
same question (`match`, which changes nothing) and sends the request to the
longest match.

A request's blocks are the hashes of its prompt's consecutive blocks of
`block_tokens` tokens (Mooncake's `hash_ids`: block i's hash covers the
whole prefix up to it, so equal hashes mean equal prefixes). A hit is a run
of leading blocks that are all held; the first miss ends it. Cached tokens
are min(hit blocks × block_tokens, prompt − 1): as in vLLM, the last prompt
token is always computed (its logits give the first output token).

Eviction: LRU over blocks. A prompt's blocks are (re)inserted last block
first, so its first blocks are the most recent and a prefix is evicted from
its tail, the order vLLM's free-block queue frees them in: a cache never
keeps a block whose predecessors are gone longer than the predecessors.
Python-level work is per block (512 tokens in Mooncake's trace), never per
token.

In aggregated serving (chunked prefill inside the decode replicas,
`engine.prefix_cache`) each attention rank of a replica has one, asked at
admission (specplan.simulator.engine.cluster.kv_tiers, with a host tier behind it),
so a request's prompt chunks start after its cached prefix; its blocks are
inserted when its prompt completes. The cache is bounded on its own
(`capacity_tokens`, default the replica's KV capacity): an approximation of
vLLM, where cached blocks live in the free part of the one KV pool.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from itertools import takewhile


class BlockCache:
    """LRU set of block hashes holding at most `capacity_blocks` blocks."""

    def __init__(self, capacity_blocks: int, block_tokens: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.block_tokens = block_tokens
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.looked_up_blocks = 0
        self.hit_blocks = 0

    def match(self, blocks: Sequence[int]) -> int:
        """Leading blocks of `blocks` the cache holds (no side effect)."""
        return len(list(takewhile(self.blocks.__contains__, blocks)))   # the loop runs in C

    def lookup(self, blocks: Sequence[int], prompt_tokens: int) -> int:
        """Cached prompt tokens for a prompt about to be prefilled; the hit blocks become recent."""
        hits = self.match(blocks)
        self.touch(blocks, hits)
        return max(0, min(hits * self.block_tokens, prompt_tokens - 1))

    def touch(self, blocks: Sequence[int], hits: int) -> None:
        """A lookup of `blocks` found its first `hits`: counted, and those become recent (the first most)."""
        self.looked_up_blocks += len(blocks)
        self.hit_blocks += hits
        consume(map(self.blocks.move_to_end, reversed(blocks[:hits])))

    def insert(self, blocks: Sequence[int]) -> int:
        """A prefilled prompt's blocks: held from now on, its first block the most recent; returns how many
        were not held before."""
        held = self.blocks
        move = held.move_to_end
        added = 0
        for block in reversed(blocks):
            if block in held:
                move(block)
            else:
                held[block] = None
                added += 1
        while len(held) > self.capacity_blocks:
            held.popitem(last=False)
        return added


def consume(iterator: Iterator[object]) -> None:
    """Run an iterator to its end, keeping nothing (deque of length 0: the loop in C)."""
    deque(iterator, maxlen=0)


def cache_fields(caches: Sequence[BlockCache], looked_up_tokens: int, saved_tokens: int) -> dict[str, float | int]:
    """The summary's prefix-cache figures over a set of caches."""
    looked, hits = sum(c.looked_up_blocks for c in caches), sum(c.hit_blocks for c in caches)
    return {"prefix_cache_hit_rate": saved_tokens / looked_up_tokens if looked_up_tokens else float("nan"),
            "prefix_cache_block_hit_rate": hits / looked if looked else float("nan"),
            "prefill_tokens_saved": int(saved_tokens),
            "prefill_tokens_looked_up": int(looked_up_tokens),
            "prefix_cache_capacity_blocks": int(caches[0].capacity_blocks) if caches else 0}
