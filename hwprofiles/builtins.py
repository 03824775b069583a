"""Regenerate the derived built-in profiles in `hwprofiles/data/`.

    python -m specplan.hwprofiles.builtins [SHARED_DIR]

Three families, each a pure function of its inputs, so running this again
reproduces the committed CSVs byte for byte (tests check it):

- derived from `SHARED_DIR/profiles/vidur/` and `profiles/splitwise/`
  (default: `../shared` beside the repository); skipped, with a note, when
  that folder is absent;
- synthetic rooflines (`synthetic-*`, `hwprofiles/roofline.py`);
- imported from NVIDIA AIConfigurator's database (the `aiconfigurator`
  package; needs the `aic` extra, not ../shared): verify-step profiles and
  drafter-forward profiles built from the same operators (`*-mtp`,
  `*-drafter-*`, `*-dspark`), DeepSeek-V4 included (`v4_builtins`: every
  name the development set requires, with what the database lacks listed
  beside `V4_SPECS`), each part checked against the public kernel table by
  the rule of `aiconfigurator/public.py`, and prefill-step profiles from its
  context-phase tables (`*-prefill`, `aiconfigurator.prefill_profile`); every
  operator held to its roofline band and its twin in the other engine's
  table by the rule of `aiconfigurator/physical_rule.py` (hwprofiles/physical.py).

The profiles measured on a machine (`cpu-*`, `h200-*-measured`) are written
by `specplan profile` instead and are not touched here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from specplan.hwprofiles.aiconfigurator import (
    AicDrafter,
    AicLayout,
    AicTarget,
    aic_command,
    aic_profile,
    prefill_command,
    prefill_profile,
)
from specplan.hwprofiles.derive_vidur import vidur_profile
from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.fileformat import DATA_DIR, write_profile_csv
from specplan.hwprofiles.import_splitwise import splitwise_profile
from specplan.hwprofiles.modelshape import load_shape
from specplan.hwprofiles.profile import StepProfile
from specplan.hwprofiles.roofline import roofline_profile

DEFAULT_SHARED = Path(__file__).resolve().parents[2] / "shared"
LLAMA31_8B = "meta-llama/Meta-Llama-3.1-8B"
DEEPSEEK_V3 = AicTarget("deepseek-ai/DeepSeek-V3", "h200_sxm", tp=8, ep=8)

# name -> (target, layout, drafter or None): what `specplan profile --source aiconfigurator` would write
AIC_BUILTINS: dict[str, tuple[AicTarget, AicLayout, AicDrafter | None]] = {
    "h200-llama3.1-8b-vllm": (AicTarget(LLAMA31_8B, "h200_sxm"), AicLayout(), None),
    "b200-llama3.1-8b-vllm": (AicTarget(LLAMA31_8B, "b200_sxm"), AicLayout(), None),
    "h100-llama3.1-8b-vllm": (AicTarget(LLAMA31_8B, "h100_sxm"), AicLayout(), None),
    "h200-qwen3-8b-vllm": (AicTarget("Qwen/Qwen3-8B", "h200_sxm"), AicLayout(), None),
    "h200-qwen3-32b-vllm": (AicTarget("Qwen/Qwen3-32B", "h200_sxm"), AicLayout(), None),
    "h200-qwen3-30b-a3b-vllm": (AicTarget("Qwen/Qwen3-30B-A3B", "h200_sxm"), AicLayout(), None),
    "h200-deepseek-v3-tp8ep8-vllm": (DEEPSEEK_V3, AicLayout(), None),
    # DeepSeek-R1-0528 (V3's architecture) under SGLang, TP8 without EP (MoE tensor-parallel, fused Triton FP8
    # block experts): the InferenceX #870 serving case. Its prefill batches (--chunked-prefill-size 32768) are
    # priced on this table at their tokens (no SGLang context-phase MLA table of H200 at a version the package
    # serves), so it spans 32,768 tokens
    "h200-deepseek-v3-tp8-sglang": (AicTarget("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", tp=8),
                                    AicLayout(max_tokens=32768), None),
    # DSpark/DFlash backbone: 5 dense layers + LM head, one forward over R x 7 positions (block 7)
    "h200-llama3.1-8b-vllm-drafter-5l": (AicTarget(LLAMA31_8B, "h200_sxm"), AicLayout(query_tokens=7),
                                         AicDrafter(layers=5)),
    # DSpark's 2-layer backbone (the paper: a 2-layer DSpark beats a 5-layer DFlash) over R x 8 positions
    "h200-llama3.1-8b-vllm-drafter-2l": (AicTarget(LLAMA31_8B, "h200_sxm"), AicLayout(query_tokens=8),
                                         AicDrafter(layers=2)),
    # one decoder layer + LM head over one position per request: an MTP module or an Eagle3 pass
    "h200-llama3.1-8b-vllm-drafter-1l": (AicTarget(LLAMA31_8B, "h200_sxm"), AicLayout(query_tokens=1),
                                         AicDrafter(layers=1)),
    # DeepSeek's MTP module: eh_proj (2 x hidden -> hidden) + one MoE decoder layer + shared LM head, R tokens
    "h200-deepseek-v3-tp8ep8-vllm-mtp": (DEEPSEEK_V3, AicLayout(query_tokens=1),
                                         AicDrafter(layers=1, moe=True, fuse_inputs=2)),
    # DSpark-5 as in the paper's production setting: 3 MoE layers + LM head over R x 5 positions
    "h200-deepseek-v3-tp8ep8-vllm-drafter-3moe": (DEEPSEEK_V3, AicLayout(query_tokens=5),
                                                  AicDrafter(layers=3, moe=True)),
}
# the same three drafter backbones for the other dense targets that ship (Llama-3.1-8B on H100, Qwen3-8B on H200)
DRAFTER_BACKBONES = {"5l": (7, 5), "2l": (8, 2), "1l": (1, 1)}   # suffix -> (positions per request, layers)
AIC_BUILTINS.update({
    f"{gpu}-{model}-vllm-drafter-{suffix}": (AicTarget(checkpoint, f"{gpu}_sxm"), AicLayout(query_tokens=positions),
                                             AicDrafter(layers=layers))
    for gpu, model, checkpoint in (("h100", "llama3.1-8b", LLAMA31_8B), ("h200", "qwen3-8b", "Qwen/Qwen3-8B"))
    for suffix, (positions, layers) in DRAFTER_BACKBONES.items()
})

# DeepSeek-V4 (aiconfigurator-core 0.12.0's V4 configs and tables). Names follow
#     {gpu}-deepseek-v4-{flash|pro}-{topology}-{engine}[-{fp8|nvfp4|megamoe}][-{mtp|dspark}]
# (benchmarks/published/REQUIRED_PROFILES.md). No precision suffix: the released FP4-expert checkpoint as the
# engine runs it on that GPU (compile.py: vLLM and SGLang on Blackwell run FP4 x FP8 FlashInfer TRT-LLM MoE
# kernels, w4a8_mxfp4_mxfp8[_trtllm]); -fp8: the FP8 checkpoint (sgl-project/*-FP8); -nvfp4: NVFP4 experts;
# -megamoe: SGLang's fused MegaMoE (set by its public measurement, public.py). Topologies: tp8ep8 / tp4ep4
# (TP attention, EP MoE), tp4 (TP4 attention, MoE tensor-parallel over the 4 GPUs: EP1), tp1 (one GPU),
# dp8ep8 / dp4ep4 (data-parallel attention over EP MoE).
#
# What the database lacks, so no built-in is written for it (never priced with other kernels):
# - FP4 experts of V4 geometry on Hopper (H200, H100) under either engine: SGLang's Marlin / CUTLASS
#   w4a16_mxfp4 and vLLM's Marlin MXFP4 rows exist only for other geometries (gpt-oss, 896-expert models), so
#   the unsuffixed H200 / H100 names (h200-deepseek-v4-flash-tp4-sglang, its -mtp and -prefill, and V4-Pro on
#   8 x H200, whose FP8 weights do not fit) are not written, nor the Flash Official cells' MXFP4-through-FlashInfer
#   names (h200-deepseek-v4-flash-tp4-sglang-mxfp4, -mxfp4-dspark, -mxfp4-prefill: w4a16_mxfp4 is the only FP4
#   MoE mode of either engine's H200 tables); H200 and H100 run the FP8 checkpoint (-fp8), the stated stand-in of
#   the development set's H200 FP4 cells;
# - NVFP4 experts of V4 geometry under SGLang 0.5.14 (its GB200 / GB300 NVFP4 MoE rows are of top-4, 8, 10 and 22
#   routing, DeepSeek-V3's and Kimi's, none of top-6 over 256 experts), so gb200- and
#   gb300-deepseek-v4-flash-tp4-sglang-nvfp4 (and their -mtp, -prefill) are not written (their cells run on the
#   MXFP4 x FP8 tp4 built-ins of the same GPU, a stated stand-in); vLLM 0.24 has them on B200 (-nvfp4);
# - MegaMoE of V4 geometry at a database version aiconfigurator-core serves: every -megamoe built-in takes its
#   block's level from a public measurement (public/kernels.csv: EP8 on B200 for both geometries, DeepGEMM #316,
#   moe_ep_benchmark / vLLM #49636; EP4 on GB300); b200- and b300-deepseek-v4-flash-dp4ep4-sglang-megamoe, with no
#   row of their own, take B200's EP8 rows carried to EP4 by a stated rule (aiconfigurator/megamoe_carry.py:
#   the extra experts' weight read at HBM bandwidth; B300 = B200, equal HBM, NVLink and FP8 peaks);
# - FP4 (W4A16 MXFP4, Marlin / CUTLASS) experts on H200 and H100: the databases' Hopper W4A16 MXFP4 rows
#   (SGLang 0.5.14, vLLM 0.24.0) are of gpt-oss (32 or 128 experts, hidden 2880, top-4) and of one 896-expert
#   model (hidden 3584, ffn 3072, top-16) only, none of V4-Flash (256 x 4096 x 2048, top-6) or V4-Pro (384 x
#   7168 x 3072, top-6), and no public W4A16 measurement of V4 geometry on Hopper is known (public/kernels.csv);
#   memory is not the obstacle for Flash or for Pro FP4 on 8 x H200 (~0.88 TB of weights, 0.82 TB of them
#   FP4 experts, in 1.13 TB), while Pro FP8 on 8 x H200 does not fit (the package's memory model: 223 GB of
#   non-KV memory per GPU against 141 GB);
# - V4-Pro DP4 (dp4ep4) on 4 x GB300: with data-parallel attention every GPU holds the replicated attention,
#   shared experts and embeddings (~60 GB) beside 96 of the 384 routed experts (61 layers x 96 x 3 x 7168 x
#   3072 x 4.25 bits = 206 GB): 269 GB of non-KV memory per GPU (the package's memory model) against 0.9 x
#   298 GB = 268 GB, so no KV cache is left; TP4 and TP4 / EP4 fit (8.4 and 9.3 M KV tokens);
# - Flash FP8 on 4 x H100 (the weights do not fit: the tp4 cells need 8 x H100, tp8ep8 / dp8ep8 here).
#
# DeepEP is not a gap: aiconfigurator-core ships SGLang 0.5.12's DeepEP tables (comm/sglang/0.5.12/
# wideep_deepep_{ll,normal}_perf.parquet, EP8, V4-Flash's and V4-Pro's shapes among their rows), and every SGLang
# data-parallel-attention built-in (dp4ep4, dp8ep8; not MegaMoE, which fuses its all-to-all) prices dispatch and
# combine from them, EP8 carried to EP4 at equal off-rank traffic (aiconfigurator/deepep.py; each file's
# moe_communication line).
V4_FLASH, V4_PRO = "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro"
V4_FLASH_FP8, V4_PRO_FP8 = "sgl-project/DeepSeek-V4-Flash-FP8", "sgl-project/DeepSeek-V4-Pro-FP8"
TOPOLOGIES = {  # name -> (tp, ep, dp)
    "tp8ep8": (8, 8, 1), "dp8ep8": (1, 8, 8), "tp4ep4": (4, 4, 1), "tp4": (4, 1, 1), "dp4ep4": (1, 4, 4),
    "tp1": (1, 1, 1), "tp8": (8, 1, 1),
}
PRECISIONS = {  # suffix -> (checkpoint of each family, moe_quant, moe_backend)
    "": ({"flash": V4_FLASH, "pro": V4_PRO}, "", ""),
    "-fp8": ({"flash": V4_FLASH_FP8, "pro": V4_PRO_FP8}, "", ""),
    "-nvfp4": ({"flash": V4_FLASH, "pro": V4_PRO}, "nvfp4", ""),
    "-megamoe": ({"flash": V4_FLASH, "pro": V4_PRO}, "", "megamoe"),
}
# the verify step (4 query tokens per request); DeepSeek-V4's MTP module (eh_proj + 1 MoE layer with
# sliding-window attention and mHC + LM head, one position per request, priced per drafting pass); DSpark-5's
# drafter (3 MoE layers + mHC + sliding-window attention + LM head over the anchor and 5 mask positions; the
# Markov head is priced by the simulator)
V4_FORWARDS: dict[str, tuple[AicLayout, AicDrafter | None]] = {
    "": (AicLayout(), None),
    "-mtp": (AicLayout(query_tokens=1), AicDrafter(layers=1, moe=True, fuse_inputs=2)),
    "-dspark": (AicLayout(query_tokens=6), AicDrafter(layers=3, moe=True)),
}
ALL, MTP, DSPARK = ("", "-mtp", "-dspark"), ("", "-mtp"), ("", "-dspark")
V4_SPECS = [  # (gpus, family, topologies, engine, precision suffix, forwards)
    # vLLM 0.24: the paper's comparison (scenarios/deepseek-v4-*.yaml), vLLM #49369 (tp1), #41044 (tp4ep4)
    (("b200", "b300"), "flash", ("tp8ep8", "dp8ep8"), "vllm", "", ALL),
    (("h200",), "flash", ("tp8ep8", "dp8ep8"), "vllm", "-fp8", ALL),
    (("b200", "b300"), "pro", ("tp8ep8",), "vllm", "", ALL),
    (("b300",), "pro", ("dp8ep8",), "vllm", "", ALL),
    (("b300",), "flash", ("tp1",), "vllm", "", DSPARK),
    (("b200",), "flash", ("tp4ep4",), "vllm", "", MTP),
    (("b200",), "flash", ("tp4ep4",), "vllm", "-nvfp4", MTP),
    # SGLang 0.5.14: 8-GPU Flash; the replication cases' TP4/EP4; the cookbook's TP4, DP4 and MegaMoE cells
    (("b200", "b300"), "flash", ("tp8ep8", "dp8ep8"), "sglang", "", ALL),
    (("h200", "h100"), "flash", ("tp8ep8", "dp8ep8"), "sglang", "-fp8", ALL),
    (("b200", "gb300"), "flash", ("tp4ep4",), "sglang", "", DSPARK),
    (("h200",), "flash", ("tp4ep4",), "sglang", "-fp8", DSPARK),
    (("b200", "b300", "gb300"), "flash", ("tp4",), "sglang", "", MTP),
    (("h200",), "flash", ("tp4",), "sglang", "-fp8", MTP),
    (("b200", "b300", "gb200", "gb300"), "flash", ("dp4ep4",), "sglang", "", MTP),
    (("h200",), "flash", ("dp4ep4",), "sglang", "-fp8", MTP),
    (("gb300",), "flash", ("dp4ep4",), "sglang", "-megamoe", ("",)),
    # V4-Pro under SGLang, FP4 experts (issue 28 item 4; kernel microbenchmarks only, no serving figure)
    (("b200", "b300", "gb300"), "pro", ("tp8ep8", "dp8ep8"), "sglang", "", ALL),
    # issue 36: the same 4-B200 topology with both drafters (MTP and DSpark on tp4 and on tp4ep4); V4-Pro on the
    # 4-GPU GB300 topologies that fit (tp4, tp4ep4; dp4ep4 does not, see above); Pro MegaMoE where DeepGEMM #316
    # measures Pro geometry (B200, EP8, data-parallel attention)
    (("b200",), "flash", ("tp4",), "sglang", "", ("-dspark",)),
    # the Flash Official low-latency cells run TP4 without EP (sgl-project/sglang #33082 on GB300, #33083 on H200):
    # their DSpark drafter on the same topology
    (("gb300",), "flash", ("tp4",), "sglang", "", ("-dspark",)),
    (("h200",), "flash", ("tp4",), "sglang", "-fp8", ("-dspark",)),
    (("b200",), "flash", ("tp4ep4",), "sglang", "", ("-mtp",)),
    (("gb300",), "pro", ("tp4", "tp4ep4"), "sglang", "", ALL),
    (("b200",), "pro", ("dp8ep8",), "sglang", "-megamoe", ("",)),
    # issue 47: the Flash Official B200 cells (sgl-project/sglang #33109): TP8 without EP (low latency, DSpark) and
    # MegaMoE on DP8 / EP8 (high throughput; its public measurements are EP8 on B200: moe_ep_benchmark_ep8_b200,
    # deepgemm_pr316)
    (("b200",), "flash", ("tp8",), "sglang", "", DSPARK),
    (("b200",), "flash", ("dp8ep8",), "sglang", "-megamoe", ("",)),
    # the cookbook's DP4 MegaMoE high-throughput cells on B200 and B300 and sglang #25052's step case: no public
    # MegaMoE row at EP4 on either GPU; B200's EP8 rows carried to EP4 by the MegaMoE carry rule, and to B300
    # (equal HBM, NVLink and FP8 peaks) unscaled (aiconfigurator/megamoe_carry.py)
    (("b200", "b300"), "flash", ("dp4ep4",), "sglang", "-megamoe", ("",)),
    # the GB200 NVFP4 low-latency cell's stand-in (SGLang's FP4-expert tables of V4 geometry on GB200; its NVFP4
    # rows are of other routings): TP4 with its MTP drafter
    (("gb200",), "flash", ("tp4",), "sglang", "", MTP),
]
SYSTEMS = {"b200": "b200_sxm", "b300": "b300_sxm", "h200": "h200_sxm", "h100": "h100_sxm", "gb200": "gb200",
           "gb300": "gb300"}
def v4_target(gpu: str, family: str, topology: str, engine: str, precision: str) -> AicTarget:
    checkpoints, moe_quant, moe_backend = PRECISIONS[precision]
    tp, ep, dp = TOPOLOGIES[topology]
    return AicTarget(checkpoints[family], SYSTEMS[gpu], engine, tp=tp, ep=ep, dp=dp,  # the row's table version
                     moe_quant=moe_quant, moe_backend=moe_backend)


def v4_builtins() -> dict[str, tuple[AicTarget, AicLayout, AicDrafter | None]]:
    out = {}
    for gpus, family, topologies, engine, precision, forwards in V4_SPECS:
        for gpu in gpus:
            for topology in topologies:
                target = v4_target(gpu, family, topology, engine, precision)
                for suffix in forwards:
                    layout, drafter = V4_FORWARDS[suffix]
                    out[f"{gpu}-deepseek-v4-{family}-{topology}-{engine}{precision}{suffix}"] = (target, layout, drafter)
    return out


AIC_BUILTINS.update(v4_builtins())

# name -> target: prefill (context-phase) step profiles over (new prompt tokens, Σ n(n + 2p))
PREFILL_BUILTINS: dict[str, AicTarget] = {
    "h200-llama3.1-8b-vllm-prefill": AicTarget(LLAMA31_8B, "h200_sxm"),
    "b200-llama3.1-8b-vllm-prefill": AicTarget(LLAMA31_8B, "b200_sxm"),
}
# DeepSeek-V4-Flash's prefill steps under SGLang (the database's Dsv4Context module), for the engines that run
# prefill batches apart (engine.prefill.schedule: separate): every topology a replication case runs under SGLang
V4_PREFILL_SPECS = [  # (gpus, topologies, precision suffix)
    (("b200", "b300", "gb300"), ("tp4",), ""),
    (("h200",), ("tp4", "tp4ep4", "dp4ep4"), "-fp8"),
    (("b200", "b300", "gb200", "gb300"), ("dp4ep4",), ""),
    (("b200",), ("tp8ep8",), ""),
    (("gb300",), ("tp4ep4",), ""),
    (("b200",), ("tp8", "dp8ep8"), ""),     # issue 47: the Flash Official B200 cells
    (("gb200",), ("tp4",), ""),             # issue 47: the GB200 NVFP4 cell's stand-in
]
# DeepSeek-V4-Pro's prefill steps under SGLang: every topology a Pro decode built-in runs under SGLang but
# B200 DP8 (at the prefill files' 16,384-token budget the package's memory model puts 212 GB of non-KV memory
# on each 193 GB B200: replicated attention and activations beside 48 routed experts; its decode files, at 8,192
# tokens, fit)
V4_PRO_PREFILL_SPECS = [  # (gpus, topologies, precision suffix)
    (("b200", "b300", "gb300"), ("tp8ep8",), ""),
    (("b300", "gb300"), ("dp8ep8",), ""),
    (("gb300",), ("tp4", "tp4ep4"), ""),
]
PREFILL_BUILTINS.update({f"{gpu}-deepseek-v4-{family}-{topology}-sglang{precision}-prefill":
                         v4_target(gpu, family, topology, "sglang", precision)
                         for family, specs in (("flash", V4_PREFILL_SPECS), ("pro", V4_PRO_PREFILL_SPECS))
                         for gpus, topologies, precision in specs for gpu in gpus for topology in topologies})


def synthetic_builtins() -> dict[str, Callable[[], StepProfile]]:
    """The labelled synthetic rooflines (no input files)."""
    return {
        "synthetic-h200-llama3-8b": lambda: roofline_profile(load_shape("llama3-8b"), "h200"),
        "synthetic-b200-llama3-8b": lambda: roofline_profile(load_shape("llama3-8b"), "b200"),
    }


def derived_builtins(shared: Path) -> dict[str, Callable[[], StepProfile]]:
    """Built-in name → a function that derives it from the shared files (or the roofline)."""
    vidur = shared / "profiles" / "vidur"
    splitwise = shared / "profiles" / "splitwise" / "perf_model.csv"
    return {
        "h100-llama2-7b": lambda: vidur_profile(
            vidur / "h100_meta-llama_Llama-2-7b-hf_mlp.csv", load_shape("llama2-7b"), 1, "h100-llama2-7b"),
        "h100-llama2-70b-tp4": lambda: vidur_profile(
            vidur / "h100_meta-llama_Llama-2-70b-hf_mlp.csv", load_shape("llama2-70b"), 4, "h100-llama2-70b-tp4"),
        "splitwise-h100-llama2-70b-tp4": lambda: splitwise_profile(
            splitwise, "llama2-70b", "h100-80gb", 4, name="splitwise-h100-llama2-70b-tp4"),
        **synthetic_builtins(),
    }


def aic_builtins() -> dict[str, Callable[[], StepProfile]]:
    """Built-in name → a function that imports it from aiconfigurator-core (raises without it)."""
    def make(name: str) -> Callable[[], StepProfile]:
        target, layout, drafter = AIC_BUILTINS[name]
        return lambda: aic_profile(target, layout, name, aic_command(target, layout, drafter), drafter)

    return {name: make(name) for name in AIC_BUILTINS}


def prefill_builtins() -> dict[str, Callable[[], StepProfile]]:
    """Built-in name → a function that builds the prefill profile from aiconfigurator-core."""
    def make(name: str) -> Callable[[], StepProfile]:
        target = PREFILL_BUILTINS[name]
        return lambda: prefill_profile(target, name, command=prefill_command(target))

    return {name: make(name) for name in PREFILL_BUILTINS}


def write_all(makers: dict[str, Callable[[], StepProfile]], out_dir: Path) -> list[Path]:
    return [write_profile_csv(make(), out_dir / f"{name}.csv") for name, make in makers.items()]


def regenerate(shared: Path, out_dir: Path = DATA_DIR) -> list[Path]:
    """Write every built-in derived from ../shared (and the rooflines) into `out_dir`."""
    return write_all(derived_builtins(shared), out_dir)


def regenerate_aic(out_dir: Path = DATA_DIR, names: list[str] | None = None) -> list[Path]:
    """Write the AIConfigurator built-ins (all, or `names`) into `out_dir`."""
    makers = {**aic_builtins(), **prefill_builtins()}
    return write_all({n: makers[n] for n in (names or makers)}, out_dir)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m specplan.hwprofiles.builtins",
                                     description="Regenerate the derived built-in profiles in hwprofiles/data/.")
    parser.add_argument("shared", nargs="?", type=Path, default=DEFAULT_SHARED,
                        help="the folder holding profiles/vidur and profiles/splitwise (default: ../shared)")
    shared = parser.parse_args(argv).shared
    if (shared / "profiles").is_dir():
        written = regenerate(shared)
    else:
        print(f"skipped the vidur/splitwise built-ins: {shared / 'profiles'} not found")
        written = write_all(synthetic_builtins(), DATA_DIR)
    try:
        written += regenerate_aic()
    except ProfileError as exc:
        print(f"skipped the AIConfigurator built-ins: {exc}")
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
