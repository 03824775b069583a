"""DeepSeek-V4's decode step in AIConfigurator's database as named parts (the MoE overlap opened up).

    .venv/bin/python benchmarks/aic_v4_breakdown.py

The estimator's own decode step (one token per request, 1,024 cached tokens
each) at a few batch sizes, every part with its ms and its source (silicon /
empirical), and the two groups of the estimator's Overlap op: the routed
group (router, dispatch, routed experts, combine) and the shared expert,
of which the step pays the longer (hwprofiles/aiconfigurator/parts.py).
"""

from __future__ import annotations

import argparse

from specplan.hwprofiles.aiconfigurator import AicTarget, VerifyPricer, compile_target, quiet

FLASH, PRO, FLASH_FP8 = "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro", "sgl-project/DeepSeek-V4-Flash-FP8"
CASES = [(FLASH, "b200_sxm", "vllm", "0.24.0", 8, 1), (FLASH, "b200_sxm", "sglang", "0.5.14", 8, 1),
         (FLASH_FP8, "b200_sxm", "sglang", "0.5.14", 8, 1), (PRO, "b300_sxm", "vllm", "0.24.0", 8, 1),
         (FLASH, "b200_sxm", "vllm", "0.24.0", 1, 8)]
BATCHES = (1, 16, 128)


def main() -> None:
    for model, system, backend, version, tp, dp in CASES:
        compiled = compile_target(AicTarget(model, system, backend, version, tp=tp, ep=8, dp=dp), 128 * dp, 1, 0.9)
        pricer = VerifyPricer(compiled, list(compiled.ops), 1)
        leaves = pricer.leaf_curves(max(BATCHES) * dp)
        print(f"\n{model} {system} {backend} {version} TP{tp} DP{dp} EP8, MoE {compiled.engine['moe_dtype']}, "
              "one token per request, KV 1,025")
        for b in (batch * dp for batch in BATCHES):
            step = leaves.charged_ms()[b - 1] + pricer.attention_ms(b, b * 1024)
            parts = ", ".join(f"{p} {leaves.part_ms(p)[b - 1]:.2f} {leaves.part_source(p)}"
                              for p in leaves.part_names() if leaves.part_ms(p)[b - 1] >= 0.01)
            print(f"  B = {b}: {step:.2f} ms = attention {pricer.attention_ms(b, b * 1024):.2f} + {parts}")
            for group_a, group_b in leaves.overlaps:
                routed, shared = leaves.ms[b - 1, list(group_a)].sum(), leaves.ms[b - 1, list(group_b)].sum()
                print(f"    overlap: routed group {routed:.2f} ms | shared expert {shared:.2f} ms -> pays "
                      f"{max(routed, shared):.2f} ({'shared expert' if shared > routed else 'routed group'} longer)")

if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    with quiet():
        main()
