"""What a profile is built for: the target (model, system, backend, parallelism), the layout, the drafter.

Plain frozen declarations, checked on construction (a bad value is a
one-line ProfileError naming the command-line flag). Every other module of
the package takes these. What an engine is in the database (its memory
fraction's kind, the table version the built-ins read, its twin engine) is
a column of its row in specplan.engines (`EngineTraits.aic`), read here by
`engine_tables`.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.engines import backend_traits
from specplan.engines.traits import AicTables
from specplan.hwprofiles.errors import ProfileError

DEVICE_NAMES = {
    "h100_sxm": "NVIDIA H100 SXM 80GB", "h200_sxm": "NVIDIA H200 SXM 141GB", "b200_sxm": "NVIDIA B200 180GB",
    "b300_sxm": "NVIDIA B300", "gb200": "NVIDIA GB200", "gb300": "NVIDIA GB300", "a100_sxm": "NVIDIA A100 SXM",
}
MOE_BACKENDS = ("", "megamoe")                   # the engine's default MoE path, or SGLang's fused MegaMoE


@dataclass(frozen=True)
class AicTarget:
    """A model served by one replica: an AIConfigurator model id on a system, backend and version.

    `model` is a Hugging Face id that aiconfigurator-core ships a config for,
    or a local directory holding a `config.json`. `tp` × `dp` GPUs serve it;
    `ep` is the MoE expert-parallel degree (the MoE tensor-parallel degree is
    tp·dp / ep). With `dp` > 1 the profile's B and C are the replica's, split
    evenly over the dp attention ranks. `moe_quant` names the routed experts'
    precision as the engine runs it (a name of the package's MoEQuantMode,
    e.g. `w4a8_mxfp4_mxfp8_trtllm`, `nvfp4`, `fp8_block`; empty: the
    checkpoint's own, `checkpoints.py`); `moe_backend` the engine's MoE
    backend where it is not the default (`megamoe`: SGLang's fused DeepGEMM
    MegaMoE).
    """

    model: str
    system: str
    backend: str = "vllm"
    backend_version: str = ""   # empty: the engine's row's table version (`engine_tables`)
    tp: int = 1
    ep: int = 1
    dp: int = 1
    moe_quant: str = ""
    moe_backend: str = ""

    def __post_init__(self) -> None:
        if not self.backend_version:
            version = engine_tables(self.backend).version
            if version is None:
                raise ProfileError(f"--backend-version: no built-in reads {self.backend}'s tables; name their version")
            object.__setattr__(self, "backend_version", version)
        for key in ("tp", "ep", "dp"):
            if getattr(self, key) < 1:
                raise ProfileError(f"--{key}: must be a positive integer")
        if (self.tp * self.dp) % self.ep:
            raise ProfileError(f"--ep: {self.ep} must divide tp x dp = {self.tp * self.dp}")
        if self.moe_backend not in MOE_BACKENDS:
            raise ProfileError(f"--moe-backend: {self.moe_backend!r} is not one of {', '.join(MOE_BACKENDS[1:])}")

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    def parallelism(self) -> str:
        return f"TP{self.tp} EP{self.ep} DP{self.dp} ({self.gpus} GPU{'s' if self.gpus > 1 else ''})"


@dataclass(frozen=True)
class AicLayout:
    """Which (B, C) points a profile holds and how each is read as requests.

    `query_tokens` is q (R = ceil(B / q) requests); `context_tokens` the
    C rows (empty: 0, 16k, 64k, 256k up to the KV capacity, then the KV
    capacity itself at `memory_fraction` of GPU memory).
    """

    query_tokens: int = 4
    max_tokens: int = 8192
    context_tokens: tuple[int, ...] = ()
    memory_fraction: float = 0.9

    def __post_init__(self) -> None:
        if self.query_tokens < 1:
            raise ProfileError("--tokens-per-request: must be at least 1")
        if self.max_tokens < 1:
            raise ProfileError("--max-tokens: must be at least 1")
        if not 0 < self.memory_fraction <= 1:
            raise ProfileError("--memory-fraction: must be in (0, 1]")


@dataclass(frozen=True)
class AicDrafter:
    """A drafter forward built from the target's own operators (see the module docstring)."""

    layers: int
    moe: bool = False
    fuse_inputs: int = 0

    def __post_init__(self) -> None:
        if self.layers < 1:
            raise ProfileError("--drafter-layers: must be at least 1")
        if self.fuse_inputs < 0 or self.fuse_inputs == 1:
            raise ProfileError("--drafter-fuse: must be 0 (none) or K >= 2 hidden states")

    def describe(self, hidden: int) -> str:
        mlp = "MoE" if self.moe else "dense"
        fuse = f" + fuse projection {self.fuse_inputs}x{hidden} -> {hidden}" if self.fuse_inputs else ""
        return f"{self.layers} {mlp} decoder layer{'s' if self.layers > 1 else ''} of the target{fuse} + final norm + LM head"


def engine_tables(backend: str) -> AicTables:
    """`backend`'s columns in AIConfigurator's database, from its row (specplan.engines.traits.AicTables: the
    memory fraction's kind, the built-ins' table version, the twin engine); an engine without rows has none."""
    return backend_traits(backend).aic


def where(target: AicTarget) -> str:
    return f"{target.system} {target.backend} {target.backend_version} {target.parallelism()}"
