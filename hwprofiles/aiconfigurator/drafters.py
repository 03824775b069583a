"""Drafter forwards built from the target's own operators (`AicDrafter`).

N of the target's decoder layers (dense, or its MoE layers), an optional
K·hidden → hidden fuse projection (MTP's eh_proj: K = 2; Eagle3: K = 3), the
final norm and LM head, priced over T tokens = R = ceil(T / q) requests of q
positions with the same context axis as the target. For DeepSeek-V4 the
drafter's layers (the MTP module's, DSpark's) use sliding-window attention:
one module per layer, priced as the package prices SWA layers (HCA) with the
KV length capped at the window (128 tokens), with the target's mHC pre/post
per layer. DSpark's sequential Markov head is not in the forward: the
simulator prices it per draft position (`markov_head_fraction`).
"""

from __future__ import annotations

import copy
from typing import Any

from specplan.hwprofiles.aiconfigurator.compile import CompiledTarget
from specplan.hwprofiles.aiconfigurator.operators import dsv4_body, kind_of, walk
from specplan.hwprofiles.aiconfigurator.targets import AicDrafter
from specplan.hwprofiles.errors import ProfileError


def drafter_ops(compiled: CompiledTarget, drafter: AicDrafter) -> list[dict[str, Any]]:
    """The target's operators cut to `drafter.layers` layers (+ fuse projection); LM head kept.

    DeepSeek-V4's attention modules become one sliding-window module per
    drafter layer (`swa_modules`); its KV is capped at the window by the pricer.
    """
    ops = swa_modules([copy.deepcopy(op) for op in compiled.ops], drafter.layers)
    has_moe = any(kind_of(op) == "Moe" for op in walk(ops))
    if drafter.moe and not has_moe:
        raise ProfileError(f"--drafter-moe: {compiled.target.model} has no MoE layers")
    if has_moe and not drafter.moe:
        raise ProfileError(f"{compiled.target.model} is an MoE model: its drafter layers are MoE layers "
                            "(pass --drafter-moe); the database's model has no dense MLP to give them")
    layers = compiled.num_layers
    for op in walk(ops):
        body = op[kind_of(op)]
        scale = body.get("scale_factor")
        if isinstance(scale, (int, float)) and scale >= layers and scale % layers == 0:
            body["scale_factor"] = float(scale) * drafter.layers / layers
    if drafter.fuse_inputs:
        ops.insert(1, fuse_gemm(ops, drafter.fuse_inputs))
    return ops


def swa_modules(ops: list[dict[str, Any]], layers: int) -> list[dict[str, Any]]:
    """DeepSeek-V4 CSA/HCA modules → one HCA-priced sliding-window module × `layers` (as the package prices SWA)."""
    modules = [op for op in ops if dsv4_body(op) is not None]
    if not modules:
        return ops
    swa = copy.deepcopy(modules[0])
    body = dsv4_body(swa)
    assert body is not None
    body["attn_kind"], body["scale_factor"] = "Hca", float(layers)
    at = ops.index(modules[0])
    rest = [op for op in ops if dsv4_body(op) is None]
    return [*rest[:at], swa, *rest[at:]]


def attention_window(ops: list[dict[str, Any]]) -> int:
    """The sliding window a DeepSeek-V4 drafter's attention reads (0: none)."""
    body = next((dsv4_body(op) for op in ops if dsv4_body(op) is not None), None)
    return int(body["window_size"]) if body is not None else 0


def fuse_gemm(ops: list[dict[str, Any]], inputs: int) -> dict[str, Any]:
    """A K·hidden → hidden GEMM (replicated, at the layers' GEMM precision) over the forward's tokens."""
    hidden = next(op["Embedding"]["hidden_size"] for op in walk(ops) if kind_of(op) == "Embedding")
    quant = next((op["Gemm"]["quant_mode"] for op in walk(ops)
                  if kind_of(op) == "Gemm" and "logits" not in op["Gemm"]["name"]), "bfloat16")
    return {"Gemm": {"name": "drafter_fuse_gemm", "scale_factor": 1.0, "n": hidden, "k": inputs * hidden,
                     "quant_mode": quant, "scale_num_tokens": 1, "low_precision_input": False, "seq_split": 1,
                     "below_grid_sol": False}}
