"""Two independent sources for one GPU curve: vidur's H100 Llama-2-7B against AIConfigurator's.

The built-in `h100-llama2-7b` sums vidur's measured per-operator medians
(microsoft/vidur, MIT) and adds an attention estimate of its own (vidur
timed no attention kernels). aiconfigurator-core ships no Llama-2-7B
config, but its estimator takes any Llama-architecture `config.json`; this
script writes one from the project's own shape (`hwprofiles/shapes/
llama2-7b.yaml`: hidden 4096, 32 layers, 32/32 heads, FFN 11008, vocab
32000) and composes the verify step on AIConfigurator's H100 SXM vLLM 0.24
tables with the same code as the built-ins (4 query tokens per request).
The H100 generation-attention table samples 1 to 8 KV heads; Llama-2-7B
has 32 (MHA), so its attention is priced as 4x the requests at 8 KV heads:
the same (request, KV head) work items and the same KV bytes (`FoldedKvHeads`).
It prints a markdown table, point by point, at no context and at 65,536
tokens of total KV context, with the non-attention parts side by side.

    .venv/bin/python benchmarks/profile_crosscheck.py [--tokens 1 8 32 ...] [--context 65536]

Needs the `aic` extra (aiconfigurator-core).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.aiconfigurator import AicTarget, VerifyPricer, compile_target, quiet
from specplan.hwprofiles.derive_vidur import AttentionEstimate
from specplan.hwprofiles.modelshape import ModelShape, load_shape

TOKENS = (1, 8, 32, 64, 72, 104, 128, 256, 512)


def llama_config(shape: ModelShape) -> dict:
    """A Hugging Face `config.json` for a Llama-architecture shape (bf16, untied head)."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": shape.hidden, "intermediate_size": shape.ffn, "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads, "num_key_value_heads": shape.kv_heads, "vocab_size": shape.vocab,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": shape.rope_theta,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }


class FoldedKvHeads(VerifyPricer):
    """Attention of R requests x H KV heads priced as R·fold requests x H/fold KV heads."""

    def __init__(self, compiled, ops, q: int, fold: int) -> None:
        self.fold = fold
        folded = []
        for op in ops:
            if "GenerationAttention" in op:
                op = json.loads(json.dumps(op))
                body = op["GenerationAttention"]
                body["n"], body["n_kv"] = body["n"] // fold, body["n_kv"] // fold
            folded.append(op)
        super().__init__(compiled, folded, q)

    def rank_shape(self, tokens: int, context: float) -> tuple[int, int, int]:
        b, requests, cached = super().rank_shape(tokens, context)
        return b, requests * self.fold, cached


def aic_points(shape: ModelShape, tokens: np.ndarray, contexts: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(non-attention ms per B, step ms per context × B) on AIConfigurator's H100 vLLM 0.24 tables."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(llama_config(shape)))
        with quiet():
            compiled = compile_target(AicTarget(folder, "h100_sxm", "vllm", "0.24.0"), int(tokens.max()), 4, 0.9)
            pricer = FoldedKvHeads(compiled, list(compiled.ops), 4, shape.kv_heads // 8)
            plain = np.array([pricer.plain_ms(int(b)) for b in tokens])
            steps = np.array([[pricer.plain_ms(int(b)) + pricer.attention_ms(int(b), c) for b in tokens]
                              for c in contexts])
    return plain, steps


def table(tokens: np.ndarray, context: int) -> str:
    shape = load_shape("llama2-7b")
    vidur = load_profile("builtin:h100-llama2-7b")
    v_steps = np.stack([vidur.step_ms(tokens, c) for c in (0, context)])
    v_plain = v_steps[0] - AttentionEstimate().attention_ms(shape, 1, tokens, 0)
    a_plain, a_steps = aic_points(shape, tokens, (0, context))
    head = (f"| B | vidur C=0 | AIC C=0 | AIC/vidur | vidur linear layers | AIC non-attention | AIC/vidur "
            f"| vidur C={context:,} | AIC C={context:,} | AIC/vidur |")
    rows = [head, "|" + "---|" * 10]
    for i, b in enumerate(tokens):
        cells = [v_steps[0, i], a_steps[0, i], v_plain[i], a_plain[i], v_steps[1, i], a_steps[1, i]]
        rows.append(f"| {b} | {cells[0]:.2f} | {cells[1]:.2f} | {cells[1] / cells[0]:.2f} | {cells[2]:.2f} | "
                    f"{cells[3]:.2f} | {cells[3] / cells[2]:.2f} | {cells[4]:.2f} | {cells[5]:.2f} | "
                    f"{cells[5] / cells[4]:.2f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS))
    parser.add_argument("--context", type=int, default=65536, help="total KV context of the second comparison")
    args = parser.parse_args()
    print("Llama-2-7B, one H100 SXM, step time in ms: vidur-derived built-in vs AIConfigurator (vLLM 0.24, "
          "4 query tokens per request); C = total KV context of the batch")
    print()
    print(table(np.array(sorted(set(args.tokens))), args.context))


if __name__ == "__main__":
    main()
