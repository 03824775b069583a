"""The step as named parts: which operators make each part, and how the estimator overlaps them.

Place in the data flow: `verify.VerifyPricer` prices every leaf operator of
a target's list at every B (`leaf_curves`); this module names the leaves by
part (`PART_OF`), keeps each part's own time against tokens, and charges the
step as the estimator does. A profile file carries the parts (fileformat's
parts table), each part's share and source in its header (`provenance.py`),
and the public-microbenchmark rule (`public.py`) may set a part.

The one composite the estimator nests operators in is `Overlap`
(aiconfigurator-core 0.12.0, sdk/operations/overlap.py `OverlapOp`, computed
in its compiled engine): two groups on two CUDA streams inside one CUDA
graph (TensorRT-LLM's `maybe_execute_in_parallel`), priced

    Overlap(group_a, group_b) = max(Σ group_a, Σ group_b)     (energy and weights: the sum)

DeepSeek-V3, V3.2 and V4 build one per decode step (over all layers, each
member scaled by the layer count): group_a = router GEMM + dispatch + routed
experts + combine, group_b = the shared expert (gate/up GEMM, activation,
down GEMM). Every other operator of the V3, V4, Qwen3 (dense and MoE) and
Llama lists is a leaf (an MLA `Fallback` is one module priced by its primary,
part `attention`). So a part's own time is what its kernels cost alone, and

    step(B, C) = Σ parts(B) − overlap_hidden(B) + attention(B, C) + indexer(B, C),
    overlap_hidden(B) = Σ over Overlap ops of min(Σ group_a, Σ group_b)

which is the estimator's own step at every B (a test checks it). Nothing is
hidden: whichever group is the longer, both groups' parts stay in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

REFERENCE_TOKENS = 128           # the reference point of each file's shares: B = 128 tokens,
REFERENCE_CACHED = 1024          # 1,024 cached tokens per request
# operator name (phase prefix removed) -> the part it belongs to; an unknown name is its own part
PART_OF = {
    "embedding": "embedding",
    "add_norm_1": "norms", "add_norm_2": "norms", "attn_norm": "norms", "ffn_norm": "norms",
    "mhc_pre": "mhc", "mhc_post": "mhc",
    "qkv_gemm": "qkv_gemm", "proj_gemm": "o_proj_gemm",
    "gate_ffn1_gemm": "mlp_gate_up", "act_gate": "mlp_act", "ffn2_gemm": "mlp_down",
    "router_gemm": "router", "moe_pre_dispatch": "dispatch", "moe": "routed_experts",
    "moe_post_dispatch": "combine", "megamoe": "moe_block",
    "shared_gate_up_gemm": "shared_gate_up", "shared_act_gate": "shared_act", "shared_ffn2_gemm": "shared_down",
    "drafter_fuse_gemm": "fuse_proj", "logits_gemm": "lm_head",
    "embedding_ar": "all_reduce", "ar_1": "all_reduce", "ar_2": "all_reduce", "tp_allreduce": "all_reduce",
    "p2p": "pipeline_p2p",
}
# what each part is, for the header and the plot's legend
PART_MEANING = {
    "embedding": "token embedding lookup",
    "norms": "RMS norms (with the residual add)",
    "mhc": "DeepSeek-V4 hyper-connection mixing (mHC pre and post, Sinkhorn)",
    "attention": "attention: the module's projections at B tokens + the KV-cache read of R requests",
    "indexer": "CSA's lightning indexer: the verify's extra query tokens",
    "qkv_gemm": "QKV projection", "o_proj_gemm": "attention output projection",
    "mlp_gate_up": "dense MLP gate/up GEMM", "mlp_act": "dense MLP activation", "mlp_down": "dense MLP down GEMM",
    "router": "MoE router GEMM", "dispatch": "MoE dispatch (token all-to-all or TP gather)",
    "routed_experts": "routed-expert GEMMs", "combine": "MoE combine (all-to-all back or reduce)",
    "moe_block": "fused dispatch + routed experts + combine (MegaMoE)",
    "shared_gate_up": "shared-expert gate/up GEMM", "shared_act": "shared-expert activation",
    "shared_down": "shared-expert down GEMM", "fuse_proj": "drafter input fuse projection",
    "lm_head": "LM head GEMM", "all_reduce": "tensor-parallel all-reduces", "pipeline_p2p": "pipeline send",
}
# the public table's composite parts: which of ours they cover
PUBLIC_PARTS = {
    "moe_block": ("dispatch", "routed_experts", "combine", "moe_block"),
    "shared_expert": ("shared_gate_up", "shared_act", "shared_down"),
    "attention_decode": ("attention",),
    "dispatch": ("dispatch",), "combine": ("combine",), "routed_experts": ("routed_experts",),
}


def part_of(name: str) -> str:
    return PART_OF.get(name, name)


@dataclass(frozen=True, eq=False)
class LeafCurves:
    """Every non-attention leaf operator's own time at B = 1..max (rows), with the overlap groups.

    `ms[b - 1, i]` is leaf i at B = b; `overlaps` index the two groups of each
    Overlap op into the leaves; `sources[i]` says where leaf i's figure comes
    from (the database's silicon / empirical, or `public microbenchmark`),
    `notes` per part how a rule set it.
    """

    names: tuple[str, ...]
    sources: tuple[str, ...]
    ms: np.ndarray
    overlaps: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(part_of(name) for name in self.names)

    def part_names(self) -> list[str]:
        """The parts in the order of the operator list, those priced at zero everywhere left out."""
        return [p for p in dict.fromkeys(self.parts) if np.any(self.part_ms(p) > 0)]

    def part_ms(self, part: str) -> np.ndarray:
        columns = [i for i, p in enumerate(self.parts) if p == part]
        return self.ms[:, columns].sum(axis=1)

    def part_source(self, part: str) -> str:
        return "/".join(sorted({s for s, p in zip(self.sources, self.parts, strict=True) if p == part}))

    def hidden_ms(self) -> np.ndarray:
        """Time the Overlap ops hide: Σ over them of min(Σ group_a, Σ group_b), at every B."""
        out = np.zeros(self.ms.shape[0])
        for group_a, group_b in self.overlaps:
            out += np.minimum(self.ms[:, list(group_a)].sum(axis=1), self.ms[:, list(group_b)].sum(axis=1))
        return out

    def charged_ms(self) -> np.ndarray:
        """The non-attention step the engine is charged at every B: Σ leaves − overlap hidden."""
        return self.ms.sum(axis=1) - self.hidden_ms()

    def with_part(self, part: str, factor: np.ndarray, source: str, note: str) -> LeafCurves:
        """The same curves with every leaf of `part` multiplied by `factor` (per B) and its source set."""
        columns = tuple(i for i, p in enumerate(self.parts) if p == part)
        return self.with_columns(columns, factor, source, part, note)

    def with_columns(self, columns: tuple[int, ...], factor: np.ndarray, source: str, part: str,
                     note: str) -> LeafCurves:
        """The same curves with the leaves `columns` multiplied by `factor` (per B), their source set, `part`'s note."""
        return replace(self.rescaled(columns, factor, source), notes={**self.notes, part: note})

    def with_ms(self, column: int, ms: np.ndarray, source: str) -> LeafCurves:
        """The same curves with leaf `column` replaced by `ms` (per B) and its source set."""
        out = self.ms.copy()
        out[:, column] = ms
        sources = tuple(source if i == column else s for i, s in enumerate(self.sources))
        return replace(self, ms=out, sources=sources)

    def rescaled(self, columns: tuple[int, ...], factor: np.ndarray, source: str) -> LeafCurves:
        """The same curves with the leaves `columns` multiplied by `factor` (per B) and their source set."""
        ms = self.ms.copy()
        ms[:, list(columns)] *= factor[:, None]
        sources = tuple(source if i in columns else s for i, s in enumerate(self.sources))
        return replace(self, ms=ms, sources=sources)
