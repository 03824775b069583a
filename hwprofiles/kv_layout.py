"""What a cached token keeps of the KV cache, by model: the bytes a host tier stores and moves, the window it needs.

Place in the data flow: the scenario layer checks `engine.prefix_cache.layout` against
`layout_names()`; the KV tiers (specplan.simulator.engine.cluster.kv_tiers) ask
`kv_layout(engine.prefix_cache.layout, kv_value_bytes)` for the bytes one
cached prompt token costs (what a host-tier load moves over the link) and
for the sliding-window tail a reused prefix needs.

    dense          a model shape (hwprofiles/shapes, e.g. llama3-8b): K and V of every layer and
                   KV head per token (ModelShape.kv_bytes_per_token); no window
    deepseek-v4-*  DeepSeek-V4 keeps, per layer, only a compressed KV (one 512-value latent per
                   `ratio` tokens; CSA layers (ratio 4) add 128-value indexer keys per entry) and a
                   sliding-window tail of the last 128 tokens (512 values each): a cached token
                   costs Σ_layers (512 + indexer) / ratio values; a prefix is reused whole only
                   where the window tail at its end was kept, otherwise the last 128 tokens are
                   computed again (the window before the cut is gone)

DeepSeek-V4's figures are its checkpoints' config.json (deepseek-ai/DeepSeek-V4-Flash
and -Pro, as aiconfigurator-core 0.12.0 ships them: `head_dim` 512,
`index_head_dim` 128, `sliding_window` 128, `compress_ratios`): Flash's 43
layers are 21 CSA (ratio 4), 20 HCA (ratio 128) and 2 window-only; Pro's 61
are 30 CSA and 31 HCA. At one byte per value (FP8 KV, as the built-ins'
profiles run) a cached token is 3,440 bytes on Flash and 4,924 on Pro,
against 131,072 for Llama-3.1-8B in bf16.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.modelshape import load_shape, shape_names

LATENT_VALUES = 512     # DeepSeek-V4 head_dim: one KV latent per compressed entry and per window token
INDEXER_VALUES = 128    # index_head_dim: CSA's indexer key per compressed entry
WINDOW_TOKENS = 128     # sliding_window
# layers per compression ratio (0: window only), from compress_ratios of the first num_hidden_layers
V4_LAYERS = {"deepseek-v4-flash": {4: 21, 128: 20, 0: 2}, "deepseek-v4-pro": {4: 30, 128: 31}}


@dataclass(frozen=True)
class KvLayout:
    """Bytes a cached token keeps over every layer, and the sliding-window tail a reused prefix needs."""

    name: str
    bytes_per_token: float
    window_tokens: int = 0
    window_bytes_per_token: float = 0.0

    def prefix_bytes(self, tokens: int, with_window: bool) -> float:
        """Bytes of a cached prefix of `tokens` tokens (and its window tail, when it carries one)."""
        tail = min(tokens, self.window_tokens) * self.window_bytes_per_token if with_window else 0.0
        return tokens * self.bytes_per_token + tail


def layout_names() -> list[str]:
    return [*V4_LAYERS, *shape_names()]


def kv_layout(name: str, value_bytes: int) -> KvLayout:
    """The layout `name`: a DeepSeek-V4 model, or a dense model shape; ProfileError names the valid ones."""
    if name in V4_LAYERS:
        layers = V4_LAYERS[name]
        values = sum(count * (LATENT_VALUES + (INDEXER_VALUES if ratio == 4 else 0)) / ratio
                     for ratio, count in layers.items() if ratio)
        return KvLayout(name, values * value_bytes, WINDOW_TOKENS, sum(layers.values()) * LATENT_VALUES * value_bytes)
    if name not in shape_names():
        raise ProfileError(f"unknown KV layout '{name}' (valid: {', '.join(layout_names())})")
    return KvLayout(name, float(load_shape(name).kv_bytes_per_token(value_bytes)))
