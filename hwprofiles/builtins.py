"""Regenerate the derived built-in profiles in `hwprofiles/data/`.

    python -m specplan.hwprofiles.builtins [SHARED_DIR]

Three families, each a pure function of its inputs, so running this again
reproduces the committed CSVs byte for byte (tests check it):

- derived from `SHARED_DIR/profiles/vidur/` and `profiles/splitwise/`
  (default: `../shared` beside the repository); skipped, with a note, when
  that folder is absent;
- synthetic rooflines (`synthetic-*`, `hwprofiles/roofline.py`);
- imported from NVIDIA AIConfigurator's database (`aiconfigurator.py`; needs
  the `aic` extra, not ../shared): verify-step profiles and drafter-forward
  profiles built from the same operators (`*-mtp`, `*-drafter-*`,
  `*-dspark`), DeepSeek-V4 included (`v4_builtins`), and prefill-step profiles
  from its context-phase tables (`*-prefill`, `aiconfigurator.prefill_profile`).

The profiles measured on a machine (`cpu-*`, `h200-*-measured`) are written
by `specplan profile` instead and are not touched here.
"""

from __future__ import annotations

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

# DeepSeek-V4 (aiconfigurator-core 0.12.0's V4 configs and tables). Checkpoints: the released FP4-expert
# ones under vLLM on Blackwell; the FP8 ones (sgl-project/*-FP8) on the H200 (no FP4 MoE tables there) and
# under SGLang (its tables hold FP8 MoE only). Topologies: TP8/EP8, and data-parallel attention (TP1 x DP8)
# with EP8. Left out, with the reason: V4-Pro on 8 x H200 (FP8 weights do not fit), V4-Pro DP8 on B200 and
# under SGLang (the package's memory model leaves no KV cache), GB300 (same GPU as the B300; its vLLM MoE
# term is twice the B300's at one token).
V4_FLASH, V4_PRO = "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro"
V4_FLASH_FP8, V4_PRO_FP8 = "sgl-project/DeepSeek-V4-Flash-FP8", "sgl-project/DeepSeek-V4-Pro-FP8"
BACKENDS = {"vllm": "0.24.0", "sglang": "0.5.14"}
TOPOLOGIES = {"tp8ep8": (8, 1), "dp8ep8": (1, 8)}
V4_TARGETS = [  # (system, model family, topology, backend, checkpoint)
    *((s, "flash", t, "vllm", V4_FLASH_FP8 if s == "h200_sxm" else V4_FLASH)
      for s in ("h200_sxm", "b200_sxm", "b300_sxm") for t in TOPOLOGIES),
    *((s, "flash", t, "sglang", V4_FLASH_FP8) for s in ("h200_sxm", "b200_sxm", "b300_sxm") for t in TOPOLOGIES),
    ("b200_sxm", "pro", "tp8ep8", "vllm", V4_PRO), ("b300_sxm", "pro", "tp8ep8", "vllm", V4_PRO),
    ("b300_sxm", "pro", "dp8ep8", "vllm", V4_PRO), ("b300_sxm", "pro", "tp8ep8", "sglang", V4_PRO_FP8),
]
# the verify step (4 query tokens per request); DeepSeek-V4's MTP module (eh_proj + 1 MoE layer with
# sliding-window attention and mHC + LM head, one position per request); DSpark-5's drafter (3 MoE layers
# + mHC + sliding-window attention + LM head over the anchor and 5 mask positions; the Markov head is
# priced by the simulator)
V4_FORWARDS: dict[str, tuple[AicLayout, AicDrafter | None]] = {
    "": (AicLayout(), None),
    "-mtp": (AicLayout(query_tokens=1), AicDrafter(layers=1, moe=True, fuse_inputs=2)),
    "-dspark": (AicLayout(query_tokens=6), AicDrafter(layers=3, moe=True)),
}


def v4_builtins() -> dict[str, tuple[AicTarget, AicLayout, AicDrafter | None]]:
    out = {}
    for system, family, topology, backend, model in V4_TARGETS:
        tp, dp = TOPOLOGIES[topology]
        target = AicTarget(model, system, backend, BACKENDS[backend], tp=tp, ep=8, dp=dp)
        for suffix, (layout, drafter) in V4_FORWARDS.items():
            name = f"{system.removesuffix('_sxm')}-deepseek-v4-{family}-{topology}-{backend}{suffix}"
            out[name] = (target, layout, drafter)
    return out


# The replication suite's topologies (benchmarks/published/): one replica as each public run served it,
# on the database's nearest version (SGLang 0.5.14, vLLM 0.24.0). TP4/EP4 on 4 x H200 and 4 x GB300
# (the 0731 recipes; FP8 MoE, SGLang's only MoE tables), TP4/EP4 on 4 x B200 (InferenceX #3346), and
# the released FP4-expert checkpoint on one B300 under vLLM (issue #49369).
REPLICATION_V4_TARGETS = [  # (name stem, target)
    ("h200-deepseek-v4-flash-tp4ep4-sglang", AicTarget(V4_FLASH_FP8, "h200_sxm", "sglang", "0.5.14", tp=4, ep=4)),
    ("gb300-deepseek-v4-flash-tp4ep4-sglang", AicTarget(V4_FLASH_FP8, "gb300", "sglang", "0.5.14", tp=4, ep=4)),
    ("b200-deepseek-v4-flash-tp4ep4-sglang", AicTarget(V4_FLASH_FP8, "b200_sxm", "sglang", "0.5.14", tp=4, ep=4)),
    ("b300-deepseek-v4-flash-tp1-vllm", AicTarget(V4_FLASH, "b300_sxm", "vllm", "0.24.0")),
]


def replication_builtins() -> dict[str, tuple[AicTarget, AicLayout, AicDrafter | None]]:
    return {f"{stem}{suffix}": (target, layout, drafter) for stem, target in REPLICATION_V4_TARGETS
            for suffix, (layout, drafter) in V4_FORWARDS.items() if suffix != "-mtp"}


AIC_BUILTINS.update(v4_builtins())
AIC_BUILTINS.update(replication_builtins())

# name -> target: prefill (context-phase) step profiles over (new prompt tokens, Σ n(n + 2p))
PREFILL_BUILTINS: dict[str, AicTarget] = {
    "h200-llama3.1-8b-vllm-prefill": AicTarget(LLAMA31_8B, "h200_sxm"),
    "b200-llama3.1-8b-vllm-prefill": AicTarget(LLAMA31_8B, "b200_sxm"),
}


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
    makers = {**aic_builtins(), **prefill_builtins()} if names else aic_builtins()
    return write_all({n: makers[n] for n in (names or makers)}, out_dir)


def main(argv: list[str]) -> int:
    shared = Path(argv[0]) if argv else DEFAULT_SHARED
    if (shared / "profiles").is_dir():
        written = regenerate(shared)
    else:
        print(f"skipped the vidur/splitwise built-ins: {shared / 'profiles'} not found")
        written = write_all(synthetic_builtins(), DATA_DIR)
    try:
        written += regenerate_aic()
        written += write_all(prefill_builtins(), DATA_DIR)
    except ProfileError as exc:
        print(f"skipped the AIConfigurator built-ins: {exc}")
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
