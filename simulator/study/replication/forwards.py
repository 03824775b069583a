"""Which model's forward a built-in prices, and the rule that keeps a case from borrowing another model's.

A replication case names its model (source.yaml's `model`, matched as
`case_runner.model_key`) and the built-ins its scenario runs on. A built-in
prices one model's forward: its name carries that model (`b200-deepseek-v4-flash-tp8ep8-sglang`) and its
header says the shapes it priced (`# model: ... 43 layers, hidden 4096, ...`). A case may run on
another model's built-in only where a stated rule says the two forwards have the same shapes
(weights differ, kernels and their times do not). Where the shapes differ, `foreign_forward` says
so in one line, and the case waits (`case_runner.availability`).

The one such question asked so far: does DeepSeek-V4.1-Flash's forward have V4-Flash's shapes,
so that V4.1-Flash's step measurements (sgl-project/sglang PR #39370's GB300 batch ladder,
vLLM PR #56686's B200 TP8 prefill step) could be priced by the V4-Flash built-ins? It does not.
V4.1-Flash is a different architecture (`DeepseekV41ForCausalLM`, `model_type: deepseek_v41`),
its text config read from the released config.json in public code:

    backbone        V4-Flash (the built-ins' headers)            V4.1-Flash
    layers          43                                           40 (+ 3 DSpark stages)
    hidden          4096                                         5120
    routed experts  256 of ffn 2048, top-6, 1 shared             384 of ffn 2304, top-6, 1 shared
    attention       CSA x 21 + HCA x 22 (ratios 4 / 128): each   CSA2: ratios 0 / 1 / 2 over contiguous bands;
                    compressed layer compresses its own KV,      compressed KV written by 4 source layers and
                    each CSA layer runs its own indexer (64 h.)  shared by the rest; indexer keys from 8 source
                                                                 layers (32 heads), two-level candidate top-k
    memory          none                                         Engram n-gram tables at layers 1 and 14
                                                                 (~196B parameters, looked up per token)
    mHC             each sublayer computes its own mixing        pre computed by the previous sublayer
    DSpark head     3 target-width MoE layers (the -dspark       3 stages, each an MoE of 128 experts top-3,
                    built-ins' drafter)                          reading target layers 37-39

Sources: NVIDIA/TensorRT-LLM `tensorrt_llm/_torch/configs/deepseek_v41.py` (V4.1 is a
separate config family, V4's config builds a wrong network for it; compress_ratios {0, 1, 2} against V4's {0, 4, 128}, KV and index source
layers); sgl-project/sglang `python/sglang/srt/configs/deepseek_v41.py` (the V4.1 fields: KV and
index source layers, candidate top-k, Engram, mHC handoff; its comment: V4's native config refuses ratios 1 and 2);
ztxz16/fastllm PR #727 (a V4-vs-V4.1 difference table); NVIDIA-NeMo/Automodel PR #3855 (causal
encoder/decoder schedule, CSA2 cross-layer sharing); FlashML-org/FreeToken issue #444
(`DeepseekV41ForCausalLM`, FP4 experts with 32x32 FP8 dense); the released text config's figures
(hidden 5120, 40 layers, 64 heads, 384 experts of 2304, kv_source_layer_ids [2, 8, 14, 20],
index_source_layer_ids [2, 8, 14, 20, 24, 28, 32, 36], engram_layer_ids [1, 14], a 43-entry
compress_ratios: 40 layers and 3 DSpark stages) as copied into public V4.1 ports' test fixtures
(an exact-string search for `"kv_source_layer_ids": [` finds several, vllm-ascend's among them) and
Scottcjn/ram-coffers PR #710 (20 encoder and 20 decoder layers); the model card's 552B-parameter MoE
with 8B parameters active for input and 16B for output (DeepSeek's release note, quoted in
SemiAnalysisAI/InferenceX-app PR #1109, which keeps V4.1 in its own bucket for the same reason).
V4-Flash's side is what the built-ins priced (their `# model:` header), also sglang-jax issue #1678.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ForwardShape:
    """The shapes of a model's forward that set a step's kernels and their times."""

    layers: int
    hidden: int
    routed_experts: int
    top_k: int
    expert_ffn: int
    attention: str
    memory: str


V4_FLASH = ForwardShape(layers=43, hidden=4096, routed_experts=256, top_k=6, expert_ffn=2048,
                        attention="CSA x 21 + HCA x 22, each compressing its own KV, an indexer per CSA layer",
                        memory="none")
V41_FLASH = ForwardShape(layers=40, hidden=5120, routed_experts=384, top_k=6, expert_ffn=2304,
                         attention="CSA2, KV from 4 source layers shared, indexer from 8, two-level top-k",
                         memory="Engram tables at layers 1 and 14")

# model_key -> its forward's shapes; a built-in whose name carries `-{key}-` prices that forward.
SHAPES: dict[str, ForwardShape] = {"deepseek-v4-flash": V4_FLASH, "deepseek-v4.1-flash": V41_FLASH}
SOURCES = {"deepseek-v4.1-flash": "NVIDIA/TensorRT-LLM configs/deepseek_v41.py, sgl-project/sglang "
                                  "configs/deepseek_v41.py, ztxz16/fastllm PR #727, NVIDIA-NeMo/Automodel PR #3855"}


def priced_model(profile: str) -> str | None:
    """The model (a SHAPES key) whose forward a built-in prices, read from its name (None: not one of them)."""
    name = f"-{profile.removeprefix('builtin:')}-"
    found = [key for key in SHAPES if f"-{key}-" in name]
    return found[0] if found else None


def differences(a: ForwardShape, b: ForwardShape) -> list[str]:
    """`field a vs b` for every shape the two forwards do not share."""
    return [f"{f.name} {getattr(a, f.name)} vs {getattr(b, f.name)}" for f in fields(a)
            if getattr(a, f.name) != getattr(b, f.name)]


def foreign_forward(model: str, profiles: list[str]) -> str | None:
    """Why a case of `model` cannot run on `profiles` (None: each prices its own model's forward, or one of the
    same shapes): the first built-in of a model whose forward differs, and how."""
    own = SHAPES.get(model)
    for profile in profiles:
        priced = priced_model(str(profile))
        if own is None or priced is None or priced == model:
            continue
        delta = differences(own, SHAPES[priced])
        if delta:
            return (f"{profile} prices {priced}'s forward, not {model}'s ({'; '.join(delta)}; sources: "
                    f"{SOURCES.get(model, SOURCES.get(priced, 'the built-in header'))})")
    return None
