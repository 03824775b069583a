"""DeepSeek-V4's lightning indexer: the extra query tokens of a verify, from the paged-MQA-logits table.

CSA's indexer scores the q query tokens of a request against its compressed
keys in one paged-MQA-logits call whose cost the attention module's head
axis does not carry (the indexer has its own 64 heads at every TP), so CSA
layers add mqa(R, q, C/R + q) − mqa(R, 1, C/R + q) from the database's
`dsv4_paged_mqa_logits_module` table (batch R, q query tokens, C/R + q
cached; linear interpolation on its grid, clamped at its edges).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from specplan.hwprofiles.aiconfigurator.compile import CompiledTarget
from specplan.hwprofiles.aiconfigurator.operators import dsv4_body, is_csa
from specplan.hwprofiles.aiconfigurator.package import table_view
from specplan.hwprofiles.aiconfigurator.targets import where
from specplan.hwprofiles.errors import ProfileError


class MqaTable:
    """The database's paged-MQA-logits table (DeepSeek-V4's indexer): ms at (batch, query tokens, cached).

    Linear interpolation on its (cached, query tokens, batch) grid, inputs
    clamped to the grid's edges; cells it did not sample take the nearest
    sampled KV length of the same batch and query count.
    """

    def __init__(self, view: dict[Any, Any]) -> None:
        steps = sorted(int(k) for k in view)
        isls = sorted({int(i) for by_isl in view.values() for i in by_isl})
        batches = sorted({int(b) for by_isl in view.values() for by_b in by_isl.values() for b in by_b})
        grid = np.full((len(steps), len(isls), len(batches)), np.nan)
        for s, by_isl in view.items():
            for i, by_b in by_isl.items():
                for bt, cell in by_b.items():
                    grid[steps.index(int(s)), isls.index(int(i)), batches.index(int(bt))] = float(cell["latency"])
        self.axes = (np.array(steps, float), np.array(isls, float), np.array(batches, float))
        self.lookup = RegularGridInterpolator(self.axes, fill_along_first_axis(grid))

    def ms(self, batch: int, query_tokens: int, cached: int) -> float:
        point = [float(np.clip(v, a[0], a[-1])) for v, a in zip((cached, query_tokens, batch), self.axes, strict=True)]
        value = float(self.lookup(point)[0])
        if math.isnan(value):
            raise ProfileError(f"the paged-MQA-logits table has no sample near batch {batch}, "
                                f"{query_tokens} query tokens")
        return value


def fill_along_first_axis(grid: np.ndarray) -> np.ndarray:
    """NaN cells take the nearest sampled value along axis 0 (the KV length); all-NaN lines stay NaN."""
    out = grid.copy()
    index = np.arange(grid.shape[0])
    for j in range(grid.shape[1]):
        for k in range(grid.shape[2]):
            known = ~np.isnan(grid[:, j, k])
            if known.any():
                nearest = index[known][np.abs(index[:, None] - index[known][None, :]).argmin(axis=1)]
                out[:, j, k] = grid[nearest, j, k]
    return out


def mqa_table(compiled: CompiledTarget, ops: list[dict[str, Any]]) -> MqaTable:
    """The indexer's table for these CSA modules' indexer heads, or a one-line error."""
    target = compiled.target
    heads = next(int(body["index_n_heads"]) for op in ops if is_csa(op) and (body := dsv4_body(op)) is not None)
    view = table_view(target.system, target.backend, target.backend_version, "_dsv4_sparse_kernel_data.paged_mqa_logits")
    by_tp = view.get(heads) or {}
    if not by_tp:
        raise ProfileError(f"{target.model} on {where(target)}: the database has no paged-MQA-logits table for "
                            f"{heads} indexer heads, so CSA layers cannot be priced for multi-token queries")
    return MqaTable(by_tp[min(by_tp)])
