"""A random-weight decoder in torch that runs verify-shaped forwards over a flattened batch.

The profiling harness times it to produce step-time curves; the reference
serving engine (validation/) reuses it as a real model. Requires torch (the
`profile` extra); nothing else in specplan imports this module.

    model = DecoderModel(load_shape("tiny-cpu"), device="cpu", dtype=torch.float32)
    cache = KVCache.allocate(model.shape, requests=3, capacity_tokens=2048, device="cpu", dtype=torch.float32)
    cache.fill_random([100, 7, 512], generator)              # or run prefill through verify
    logits = model.verify(token_ids, [4, 1, 3], cache)       # (8, vocab): one row per new token
    cache.commit([3, 1, 2])                                  # keep the accepted prefix's KV

A verify batch is the tokens of R requests concatenated (T = Σ n_r). Linear
layers run on the flat (T, hidden) batch, so GEMM shapes are the engine's.
Attention is one torch scaled_dot_product_attention call over the padded
(R, n_max) layout with a block mask: each request's new token i attends to
its own cached context and to its own new tokens 0..i. The query heads that
share a KV head are folded into the query axis, as decode kernels pack
grouped heads, so the cache is read as it lies and never repeated per query
head, and the additive mask is built once per layout. Labelled phases
(decode blocks vs prompt chunks) run as one such call each. `verify` writes the
new tokens' K/V into the cache at positions length_r .. length_r + n_r − 1
but does not advance the lengths; `commit` does, after acceptance, so
rejected drafts are overwritten by the next step. All index tensors are
built once per `VerifyLayout`, which makes a forward CUDA-graph capturable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.modelshape import ModelShape


def _weight(rows: int, cols: int, generator: torch.Generator, device: torch.device, dtype: torch.dtype,
            experts: int = 0) -> nn.Parameter:
    size = (experts, rows, cols) if experts else (rows, cols)
    w = torch.randn(size, generator=generator, device=device, dtype=torch.float32) * cols ** -0.5
    return nn.Parameter(w.to(dtype), requires_grad=False)


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden, device=device, dtype=dtype), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class KVCache:
    """K/V of every layer for R request slots, padded to a common capacity.

    `k[layer]` and `v[layer]` are (R, kv_heads, capacity, head_dim);
    `lengths[r]` counts the valid (committed) context tokens of slot r.
    """

    def __init__(self, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> None:
        self.k, self.v, self.lengths = k, v, lengths

    @classmethod
    def allocate(cls, shape: ModelShape, requests: int, capacity_tokens: int,
                 device: str | torch.device, dtype: torch.dtype) -> KVCache:
        size = (shape.layers, requests, shape.kv_heads, capacity_tokens, shape.head_dim)
        return cls(torch.zeros(size, device=device, dtype=dtype), torch.zeros(size, device=device, dtype=dtype),
                   torch.zeros(requests, dtype=torch.long, device=device))

    @property
    def capacity_tokens(self) -> int:
        return int(self.k.shape[3])

    def fill_random(self, context_tokens: Sequence[int], generator: torch.Generator) -> None:
        """Give slot r `context_tokens[r]` tokens of random K/V (a stand-in for a prefill)."""
        if max(context_tokens, default=0) > self.capacity_tokens:
            raise ProfileError(f"context of {max(context_tokens)} tokens exceeds the cache capacity")
        self.k.normal_(generator=generator)
        self.v.normal_(generator=generator)
        self.lengths.copy_(torch.as_tensor(list(context_tokens), dtype=torch.long))

    def commit(self, kept_tokens: Sequence[int] | torch.Tensor, slots: Sequence[int] | None = None) -> None:
        """After a verify: slot r keeps the K/V of its first `kept_tokens[r]` new tokens."""
        kept = torch.as_tensor(kept_tokens, dtype=torch.long, device=self.lengths.device)
        index = torch.arange(len(kept), device=kept.device) if slots is None else torch.as_tensor(slots, device=kept.device)
        self.lengths.index_add_(0, index, kept)


@dataclass(frozen=True)
class AttentionGroup:
    """Requests whose attention runs as one padded scaled_dot_product_attention call.

    `tokens`: the group's positions in the flat batch (None: all of them);
    `request[t]`/`slot[t]`: each of its tokens' request within the group and
    index among that request's new tokens; `mask`: (R_g, 1, n_max, key_tokens)
    block-causal; `cache_slots`: the group's cache rows, read as a view when
    they are consecutive (`first_slot`), else gathered.
    """

    tokens: torch.Tensor | None
    request: torch.Tensor
    slot: torch.Tensor
    mask: torch.Tensor
    key_tokens: int
    cache_slots: torch.Tensor
    first_slot: int | None
    folded_masks: dict[tuple[int, torch.dtype], torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    @property
    def requests(self) -> int:
        return int(self.mask.shape[0])

    def cached(self, layer_cache: torch.Tensor) -> torch.Tensor:
        """This group's slots of one layer's K or V, up to its longest key."""
        if self.first_slot is not None:
            return layer_cache[self.first_slot: self.first_slot + self.requests, :, : self.key_tokens]
        return layer_cache[self.cache_slots, :, : self.key_tokens]

    def folded_mask(self, groups_per_kv: int, dtype: torch.dtype) -> torch.Tensor:
        """The additive mask (R_g, 1, g·n_max, key_tokens) for g query heads folded per KV head.

        Row j·n_max + i is query head j of token i. Built on first use and kept
        (the harness's warm-up builds it before a CUDA graph is captured); its
        rows are padded to a multiple of 16 keys, the alignment fused kernels
        ask for, so the attention call reads it as it lies.
        """
        key = (groups_per_kv, dtype)
        if key not in self.folded_masks:
            r, _, n, keys = self.mask.shape
            padded = torch.full((r, 1, groups_per_kv * n, -(-keys // 16) * 16), float("-inf"), dtype=dtype,
                                device=self.mask.device)
            visible = self.mask.unsqueeze(2).expand(r, 1, groups_per_kv, n, keys).reshape(r, 1, -1, keys)
            padded[..., :keys].masked_fill_(visible, 0.0)
            self.folded_masks[key] = padded[..., :keys]
        return self.folded_masks[key]

    @classmethod
    def build(cls, counts: torch.Tensor, lengths: torch.Tensor, slots: torch.Tensor, request: torch.Tensor,
              slot: torch.Tensor, tokens: torch.Tensor | None) -> AttentionGroup:
        """The group's mask and cache view; `request`/`slot` index its tokens within the group."""
        device = counts.device
        key_tokens = int((lengths + counts).max())
        query = torch.arange(int(counts.max()), device=device)
        keys = torch.arange(key_tokens, device=device)
        visible = keys[None, None, :] <= (lengths[:, None, None] + query[None, :, None])
        mask = (visible | (keys[None, None, :] == 0)).unsqueeze(1)
        first = int(slots[0])
        consecutive = bool(torch.equal(slots, torch.arange(first, first + len(slots), device=device)))
        return cls(tokens, request, slot, mask, key_tokens, slots, first if consecutive else None)


@dataclass(frozen=True)
class VerifyLayout:
    """Where each token of a flattened verify batch sits: built once, reused by every layer.

    `rows[t]`: its request's cache slot; `positions[t]`: its absolute
    position; `groups`: the attention calls (one, unless `phases` split the
    requests: see `build`).
    """

    tokens_per_request: tuple[int, ...]
    rows: torch.Tensor
    positions: torch.Tensor
    groups: tuple[AttentionGroup, ...]

    @classmethod
    def build(cls, tokens_per_request: Sequence[int], cache: KVCache,
              cache_slots: Sequence[int] | None = None, phases: Sequence[int] | None = None) -> VerifyLayout:
        """The layout of R requests' new tokens. `phases` (one label per request, e.g. 0 for
        decoding and 1 for prompt-chunk requests) runs each label's requests as its own padded
        attention call, as engines run decode and prefill attention as separate kernels: a
        short verify block is then not padded to a long prompt chunk."""
        counts = [int(n) for n in tokens_per_request]
        if not counts or min(counts) < 1:
            raise ProfileError("verify: every request needs at least one new token")
        device = cache.lengths.device
        slots = torch.arange(len(counts), device=device) if cache_slots is None else torch.as_tensor(list(cache_slots), device=device)
        lengths = cache.lengths[slots]
        n = torch.as_tensor(counts, device=device)
        longest = int((lengths + n).max())
        if longest > cache.capacity_tokens:
            raise ProfileError(f"verify: {longest} tokens exceed the KV cache capacity ({cache.capacity_tokens})")
        request = torch.repeat_interleave(torch.arange(len(counts), device=device), n)
        starts = torch.cumsum(n, 0) - n
        slot = torch.arange(int(n.sum()), device=device) - starts[request]
        positions = lengths[request] + slot
        labels = torch.zeros(len(counts), dtype=torch.long, device=device) if phases is None else torch.as_tensor(list(phases), device=device)
        if len(labels) != len(counts):
            raise ProfileError(f"verify: {len(labels)} phase labels for {len(counts)} requests")
        groups = []
        for label in torch.unique(labels).tolist():
            members = labels == label
            if bool(members.all()):
                groups.append(AttentionGroup.build(n, lengths, slots, request, slot, None))
                continue
            tokens = torch.nonzero(members[request]).flatten()
            within = torch.cumsum(members, 0) - 1  # each member's index within its group
            groups.append(AttentionGroup.build(n[members], lengths[members], slots[members],
                                               within[request[tokens]], slot[tokens], tokens))
        return cls(tuple(counts), slots[request], positions, tuple(groups))


class Attention(nn.Module):
    def __init__(self, shape: ModelShape, g: torch.Generator, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, shape.head_dim
        self.qkv = _weight((shape.heads + 2 * shape.kv_heads) * shape.head_dim, shape.hidden, g, device, dtype)
        self.out = _weight(shape.hidden, shape.heads * shape.head_dim, g, device, dtype)

    def forward(self, x: torch.Tensor, layout: VerifyLayout, k_cache: torch.Tensor, v_cache: torch.Tensor,
                rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        t, hd = x.shape[0], self.head_dim
        q, k, v = F.linear(x, self.qkv).split([self.heads * hd, self.kv_heads * hd, self.kv_heads * hd], dim=-1)
        q, k, v = q.view(t, self.heads, hd), k.view(t, self.kv_heads, hd), v.view(t, self.kv_heads, hd)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        return F.linear(self.cache_and_attend(q, k, v, layout, k_cache, v_cache).reshape(t, -1), self.out)

    def cache_and_attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: VerifyLayout,
                         k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        """Write the new tokens' K/V into the cache, then attend: (T, heads, head_dim) out."""
        k_cache[layout.rows, :, layout.positions] = k
        v_cache[layout.rows, :, layout.positions] = v
        if len(layout.groups) == 1:
            return self.attend(q, layout.groups[0], k_cache, v_cache)
        attended = torch.empty_like(q)
        for group in layout.groups:
            attended[group.tokens] = self.attend(q[group.tokens], group, k_cache, v_cache)
        return attended

    def attend(self, q: torch.Tensor, group: AttentionGroup, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        """One padded attention call: the group's queries (T_g, heads, head_dim) against their KV.

        The g query heads of each KV head are folded into the query axis,
        (R, kv_heads, g·n_max, head_dim) against (R, kv_heads, keys, head_dim).
        """
        r, n, g, hd = group.requests, group.mask.shape[2], self.heads // self.kv_heads, self.head_dim
        q_pad = q.new_zeros(r, n, self.heads, hd)
        q_pad[group.request, group.slot] = q
        folded = q_pad.view(r, n, self.kv_heads, g, hd).permute(0, 2, 3, 1, 4).reshape(r, self.kv_heads, g * n, hd)
        out = F.scaled_dot_product_attention(folded, group.cached(k_cache), group.cached(v_cache),
                                             attn_mask=group.folded_mask(g, q.dtype))
        out = out.view(r, self.kv_heads, g, n, hd).permute(0, 3, 1, 2, 4).reshape(r, n, self.heads, hd)
        return out[group.request, group.slot]


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    angles = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos().to(dtype)[:, None, :], angles.sin().to(dtype)[:, None, :]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on (T, heads, head_dim)."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


class GatedMLP(nn.Module):
    def __init__(self, shape: ModelShape, g: torch.Generator, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.gate_up = _weight(2 * shape.ffn, shape.hidden, g, device, dtype)
        self.down = _weight(shape.hidden, shape.ffn, g, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(x, self.gate_up).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, self.down)


class MoEMLP(nn.Module):
    """Top-k routed experts (gated SiLU), computed exactly with grouped GEMMs.

    Token-expert pairs are sorted by expert and run through
    `torch.nn.functional.grouped_mm` with per-expert offsets: static shapes
    (CUDA-graph capturable), no dropped tokens, empty experts cost nothing.
    """

    def __init__(self, shape: ModelShape, g: torch.Generator, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.experts, self.top_k = shape.moe_experts, shape.moe_top_k
        self.router = _weight(shape.moe_experts, shape.hidden, g, device, dtype)
        self.gate_up = _weight(2 * shape.ffn, shape.hidden, g, device, dtype, experts=shape.moe_experts)
        self.down = _weight(shape.hidden, shape.ffn, g, device, dtype, experts=shape.moe_experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(F.linear(x, self.router).float(), dim=-1)
        weights, experts = torch.topk(probs, self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype).reshape(-1)
        flat = experts.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.zeros(self.experts, dtype=torch.int32, device=x.device)
        counts.scatter_add_(0, flat.to(torch.int64), torch.ones_like(flat, dtype=torch.int32))
        offsets = torch.cumsum(counts, 0, dtype=torch.int32)
        token = order // self.top_k
        gate, up = grouped_linear(x[token], self.gate_up, offsets).chunk(2, dim=-1)
        out = grouped_linear((F.silu(gate) * up).contiguous(), self.down, offsets)
        return torch.zeros_like(x).index_add_(0, token, out * weights[order, None])


def grouped_linear(rows: torch.Tensor, weights: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Rows sorted by expert (expert e owns rows offsets[e-1]:offsets[e]) times weights[e]ᵀ.

    One grouped GEMM where torch provides it for this device and dtype;
    otherwise a loop over the non-empty experts (exact, but not capturable).
    """
    try:
        return F.grouped_mm(rows, weights.transpose(-2, -1), offs=offsets)
    except (RuntimeError, NotImplementedError):
        out = rows.new_empty(rows.shape[0], weights.shape[1])
        start = 0
        for e, end in enumerate(offsets.tolist()):
            if end > start:
                out[start:end] = F.linear(rows[start:end], weights[e])
            start = end
        return out


class DecoderLayer(nn.Module):
    def __init__(self, shape: ModelShape, g: torch.Generator, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(shape.hidden, shape.norm_eps, device, dtype)
        self.attn = Attention(shape, g, device, dtype)
        self.mlp_norm = RMSNorm(shape.hidden, shape.norm_eps, device, dtype)
        self.mlp = MoEMLP(shape, g, device, dtype) if shape.is_moe else GatedMLP(shape, g, device, dtype)

    def forward(self, x: torch.Tensor, layout: VerifyLayout, k_cache: torch.Tensor, v_cache: torch.Tensor,
                rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), layout, k_cache, v_cache, rope)
        return x + self.mlp(self.mlp_norm(x))


class DecoderModel(nn.Module):
    """Embedding → `shape.layers` decoder layers → RMSNorm → LM head, random weights (seeded).

    `verify(token_ids, tokens_per_request, cache)` returns logits (T, vocab)
    for every new token of a flattened verify batch; see the module docstring.
    """

    def __init__(self, shape: ModelShape, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, seed: int = 0) -> None:
        super().__init__()
        if shape.markov_rank:
            raise ProfileError(f"{shape.name} is a Markov head, not a decoder (use MarkovHead)")
        self.shape, self.device, self.dtype = shape, torch.device(device), dtype
        g = torch.Generator(device=self.device).manual_seed(seed)
        self.embed = _weight(shape.vocab, shape.hidden, g, self.device, dtype)
        self.layers = nn.ModuleList(DecoderLayer(shape, g, self.device, dtype) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.hidden, shape.norm_eps, self.device, dtype)
        self.lm_head = _weight(shape.vocab, shape.hidden, g, self.device, dtype)

    def new_cache(self, requests: int, capacity_tokens: int) -> KVCache:
        return KVCache.allocate(self.shape, requests, capacity_tokens, self.device, self.dtype)

    @torch.inference_mode()
    def verify(self, token_ids: torch.Tensor, tokens_per_request: Sequence[int], cache: KVCache,
               cache_slots: Sequence[int] | None = None, phases: Sequence[int] | None = None) -> torch.Tensor:
        """Logits (T, vocab) for the flattened new tokens of R requests (cache slots 0..R-1 by default)."""
        if int(token_ids.numel()) != sum(tokens_per_request):
            raise ProfileError(f"verify: {token_ids.numel()} token ids for {sum(tokens_per_request)} new tokens")
        return self.forward(token_ids, VerifyLayout.build(tokens_per_request, cache, cache_slots, phases), cache)

    def forward(self, token_ids: torch.Tensor, layout: VerifyLayout, cache: KVCache,
                run_layers: bool = True) -> torch.Tensor:
        """One verify forward on a prebuilt layout (what the harness times and captures)."""
        x = F.embedding(token_ids, self.embed)
        rope = (rope_tables(layout.positions, self.shape.head_dim, self.shape.rope_theta, self.dtype)
                if self.shape.rope else None)
        if run_layers:
            for i, layer in enumerate(self.layers):
                x = layer(x, layout, cache.k[i], cache.v[i], rope)
        return F.linear(self.norm(x), self.lm_head)


class StepParts:
    """A verify step's GEMMs and its attention, each run alone on static inputs of the step's shapes.

    What the harness times to split a step into terms: `layer_gemms` runs
    every decoder layer's four projections (QKV, output, gate/up, down) at T
    tokens over that layer's own weights, `head_gemm` the LM head, and
    `attention` every layer's KV-cache write and attention call (the step's
    own code, over its own cache). The rest of a step (embedding, norms,
    RoPE, activation, residual adds; launch gaps when not graph-replayed) is
    the step's time less these. Dense shapes only: an MoE layer's GEMMs
    depend on the routing.
    """

    def __init__(self, model: DecoderModel, layout: VerifyLayout, cache: KVCache, generator: torch.Generator) -> None:
        shape = model.shape
        if shape.is_moe:
            raise ProfileError(f"parts: {shape.name} is an MoE shape; the parts are timed for dense shapes only")
        layers = cast(list[DecoderLayer], list(model.layers))
        self.projections = [(layer.attn.qkv, layer.attn.out, layer.mlp.gate_up, layer.mlp.down) for layer in layers]
        self.attentions = [layer.attn for layer in layers]
        self.lm_head, self.layout, self.cache = model.lm_head, layout, cache
        t, hd = int(layout.positions.numel()), shape.head_dim

        def static(*size: int) -> torch.Tensor:
            return torch.randn(size, generator=generator, device=model.device, dtype=model.dtype)

        self.x, self.attended, self.activated = static(t, shape.hidden), static(t, shape.heads * hd), static(t, shape.ffn)
        self.q, self.k, self.v = static(t, shape.heads, hd), static(t, shape.kv_heads, hd), static(t, shape.kv_heads, hd)

    def layer_gemms(self) -> None:
        for qkv, out, gate_up, down in self.projections:
            F.linear(self.x, qkv)
            F.linear(self.attended, out)
            F.linear(self.x, gate_up)
            F.linear(self.activated, down)

    def head_gemm(self) -> None:
        F.linear(self.x, self.lm_head)

    def attention(self) -> None:
        for i, attn in enumerate(self.attentions):
            attn.cache_and_attend(self.q, self.k, self.v, self.layout, self.cache.k[i], self.cache.v[i])


class MarkovHead(nn.Module):
    """DSpark's low-rank sequential head: logits_k = U_k + W1[x_{k-1}] W2 (rank r), then pick x_k.

    One call is one sequential drafting position for R requests; a block of
    γ drafts costs γ calls.
    """

    def __init__(self, shape: ModelShape, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, seed: int = 0) -> None:
        super().__init__()
        self.shape, self.device, self.dtype = shape, torch.device(device), dtype
        g = torch.Generator(device=self.device).manual_seed(seed)
        self.w1 = _weight(shape.vocab, shape.markov_rank, g, self.device, dtype)
        self.w2 = _weight(shape.vocab, shape.markov_rank, g, self.device, dtype)

    def forward(self, previous_tokens: torch.Tensor, unary_logits: torch.Tensor) -> torch.Tensor:
        """Next draft token ids (R,) from the previous tokens (R,) and the backbone's logits (R, vocab)."""
        logits = unary_logits + F.linear(F.embedding(previous_tokens, self.w1), self.w2)
        return torch.argmax(torch.softmax(logits.float(), dim=-1), dim=-1)
