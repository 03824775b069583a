"""Building a verify-step (or drafter-forward) profile: compile, price the parts, apply the public rule, grid.

    compile_target -> VerifyPricer.leaf_curves (every part at every B) -> deepep_rule
        -> apply_public_rule (with megamoe_carry's rows where MegaMoE has no row at the target's GPU and EP)
        -> apply_gemm_rule -> apply_physical_rule -> token grid of the charged step
        -> attention and indexer at every (B, C) -> StepProfile

The profile's main table holds step_ms, attention_ms and (DeepSeek-V4 CSA)
indexer_ms over (B, C); its parts table the non-attention parts' own times
and overlap_hidden_ms over B (parts.py gives the sum). `aic_command` is the
`specplan profile` command line that writes the same file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specplan.hwprofiles.aiconfigurator.compile import CompiledTarget, compile_target
from specplan.hwprofiles.aiconfigurator.deepep import deepep_rule
from specplan.hwprofiles.aiconfigurator.drafters import attention_window, drafter_ops
from specplan.hwprofiles.aiconfigurator.megamoe_carry import CarryResult, carried_rows, expert_shape
from specplan.hwprofiles.aiconfigurator.operators import kind_of, walk
from specplan.hwprofiles.aiconfigurator.package import quiet, require_aic
from specplan.hwprofiles.aiconfigurator.parts import PUBLIC_PARTS, LeafCurves
from specplan.hwprofiles.aiconfigurator.physical_rule import apply_physical_rule
from specplan.hwprofiles.aiconfigurator.provenance import Priced, provenance
from specplan.hwprofiles.aiconfigurator.public import (
    Measurement,
    ProfileKey,
    apply_public_rule,
    engine_kernel,
    geometry,
    load_measurements,
)
from specplan.hwprofiles.aiconfigurator.public_gemm import apply_gemm_rule, gemm_leaves
from specplan.hwprofiles.aiconfigurator.targets import AicDrafter, AicLayout, AicTarget
from specplan.hwprofiles.aiconfigurator.tokengrid import (
    context_rows,
    gemm_sample_tokens,
    replica_grid,
)
from specplan.hwprofiles.aiconfigurator.verify import VerifyPricer
from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.profile import StepProfile


def aic_command(target: AicTarget, layout: AicLayout, drafter: AicDrafter | None = None) -> str:
    """The `specplan profile` command that writes this profile (recorded in its `source`)."""
    parts = ["specplan profile --source aiconfigurator", f"--model {target.model}", f"--system {target.system}",
             f"--backend {target.backend}", f"--backend-version {target.backend_version}"]
    parts += [f"--{key} {getattr(target, key)}" for key in ("tp", "ep", "dp") if getattr(target, key) != 1]
    parts += [f"--{key.replace('_', '-')} {getattr(target, key)}" for key in ("moe_quant", "moe_backend")
              if getattr(target, key)]
    parts += [f"--tokens-per-request {layout.query_tokens}", f"--max-tokens {layout.max_tokens}"]
    if layout.context_tokens:
        parts.append("--total-context " + ",".join(str(c) for c in layout.context_tokens))
    if layout.memory_fraction != AicLayout.memory_fraction:
        parts.append(f"--memory-fraction {layout.memory_fraction:g}")
    if drafter is not None:
        parts.append(f"--drafter-layers {drafter.layers}")
        parts += ["--drafter-moe"] if drafter.moe else []
        parts += [f"--drafter-fuse {drafter.fuse_inputs}"] if drafter.fuse_inputs else []
    return " ".join(parts)


def aic_profile(target: AicTarget, layout: AicLayout, name: str, command: str = "",
                drafter: AicDrafter | None = None) -> StepProfile:
    """The verify-step (or, with `drafter`, the drafter-forward) profile of `target`."""
    require_aic()
    with quiet():
        return build_profile(target, layout, name, command, drafter)


def price(target: AicTarget, layout: AicLayout, command: str, drafter: AicDrafter | None) -> Priced:
    """Every part at every B, the public rule applied, and the token grid of the charged step."""
    compiled = compile_target(target, layout.max_tokens, layout.query_tokens, layout.memory_fraction)
    ops = list(compiled.ops) if drafter is None else drafter_ops(compiled, drafter)
    pricer = VerifyPricer(compiled, ops, layout.query_tokens, 0 if drafter is None else attention_window(ops))
    deepep = deepep_rule(pricer.leaf_curves(layout.max_tokens), pricer.plain_ops, target, prefill=False)
    key = profile_key(compiled, ops, layout.max_tokens)
    rows, carry = public_rows(key, ops)
    leaves, checks = apply_public_rule(deepep.leaves, key, rows, moe_layers(ops))
    leaves, gemm_checks = apply_gemm_rule(leaves, gemm_leaves(pricer.plain_ops), target.system, target.dp, rows)
    leaves, physical = apply_physical_rule(leaves, pricer.plain_ops, compiled, layout.query_tokens)
    if target.moe_backend == "megamoe" and not any(p in leaves.notes for p in PUBLIC_PARTS["moe_block"]):
        raise ProfileError(f"--moe-backend megamoe: no public MegaMoE measurement matches {target.model} on "
                           f"{target.system} at EP{target.ep} with data-parallel attention, none at EP8 on it (or "
                           "on a GPU of equal peaks) for the MegaMoE carry rule (megamoe_carry.py) to carry, and "
                           "the database has no MegaMoE table of this geometry (hwprofiles/public/kernels.csv)")
    tokens = replica_grid(gemm_sample_tokens(compiled, ops), layout.query_tokens, leaves.charged_ms(), target.dp)
    return Priced(compiled, layout, drafter, pricer, leaves, tokens, checks, command, gemm_checks, physical,
                  deepep.line, carry.line)


def build_profile(target: AicTarget, layout: AicLayout, name: str, command: str,
                  drafter: AicDrafter | None) -> StepProfile:
    priced = price(target, layout, command, drafter)
    pricer, tokens = priced.pricer, priced.tokens
    contexts = context_rows(priced.compiled.kv_capacity_tokens, layout.context_tokens)
    attention = np.array([[pricer.attention_ms(int(b), c) for b in tokens] for c in contexts])
    columns = {"attention_ms": attention}
    if pricer.indexer is not None:
        columns["indexer_ms"] = np.array([[pricer.indexer_ms(int(b), c) for b in tokens] for c in contexts])
    step = priced.plain[tokens - 1] + sum(columns.values())
    return StepProfile(
        name=name, tokens=tokens, step_ms_table=step, context_tokens=np.array(contexts, dtype=np.int64),
        provenance=provenance(priced), extra={"columns": columns, "parts": parts_table(priced.leaves, tokens)},
    )


def parts_table(leaves: LeafCurves, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Each non-attention part's own time at the grid's B, and the time the overlap hides."""
    table = {f"{part}_ms": leaves.part_ms(part)[tokens - 1] for part in leaves.part_names()}
    if leaves.overlaps:
        table["overlap_hidden_ms"] = leaves.hidden_ms()[tokens - 1]
    return table


def moe_body(ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((op["Moe"] for op in walk(ops) if kind_of(op) == "Moe"), None)


def moe_layers(ops: list[dict[str, Any]]) -> float:
    """How many MoE layers the operator list stands for (the MoE operator's scale factor; 1 without one)."""
    body = moe_body(ops)
    return float(body["scale_factor"]) if body is not None else 1.0


def public_rows(key: ProfileKey, ops: list[dict[str, Any]]) -> tuple[list[Measurement], CarryResult]:
    """The public table's rows and, where MegaMoE has none at the key's GPU and EP, the rows the carry rule
    derives (megamoe_carry.py), with its header line."""
    measured = load_measurements()
    carry = carried_rows(measured, key, expert_shape(moe_body(ops)))
    return measured + carry.rows, carry


def profile_key(compiled: CompiledTarget, ops: list[dict[str, Any]], max_tokens: int) -> ProfileKey:
    target = compiled.target
    return ProfileKey(target.system, target.ep, target.dp, geometry(moe_body(ops)),
                      engine_kernel(target, str(compiled.engine["moe_dtype"])), max_tokens)
