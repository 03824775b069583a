"""Model shapes: the few numbers that set a decoder's step cost.

A shape (hidden size, layers, heads, KV heads, FFN size, vocabulary, and
optionally MoE experts and top-k) is all the roofline model and the torch
harness need. Shapes ship as YAML in `hwprofiles/shapes/` (`llama3-8b`,
`qwen3-8b`, `moe-small`, `tiny-cpu`, ...) and are named by `--model`;
`drafter_shape` derives the drafter variants the harness also profiles.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specplan.hwprofiles.errors import ProfileError

SHAPES_DIR = Path(__file__).resolve().parent / "shapes"
DRAFTER_KINDS = ("ar", "parallel", "markov")


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's dimensions (gated SiLU MLP, RMSNorm, untied LM head).

    `moe_experts > 0` makes every layer's MLP a top-`moe_top_k` mixture of
    `moe_experts` experts of FFN size `ffn`. `markov_rank > 0` marks the
    DSpark low-rank Markov head (no decoder layers: `W1[x] W2`, rank r).
    """

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    head_dim: int = 0
    moe_experts: int = 0
    moe_top_k: int = 0
    rope: bool = True
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    markov_rank: int = 0
    description: str = ""

    def __post_init__(self) -> None:
        if self.head_dim == 0 and self.heads:
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        self.validate()

    def validate(self) -> None:
        for key in ("hidden", "vocab"):
            if getattr(self, key) <= 0:
                raise ProfileError(f"shape {self.name}: {key} must be positive")
        if self.markov_rank:
            return
        for key in ("layers", "heads", "kv_heads", "ffn", "head_dim"):
            if getattr(self, key) <= 0:
                raise ProfileError(f"shape {self.name}: {key} must be positive")
        if self.heads % self.kv_heads:
            raise ProfileError(f"shape {self.name}: heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.moe_experts and not 0 < self.moe_top_k <= self.moe_experts:
            raise ProfileError(f"shape {self.name}: moe_top_k must be in 1..moe_experts")
        if self.rope and self.head_dim % 2:
            raise ProfileError(f"shape {self.name}: RoPE needs an even head_dim")

    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

    def layer_params(self, active: bool = False) -> int:
        """Weights in one decoder layer (only the routed top-k experts when `active`)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        experts = 1 if not self.is_moe else (self.moe_top_k if active else self.moe_experts)
        router = self.hidden * self.moe_experts
        return attn + experts * 3 * self.hidden * self.ffn + router + 2 * self.hidden

    def params(self, active: bool = False) -> int:
        """All weights (embedding, layers, final norm, LM head); `active`: per token."""
        if self.markov_rank:
            return 2 * self.vocab * self.markov_rank
        return self.layers * self.layer_params(active) + 2 * self.vocab * self.hidden + self.hidden

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int:
        """KV-cache bytes one context token costs, over all layers."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value

    def describe(self) -> str:
        if self.markov_rank:
            return f"{self.name} (low-rank Markov head, vocab {self.vocab}, rank {self.markov_rank})"
        moe = f", {self.moe_experts} experts top-{self.moe_top_k}" if self.is_moe else ""
        return (f"{self.name} (hidden {self.hidden}, layers {self.layers}, heads {self.heads}/{self.kv_heads} "
                f"kv, head_dim {self.head_dim}, ffn {self.ffn}, vocab {self.vocab}{moe}; "
                f"{_count(self.params())} params)")


def shape_names() -> list[str]:
    return sorted(p.stem for p in SHAPES_DIR.glob("*.yaml"))


def load_shape(spec: str) -> ModelShape:
    """A shipped shape by name, or a YAML file path; errors list the valid names."""
    path = Path(spec)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = SHAPES_DIR / f"{spec}.yaml"
    if not path.is_file():
        raise ProfileError(f"--model: unknown shape {spec!r} (valid: {', '.join(shape_names())}, or a YAML path)")
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ProfileError(f"{path}: cannot read shape ({exc.__class__.__name__})") from None
    return shape_from_mapping(raw, str(path))


def shape_from_mapping(raw: Any, where: str) -> ModelShape:
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: a shape must be a mapping")
    fields = {f.name: f for f in dataclasses.fields(ModelShape)}
    for key in raw:
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ProfileError(f"{where}: unknown key {key!r}{hint}")
    missing = [f.name for f in fields.values() if f.default is dataclasses.MISSING and f.name not in raw]
    if missing:
        raise ProfileError(f"{where}: missing key(s): {', '.join(missing)}")
    return ModelShape(**raw)


def drafter_shape(target: ModelShape, kind: str, layers: int = 1, markov_rank: int = 256) -> ModelShape:
    """The drafter a speculative decoder pairs with `target`.

    - `ar`: an Eagle3-style autoregressive drafter, `layers` (default 1)
      decoder layers of the target's width with its LM head; γ sequential
      passes of R tokens per step.
    - `parallel`: a DFlash-style block drafter, `layers` decoder layers
      over R·γ tokens in one pass.
    - `markov`: DSpark's low-rank Markov head `W1[x_{k-1}] W2` (rank r)
      over the target's vocabulary; γ sequential passes of R tokens.
    """
    if kind not in DRAFTER_KINDS:
        raise ProfileError(f"--drafter: must be one of {', '.join(DRAFTER_KINDS)}, got {kind!r}")
    if kind == "markov":
        return dataclasses.replace(target, name=f"{target.name}-markov-r{markov_rank}", layers=0,
                                   moe_experts=0, moe_top_k=0, markov_rank=markov_rank)
    dense = dataclasses.replace(target, moe_experts=0, moe_top_k=0, layers=layers,
                                name=f"{target.name}-{kind}-drafter-{layers}l")
    if target.is_moe:
        dense = dataclasses.replace(dense, ffn=target.ffn * target.moe_top_k)
    return dense


def _count(params: int) -> str:
    return f"{params / 1e9:.3g}B" if params >= 1e9 else f"{params / 1e6:.3g}M"
