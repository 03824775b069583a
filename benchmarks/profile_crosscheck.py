"""Independent sources for one GPU curve, held side by side: vidur, AIConfigurator, the torch harness.

Without `--torch`: vidur's H100 Llama-2-7B against AIConfigurator's.

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

With `--torch CURVE ...`: curves the torch harness captured on a GPU (benchmarks/profile_gpu.py)
against the AIConfigurator built-in of the same model on that GPU (`builtin:h200-llama3.1-8b-vllm`
for llama3-8b, `builtin:h200-qwen3-8b-vllm` for qwen3-8b, or `--against`), at the torch curve's
own points (a CUDA-graph curve's buckets): B tokens over R = ceil(B / 4) requests of c cached
tokens each, so the built-in is read at total context C = c·R. Neither curve is adjusted to the
other. Per curve it prints the ratio torch/AIC per token count and context, its median and max,
where the cliffs fall in each curve (a jump between neighbouring points of at least 3% that is
3x steeper than the curve's median slope, or a drop of 3%) and how far each stays flat, and,
where the two are more than 15% apart, which terms differ: GEMM (torch `gemm_ms`; AIC the
`*_gemm` operators), attention (torch `attention_ms`; AIC `attention`) and the rest (norms,
activation, embedding, RoPE, copies: the step less both). AIC's terms are aiconfigurator-core's
operator split at exactly that point; the built-in is the same composition on its grid.

    .venv/bin/python benchmarks/profile_crosscheck.py --torch hwprofiles/data/h200-llama3.1-8b-torch-cudagraph.csv \
        hwprofiles/data/h200-qwen3-8b-torch-cudagraph.csv

Needs the `aic` extra (aiconfigurator-core).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
from pathlib import Path

import numpy as np

from specplan.hwprofiles import StepProfile, load_profile
from specplan.hwprofiles.aiconfigurator import AicTarget, VerifyPricer, compile_target, quiet
from specplan.hwprofiles.builtins import AIC_BUILTINS
from specplan.hwprofiles.derive_vidur import AttentionEstimate
from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.modelshape import ModelShape, load_shape

TOKENS = (1, 8, 32, 64, 72, 104, 128, 256, 512)
AGAINST = {"llama3-8b": "builtin:h200-llama3.1-8b-vllm", "qwen3-8b": "builtin:h200-qwen3-8b-vllm"}
TERMS = ("gemm", "attention", "rest")
APART = 0.15  # more than this far apart: say which terms differ


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


# --- torch-captured curves against AIConfigurator -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Points:
    """Where a torch curve was measured: token counts B, requests R(B), cached tokens per request."""

    tokens: np.ndarray
    requests: np.ndarray
    cached: int

    @property
    def context(self) -> np.ndarray:
        """Total KV context of each point's batch (the context axis of the AIConfigurator built-ins)."""
        return self.requests * self.cached


def torch_points(curve: StepProfile) -> Points:
    """A captured curve's measured points: a CUDA-graph curve's buckets, else its token counts."""
    prov = curve.provenance
    if "context_per_request" not in prov or curve.context_tokens is not None:
        raise ProfileError(f"{curve.name}: no 'context_per_request' in its header (a curve captured with "
                           "fixed cached tokens per request, as benchmarks/profile_gpu.py writes, is needed)")
    tokens = np.array([int(b) for b in prov["buckets"].split()]) if "buckets" in prov else curve.tokens
    per_request = int(prov.get("tokens_per_request", 4))
    return Points(tokens, np.array([math.ceil(b / per_request) for b in tokens]), int(prov["context_per_request"]))


def column_ms(curve: StepProfile, column: str, tokens: np.ndarray, context: np.ndarray | None = None) -> np.ndarray:
    """A curve's extra column (`attention_ms`, `gemm_ms`) read like its step time."""
    table = curve.extra.get("columns", {})[column]
    return dataclasses.replace(curve, step_ms_table=np.maximum(table, 1e-9)).step_ms(tokens, context)


def torch_terms(curve: StepProfile, points: Points) -> dict[str, np.ndarray]:
    """The step and, where the curve timed its parts, its GEMM, attention and the rest."""
    step = curve.step_ms(points.tokens)
    if not {"gemm_ms", "attention_ms"} <= set(curve.extra.get("columns", {})):
        return {"step": step}
    gemm, attention = column_ms(curve, "gemm_ms", points.tokens), column_ms(curve, "attention_ms", points.tokens)
    return {"step": step, "gemm": gemm, "attention": attention, "rest": step - gemm - attention}


