"""Verify pricing: T(B, C) of a speculative verify step from the database's per-operator tables.

Place in the data flow: `build.py` asks a VerifyPricer for every leaf
operator's time at every B (`leaf_curves`, named by `parts.py`) and for the
attention parts at every (B, C) point of the file.

AIConfigurator (the `aiconfigurator-core` package, Apache-2.0) ships kernel
timings measured on real H100/H200/B200/GB200 GPUs under vLLM, SGLang and
TensorRT-LLM (GEMM, context/generation attention, MLA modules, MoE,
all-reduce, ...), model configs, and a compiled estimator that walks a
model's operator list and looks every operator up in those tables. Its
decode step prices R requests of one new token each. A speculative verify
step is not that: it is R requests with 1 + ℓ_r query tokens each, over their
KV caches. This module composes the verify step from the same tables:

    T(B, C) = Σ non-attention ops at B tokens      GEMMs, MoE (+ dispatch), norms, activation,
                                                   embedding, LM head, TP all-reduce
            + attention of R requests, q query tokens each, C / R cached tokens each

Canonical layout. The profile stays a (B, C) table: tokens B in the forward,
C = total KV context of the batch (tokens already cached; the B being
verified are not counted). Each B is read as R = ceil(B / q) requests of q
query tokens (the last one padded to q), q = 4 by default (the anchor plus
three drafts, the torch harness's default too), with C spread evenly (C / R
cached tokens each). Why this is enough: the attention kernels are bound by
reading the KV cache, and the bytes read depend on C, not on how C is split;
the split changes per-request overheads only. In the database, moving the
same C from 128 requests × 1,024 tokens to 32 × 4,096 changes Llama-3.1-8B's
attention on an H200 by 9% (4.78 vs 4.35 ms), and the attention term is
the smaller part of a step below ~100k tokens of context. A scenario whose
requests verify 2 tokens (MTP-1) or 8 is priced with this same layout.

Attention, by the operator the database has for it:

- `GenerationAttention` (MHA/GQA; Llama, Qwen3 dense and MoE): the generation
  attention table at batch R, KV length C/R + q, with q × H query heads. The
  q query tokens of one request share its KV heads; FlashAttention's decode
  path packs the q·H/KV query rows of a KV head into one tile, as it packs
  GQA heads, so a multi-token query is a decode with q times the query heads.
  The table measures that axis (num_heads at fixed num_key_value_heads): on
  the H200 under vLLM 0.24 it is flat within 6% from 1 to 64 query heads per
  KV head at a fixed batch and context. Beyond the table's largest head
  count the estimator extrapolates (and floors at its speed-of-light model):
  Llama-3.1-8B at q = 4 asks for 128 query heads over 8 KV heads where the
  table stops at 96, which adds nothing at 1k cached tokens per request and
  up to 25% of the small no-context attention term.
- MLA modules (DeepSeek-V3): the database measures the whole MLA block
  (projections, the MLA kernel, output projection) per decode batch. Split:
  module(B rows, h heads, KV q) prices the projections at B tokens, plus the
  cache read of R requests, module(R, q·h, C/R + q) − module(R, q·h, q),
  floored at 0 (FlashMLA folds a request's q query tokens into its heads the
  same way).
- DeepSeek-V4 attention modules (`Dsv4Generation`: CSA, compress ratio 4,
  with its lightning indexer; HCA, compress ratio 128; the package prices
  pure sliding-window layers as HCA): the database measures the whole
  decode module per layer like MLA's, so the same split applies, with the
  q query tokens folded into the heads (FlashMLA's sparse decode folds them
  the same way). The module table's head axis is the TP degree's local
  heads (native / TP, up to the native count at TP1); where q·h exceeds
  the native count (TP1, data-parallel attention) the cache read is scaled
  linearly from the native count, module(R, q·h) read = q·h / native ×
  module(R, native) read (the kernel runs q·h / 64 head tiles, each reading
  the request's cache; the estimator's own extrapolation beyond the table
  falls with more heads). CSA's indexer scores the q query tokens of a
  request against its compressed keys in one paged-MQA-logits call whose
  cost the module's head axis does not carry (the indexer has its own 64
  heads at every TP), so CSA layers add mqa(R, q, C/R + q) − mqa(R, 1,
  C/R + q) from the database's `dsv4_paged_mqa_logits_module` table (batch
  R, q query tokens, C/R + q cached; linear interpolation on its grid,
  clamped at its edges). Approximated: CSA selects top-k keys per query
  token, so a verify's q tokens read up to q different top-k sets where the
  fold counts one (an under-estimate of at most (q − 1) top-k reads per
  request and layer).
- any other operator whose time depends on the KV length (DSA, linear
  attention, Mamba, ...) is refused with an error rather than priced wrong.

The estimator's own MTP path (`nextn`) prices a verify as R·(1+ℓ) independent
one-token decodes, each re-reading its request's cache, plus the MTP layers'
compute; at 128 requests of 4 tokens and 1k context that reads the Llama
cache four times (18.3 ms of attention instead of 4.9). It is not used here.

What is approximated (written into every file's header): the layout above;
the MLA split; host, scheduler and sampling time (the database times GPU
kernels; no engine overhead is added); operators at shapes the database did
not sample (the estimator interpolates between samples and extrapolates
beyond the largest: MLA modules beyond batch 1,024, attention beyond batch
2,048 or KV 131,072); MoE routing follows the estimator's workload
distribution (power law), not real traffic. Nothing is smoothed: the grid
of B holds every token count the GEMM tables sample (both sides of each
tile edge), each attention batch the table samples (q · 2^k), and more
points where needed so that linear lookup reproduces the estimator's
non-attention time at every integer B within 0.5%.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specplan.hwprofiles.aiconfigurator.compile import CompiledTarget, engine_handle
from specplan.hwprofiles.aiconfigurator.indexer import mqa_table
from specplan.hwprofiles.aiconfigurator.operators import (
    csa_layers,
    flatten_overlaps,
    head_overflow,
    is_module,
    kind_of,
    with_query_heads,
)
from specplan.hwprofiles.aiconfigurator.package import one_line
from specplan.hwprofiles.aiconfigurator.parts import REFERENCE_TOKENS, LeafCurves
from specplan.hwprofiles.aiconfigurator.targets import where
from specplan.hwprofiles.errors import ProfileError


class VerifyPricer:
    """Prices T(B, C) for one operator list under the canonical layout (module docstring).

    It compiles one engine whose decode list is: the plain operators (each
    Overlap op opened into its members, `operators.flatten_overlaps`), each
    GenerationAttention with q·H query heads, each MLA / V4 module as is and
    with q·h heads; then evaluates slices of it at the shapes the layout gives.
    """

    def __init__(self, compiled: CompiledTarget, ops: list[dict[str, Any]], q: int, window: int = 0) -> None:
        self.q = q
        self.dp = compiled.target.dp
        self.window = window
        self.where = f"{compiled.target.model} on {where(compiled.target)}"
        plain, self.overlaps = flatten_overlaps(
            [op for op in ops if kind_of(op) != "GenerationAttention" and not is_module(op)])
        self.plain_ops = plain  # the leaf operators, in the order of the leaf curves' columns
        direct = [with_query_heads(op, q) for op in ops if kind_of(op) == "GenerationAttention"]
        modules = [op for op in ops if is_module(op)]
        folded = [op for op in modules if head_overflow(op, q) == 1.0]
        overflow = [op for op in modules if head_overflow(op, q) > 1.0]
        groups = (plain, direct, modules, [with_query_heads(op, q) for op in folded + overflow])
        starts = np.cumsum([0, *(len(g) for g in groups)])
        self.plain, self.direct, self.modules, wide = (
            list(range(starts[i], starts[i + 1])) for i in range(4))
        scales = [head_overflow(op, q) for op in overflow]
        self.wide, self.overflow = wide[:len(folded)], list(zip(wide[len(folded):], scales, strict=True))
        self.csa_layers = sum(csa_layers(op) for op in modules)
        self.indexer = mqa_table(compiled, ops) if self.csa_layers and q > 1 else None
        with one_line(f"compile {self.where}"):
            self.handle = engine_handle(compiled, [op for group in groups for op in group])
        self.check_plain_ops_ignore_context()

    def evaluate(self, indices: list[int], batch: int, kv: int, tokens: int | None = None) -> list[tuple]:
        if not indices:
            return []
        with one_line(f"price {self.where}"):
            return list(self.handle.evaluate_generation_ops(indices, batch_size=batch, s=kv, x=tokens))

    def ms(self, indices: list[int], batch: int, kv: int, tokens: int | None = None) -> float:
        return float(sum(entry[1] for entry in self.evaluate(indices, batch, kv, tokens)))

    def check_plain_ops_ignore_context(self) -> None:
        """Refuse operators that read the KV cache but have no verify-shaped rule here."""
        short = self.evaluate(self.plain, 8, 2, 64)
        long = self.evaluate(self.plain, 8, 65536, 64)
        for (name, a, *_), (_, b, *_) in zip(short, long, strict=True):
            if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
                raise ProfileError(
                    f"operator {name} depends on the KV length and has no verify-shaped rule here "
                    "(supported: GenerationAttention, MLA modules)"
                )

    def rank_shape(self, tokens: int, context: float) -> tuple[int, int, int]:
        """(tokens, requests, cached tokens per request read) on one attention rank."""
        b = math.ceil(tokens / self.dp)
        requests = math.ceil(b / self.q)
        cached = round(context / self.dp / requests)
        return b, requests, min(cached, self.window) if self.window else cached

    def leaf_entries(self, tokens: int) -> list[tuple]:
        """The estimator's entries (name, ms, ..., source, ...) of every plain leaf at B = tokens."""
        b = math.ceil(tokens / self.dp)
        return self.evaluate(self.plain, math.ceil(b / self.q), self.q, b)

    def leaf_curves(self, max_tokens: int) -> LeafCurves:
        """Every plain leaf's own time at B = 1..max_tokens, named, with its source and the overlap groups."""
        rows = [self.leaf_entries(b) for b in range(1, max_tokens + 1)]
        names = tuple(str(e[0]).removeprefix("generation_") for e in rows[0])
        sources = tuple(str(e[3]) for e in rows[min(len(rows), REFERENCE_TOKENS) - 1])
        overlaps = tuple((tuple(a), tuple(b)) for a, b in self.overlaps)
        return LeafCurves(names, sources, np.array([[e[1] for e in row] for row in rows]), overlaps)

    def plain_ms(self, tokens: int) -> float:
        """The non-attention step at B = tokens: Σ leaves, each Overlap charged max(Σ group_a, Σ group_b)."""
        leaves = np.array([e[1] for e in self.leaf_entries(tokens)])
        hidden = sum(min(leaves[a].sum(), leaves[b].sum()) for a, b in self.overlaps)
        return float(leaves.sum() - hidden)

    def attention_ms(self, tokens: int, context: float) -> float:
        """The attention part (GenerationAttention, or the modules' projections and cache read), no indexer."""
        b, requests, cached = self.rank_shape(tokens, context)
        direct = self.ms(self.direct, requests, cached + self.q)
        if not self.modules:
            return direct
        return direct + self.ms(self.modules, b, self.q) + max(self.read_ms(requests, cached), 0.0)

    def read_ms(self, requests: int, cached: int) -> float:
        """The modules' cache read for R requests of q folded query tokens (scaled past the native heads)."""
        read = self.ms(self.wide, requests, cached + self.q) - self.ms(self.wide, requests, self.q)
        for index, scale in self.overflow:
            read += scale * (self.ms([index], requests, cached + self.q) - self.ms([index], requests, self.q))
        return read

    def indexer_ms(self, tokens: int, context: float) -> float:
        """CSA's indexer scoring q query tokens instead of the module's one, over the CSA layers."""
        if self.indexer is None:
            return 0.0
        _, requests, cached = self.rank_shape(tokens, context)
        kv = cached + self.q
        return self.csa_layers * max(self.indexer.ms(requests, self.q, kv) - self.indexer.ms(requests, 1, kv), 0.0)

    def attention_source(self, tokens: int, context: float) -> str:
        """Where the attention part's figures come from at one point (the modules' sources)."""
        _, requests, cached = self.rank_shape(tokens, context)
        entries = self.evaluate(self.direct + self.modules, requests, cached + self.q)
        return "/".join(sorted({str(entry[3]) for entry in entries}))
