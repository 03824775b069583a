"""The reference engine's models: the harness's torch decoder as target and as drafter.

`TorchRunner` owns the real compute of `specplan.validation.engine`:

    target   specplan.hwprofiles.torch_model.DecoderModel of the scenario's shape, random
             weights, one KV-cache slot per running request (prompt chunks and
             verified tokens are written by the same flattened forward). Slots
             stay compact: the N running requests hold slots 0 .. N−1 (a release
             moves the last slot's KV into the hole), and a verify runs its
             requests in slot order, so the forward reads the cache as a view,
             as the harness's profile does, instead of gathering a copy of
             every layer's K/V per step (a paged engine reads its blocks in
             place; copying them would be this engine's own artefact)
    drafter  a DFlash-style parallel drafter: `modelshape.drafter_shape(target,
             "parallel", layers)`, one forward over the R·(γ+1) positions of
             the drafting requests' blocks (the anchor and γ masks each),
             attending within each block (no cache)

Each forward is split the way the profiling harness times it: building the
token ids and the `VerifyLayout` and committing the cache afterwards are host
work, measured by the engine as such; `verify` and `draft` return only the
forward's own milliseconds, the quantity the harness's profiles price.
Token ids are random (acceptance is decided by the simulator's models); the
arithmetic is the model's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch

from specplan.hwprofiles.modelshape import ModelShape, drafter_shape
from specplan.hwprofiles.torch_model import DecoderModel, VerifyLayout
from specplan.simulator.core.errors import SpecplanError


class ModelRunner(Protocol):
    """What the engine needs from a model: per-request cache slots and timed forwards."""

    def warm_up(self, max_step_tokens: int, max_requests: int, block_size: int) -> None: ...
    def open(self, rid: int) -> None: ...
    def release(self, rids: np.ndarray) -> None: ...
    def verify(self, rids: np.ndarray, tokens: np.ndarray, prefill: np.ndarray | None = None) -> float: ...
    def keep(self, rids: np.ndarray, kept_tokens: np.ndarray) -> None: ...
    def draft(self, requests: int, block_size: int) -> float: ...


def timed_ms(run: Callable[[], object]) -> float:
    """Milliseconds one call of `run()` takes (CPU: the forward is synchronous)."""
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000.0


class TorchRunner:
    """Target + drafter forwards with one KV-cache slot per running request.

    `threads` sets torch's CPU threads (process-wide) when given.
    """

    def __init__(self, shape: ModelShape, max_requests: int, capacity_tokens: int,
                 drafter_layers: int = 1, block_size: int = 0, seed: int = 0, threads: int | None = None) -> None:
        if threads is not None:
            torch.set_num_threads(threads)
        self.shape = shape
        self.target = DecoderModel(shape, seed=seed)
        self.cache = self.target.new_cache(max_requests, capacity_tokens)
        self.drafter = DecoderModel(drafter_shape(shape, "parallel", drafter_layers), seed=seed + 1)
        self.draft_cache = self.drafter.new_cache(max_requests, block_size + 1)
        self.generator = torch.Generator().manual_seed(seed)
        self.max_requests = max_requests
        self.slot_of: dict[int, int] = {}
        self.rid_at: list[int] = []

    @torch.inference_mode()
    def warm_up(self, max_step_tokens: int, max_requests: int, block_size: int) -> None:
        """A few forwards before serving (engines warm up or capture graphs at start): the first
        calls of torch's kernels pay one-off setup costs that no profile point includes."""
        scratch = self.target.new_cache(1, max_step_tokens)
        sizes = sorted({*(2**i for i in range(max_step_tokens.bit_length())), max_step_tokens})
        for tokens in sizes:
            self.target(self.random_ids(tokens), VerifyLayout.build([tokens], scratch), scratch)
        for requests in sorted({1, max_requests}):
            self.draft(requests, block_size)

    def open(self, rid: int) -> None:
        """Give request `rid` the first free KV-cache slot (slot N for the N-th running request)."""
        slot = len(self.rid_at)
        if slot >= self.max_requests:
            raise SpecplanError("reference engine: more running requests than KV-cache slots")
        self.slot_of[rid] = slot
        self.rid_at.append(rid)
        self.cache.lengths[slot] = 0

    def release(self, rids: np.ndarray) -> None:
        """Free the requests' slots, moving the last running request's KV into each hole."""
        for rid in rids.tolist():
            hole, last = self.slot_of.pop(rid), len(self.rid_at) - 1
            moved = self.rid_at.pop()
            if hole != last:
                self.move_slot(last, hole)
                self.rid_at[hole] = moved
                self.slot_of[moved] = hole

    def move_slot(self, source: int, target: int) -> None:
        cache, length = self.cache, int(self.cache.lengths[source])
        cache.k[:, target, :, :length] = cache.k[:, source, :, :length]
        cache.v[:, target, :, :length] = cache.v[:, source, :, :length]
        cache.lengths[target] = length

    def slots(self, rids: np.ndarray) -> list[int]:
        return [self.slot_of[rid] for rid in rids.tolist()]

    def random_ids(self, tokens: int) -> torch.Tensor:
        return torch.randint(0, self.shape.vocab, (tokens,), generator=self.generator)

    def verify(self, rids: np.ndarray, tokens: np.ndarray, prefill: np.ndarray | None = None) -> float:
        """One flattened forward of random tokens: `tokens[i]` new ones for `rids[i]`, run in
        slot order, prompt-chunk requests (`prefill[i]`) in their own attention call; returns its ms."""
        if rids.size == 0:
            return 0.0
        order = np.argsort(self.slots(rids), kind="stable")
        phases = None if prefill is None else np.asarray(prefill, dtype=np.int64)[order]
        return self.forward(rids[order], tokens[order], self.random_ids(int(tokens.sum())), phases)[1]

    @torch.inference_mode()
    def forward(self, rids: np.ndarray, tokens: np.ndarray, token_ids: torch.Tensor,
                phases: np.ndarray | None = None) -> tuple[torch.Tensor, float]:
        """Logits (T, vocab) of the flattened new tokens, and the forward's ms (layout built untimed)."""
        layout = VerifyLayout.build(tokens.tolist(), self.cache, self.slots(rids),
                                    None if phases is None else phases.tolist())
        start = time.perf_counter()
        logits = self.target(token_ids, layout, self.cache)
        return logits, (time.perf_counter() - start) * 1000.0

    def keep(self, rids: np.ndarray, kept_tokens: np.ndarray) -> None:
        """Advance each request's cache by the tokens it keeps (rejected drafts are overwritten)."""
        if rids.size:
            self.cache.commit(torch.as_tensor(kept_tokens, dtype=torch.long), self.slots(rids))

    @torch.inference_mode()
    def draft(self, requests: int, block_size: int) -> float:
        """One parallel drafter forward drafting `requests` blocks of `block_size` tokens: the anchor
        and `block_size` mask positions per request; returns its ms."""
        positions = block_size + 1
        layout = VerifyLayout.build([positions] * requests, self.draft_cache, list(range(requests)))
        ids = self.random_ids(requests * positions)
        return timed_ms(lambda: self.drafter(ids, layout, self.draft_cache))