def aic_terms(builtin: str, points: Points) -> dict[str, np.ndarray]:
    """The built-in's step at each point, and aiconfigurator-core's GEMM / attention / rest split there."""
    curve = load_profile(builtin)
    name = builtin.removeprefix("builtin:")
    if name not in AIC_BUILTINS or AIC_BUILTINS[name][2] is not None:
        raise ProfileError(f"--against {builtin}: not an AIConfigurator verify-step built-in")
    target, layout, _ = AIC_BUILTINS[name]
    with quiet():
        compiled = compile_target(target, int(points.tokens.max()), layout.query_tokens, layout.memory_fraction)
        pricer = VerifyPricer(compiled, list(compiled.ops), layout.query_tokens)
        splits = [operator_ms(pricer, int(b), float(c)) for b, c in zip(points.tokens, points.context, strict=True)]
    terms = {term: np.array([sum(ms for op, ms in split if term_of(op) == term) for split in splits])
             for term in TERMS}
    return {"step": curve.step_ms(points.tokens, points.context), **terms}


def operator_ms(pricer: VerifyPricer, tokens: int, context: float) -> list[tuple[str, float]]:
    """(operator, ms) at one point: every plain leaf at B tokens, then attention (a dense list has no overlap)."""
    if pricer.overlaps:
        raise ProfileError("--against: the cross-check splits dense decoders only (this list overlaps operators)")
    leaves = [(str(e[0]).removeprefix("generation_"), float(e[1])) for e in pricer.leaf_entries(tokens)]
    return [*leaves, ("attention", pricer.attention_ms(tokens, context))]


def term_of(operator: str) -> str:
    """An AIConfigurator operator's term: its GEMMs, its attention, or the rest."""
    if operator.endswith("_gemm"):
        return "gemm"
    return "attention" if operator == "attention" else "rest"


def cliffs(tokens: np.ndarray, ms: np.ndarray, rise: float = 0.03, steep: float = 3.0) -> list[str]:
    """Jumps between neighbouring points: up by `rise` and `steep` x the median slope per token, or down by `rise`."""
    change = ms[1:] / ms[:-1] - 1
    slope = np.diff(ms) / np.diff(tokens)
    typical = float(np.median(np.abs(slope))) if slope.size else 0.0
    jumps = ((change >= rise) & (slope >= steep * typical)) | (change <= -rise)
    return [f"{tokens[i]}→{tokens[i + 1]} {change[i]:+.0%}" for i in np.flatnonzero(jumps)]


def flat_until(tokens: np.ndarray, ms: np.ndarray, within: float = 0.10) -> int:
    """The largest token count whose step stays within `within` of the smallest one's (the memory-bound plateau)."""
    return int(tokens[np.flatnonzero(ms <= ms[0] * (1 + within)).max()])


def apart_terms(torch_ms: dict[str, np.ndarray], aic_ms: dict[str, np.ndarray], i: int) -> str:
    """At point i, each term's torch − AIC difference (ms) and ratio, the largest difference named first."""
    if "gemm" not in torch_ms:
        return "torch parts not timed"
    deltas = {term: float(torch_ms[term][i] - aic_ms[term][i]) for term in TERMS}
    ranked = sorted(TERMS, key=lambda term: -abs(deltas[term]))
    cells = [f"{term} {deltas[term]:+.2f} ms ({ratio_text(torch_ms[term][i], aic_ms[term][i])})" for term in ranked]
    return f"{ranked[0]} differs most: " + ", ".join(cells)


def ratio_text(torch_value: float, aic_value: float) -> str:
    return f"x{torch_value / aic_value:.2f}" if aic_value > 0 else "AIC 0"


