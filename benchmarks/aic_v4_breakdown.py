"""Per-operator decode breakdown of DeepSeek-V4 in AIConfigurator's database (the MoE overlap opened up).

    .venv/bin/python benchmarks/aic_v4_breakdown.py

For the integrator's comparison with public measurements: the estimator's
own decode step (one token per request, 1,024 cached tokens each) at a few
batch sizes, each operator with its source (silicon / empirical / mixed),
and the `moe_overlap` group's members priced alone.
"""

from __future__ import annotations

from specplan.hwprofiles.aiconfigurator import (
    AicTarget,
    compile_target,
    engine_handle,
    kind_of,
    quiet,
)

CASES = [("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "vllm", "0.24.0", 8, 1),
         ("sgl-project/DeepSeek-V4-Flash-FP8", "b200_sxm", "sglang", "0.5.14", 8, 1),
         ("deepseek-ai/DeepSeek-V4-Pro", "b300_sxm", "vllm", "0.24.0", 8, 1),
         ("deepseek-ai/DeepSeek-V4-Flash", "b200_sxm", "vllm", "0.24.0", 1, 8)]


def members(ops: list) -> list:
    overlap = next(op for op in ops if kind_of(op) == "Overlap")["Overlap"]
    return [*overlap["group_a"], *overlap["group_b"]]


def main() -> None:
    for model, system, backend, version, tp, dp in CASES:
        compiled = compile_target(AicTarget(model, system, backend, version, tp=tp, ep=8, dp=dp), 512, 1, 0.9)
        ops, parts = list(compiled.ops), members(list(compiled.ops))
        handle = engine_handle(compiled, ops + parts)
        print(f"\n{model} {system} {backend} {version} TP{tp} DP{dp} EP8, one token per request, KV 1,025")
        for batch in (1, 16, 128):
            whole = handle.evaluate_generation_ops(list(range(len(ops))), batch_size=batch, s=1025, x=None)
            inner = handle.evaluate_generation_ops(list(range(len(ops), len(ops) + len(parts))),
                                                   batch_size=batch, s=1025, x=None)
            total = sum(e[1] for e in whole)
            print(f"  batch {batch}: {total:.2f} ms = " + ", ".join(
                f"{e[0].removeprefix('generation_')} {e[1]:.2f} {e[3]}" for e in whole if e[1] >= 0.01))
            print("    moe_overlap members alone: " + ", ".join(
                f"{e[0].removeprefix('generation_')} {e[1]:.2f} {e[3]}" for e in inner))


if __name__ == "__main__":
    with quiet():
        main()