def crosscheck(curve: StepProfile, builtin: str) -> str:
    """The comparison of one torch-captured curve with one AIConfigurator built-in, as markdown."""
    points = torch_points(curve)
    torch_ms, aic_ms = torch_terms(curve, points), aic_terms(builtin, points)
    ratio = torch_ms["step"] / aic_ms["step"]
    lines = [f"### {curve.name} against {builtin}", "", *same_machine(curve, load_profile(builtin)), "",
             point_table(points, torch_ms, aic_ms), ""]
    worst = int(np.argmax(np.abs(ratio - 1)))
    lines.append(f"torch/AIC over {ratio.size} points at {points.cached:,} cached tokens per request: median "
                 f"{np.median(ratio):.2f}, max {ratio.max():.2f} (B = {points.tokens[np.argmax(ratio)]}), min "
                 f"{ratio.min():.2f} (B = {points.tokens[np.argmin(ratio)]}); furthest apart at B = "
                 f"{points.tokens[worst]}")
    aic_grid = aic_grid_points(load_profile(builtin), points)
    aic_curve = load_profile(builtin).step_ms(aic_grid.tokens, aic_grid.context)
    lines.append(f"cliffs: torch {', '.join(cliffs(points.tokens, torch_ms['step'])) or 'none'}; AIC (its own grid) "
                 f"{', '.join(cliffs(aic_grid.tokens, aic_curve)) or 'none'}")
    lines.append(f"flat (within 10% of the smallest B) up to: torch B = {flat_until(points.tokens, torch_ms['step'])}, "
                 f"AIC B = {flat_until(aic_grid.tokens, aic_curve)}")
    apart = np.flatnonzero(np.abs(ratio - 1) > APART)
    lines.append(f"more than {APART:.0%} apart at {apart.size} of {ratio.size} points" + (":" if apart.size else ""))
    lines += [f"- B = {points.tokens[i]} ({ratio[i]:.2f}): {apart_terms(torch_ms, aic_ms, i)}" for i in apart]
    return "\n".join(lines)


def aic_grid_points(builtin: StepProfile, points: Points) -> Points:
    """The built-in's own token counts within the torch curve's range, at the same cached tokens per request."""
    tokens = builtin.tokens[builtin.tokens <= points.tokens.max()]
    per_request = max(1, round(points.tokens[-1] / points.requests[-1]))
    return Points(tokens, np.array([math.ceil(b / per_request) for b in tokens]), points.cached)


def same_machine(curve: StepProfile, builtin: StepProfile) -> list[str]:
    """Both sources' devices, and a warning when they are not the same GPU."""
    system = builtin.provenance["device"].rsplit("AIConfigurator system ", 1)[-1]
    gpu = system.split("_")[0]
    lines = [f"torch: {curve.provenance['device']}, torch {curve.provenance.get('torch', '?')}, "
             f"{curve.provenance.get('capture_mode', '?')}; {curve.provenance['statistic']}",
             f"AIC: {builtin.provenance['device']}; {builtin.provenance.get('backend', '?')} tables"]
    if gpu.lower() not in curve.provenance["device"].lower():
        lines.append(f"NOT THE SAME GPU: the torch curve was not captured on a {gpu.upper()}; the ratios compare "
                     "two machines")
    return lines


def point_table(points: Points, torch_ms: dict[str, np.ndarray], aic_ms: dict[str, np.ndarray]) -> str:
    rows = ["| B | C | torch ms | AIC ms | torch/AIC | GEMM torch/AIC | attention torch/AIC | rest torch/AIC |",
            "|---|---|---|---|---|---|---|---|"]
    for i, b in enumerate(points.tokens):
        terms = [f"{torch_ms[t][i]:.2f}/{aic_ms[t][i]:.2f}" if t in torch_ms else "–" for t in TERMS]
        rows.append(f"| {b} | {points.context[i]:,} | {torch_ms['step'][i]:.2f} | {aic_ms['step'][i]:.2f} | "
                    f"{torch_ms['step'][i] / aic_ms['step'][i]:.2f} | " + " | ".join(terms) + " |")
    return "\n".join(rows)


def against_for(curve: StepProfile, against: str | None) -> str:
    if against:
        return against
    shape = curve.provenance["model"].split(" ", 1)[0]
    if shape not in AGAINST:
        raise ProfileError(f"{curve.name}: no AIConfigurator built-in known for shape {shape!r}; give --against")
    return AGAINST[shape]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS))
    parser.add_argument("--context", type=int, default=65536, help="total KV context of the second comparison")
    parser.add_argument("--torch", nargs="+", metavar="CURVE", help="torch-captured curves (CSV paths or builtin:NAME)")
    parser.add_argument("--against", help="the AIConfigurator built-in to hold them against (default: by model)")
    args = parser.parse_args()
    if args.torch:
        try:
            for spec in args.torch:
                curve = load_profile(spec)
                print(crosscheck(curve, against_for(curve, args.against)), end="\n\n")
        except ProfileError as exc:
            print(f"profile_crosscheck: {exc}")
            return 2
        return 0
    print("Llama-2-7B, one H100 SXM, step time in ms: vidur-derived built-in vs AIConfigurator (vLLM 0.24, "
          "4 query tokens per request); C = total KV context of the batch")
    print()
    print(table(np.array(sorted(set(args.tokens))), args.context))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
