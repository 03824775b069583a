"""Provenance: what a verify-step or drafter profile's header says about where each figure comes from.

Place in the data flow: `build.py` prices a profile and hands the result
(`Priced`) here; the returned `# key: value` lines go into the file
(fileformat.py). Besides the device, model, dtypes, database, layout and
approximations, every file lists every part of its step at a reference
point (B = 128 tokens, 1,024 cached tokens per request) with its ms, its
share of the step and its source (`silicon` or `empirical` from the
database, `public microbenchmark` where the rule of `public.py` set it),
the overlap the estimator charges, and the public rule with the table it
read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specplan.hwprofiles.aiconfigurator.compile import CompiledTarget
from specplan.hwprofiles.aiconfigurator.deepep import RULE_START as DEEPEP_RULE_START
from specplan.hwprofiles.aiconfigurator.operators import dsv4_body, kind_of, walk
from specplan.hwprofiles.aiconfigurator.package import dsv4_module_models, package_version
from specplan.hwprofiles.aiconfigurator.parts import (
    PART_MEANING,
    PART_OF,
    REFERENCE_CACHED,
    REFERENCE_TOKENS,
    LeafCurves,
)
from specplan.hwprofiles.aiconfigurator.physical_rule import RULE as PHYSICAL_RULE
from specplan.hwprofiles.aiconfigurator.physical_rule import (
    Finding,
    physical_header,
    roofline_lines,
)
from specplan.hwprofiles.aiconfigurator.public import PUBLIC_SOURCE, RULE, Check, table_stamp
from specplan.hwprofiles.aiconfigurator.public_gemm import GEMM_RULE, GemmCheck, gemm_leaves
from specplan.hwprofiles.aiconfigurator.targets import (
    DEVICE_NAMES,
    AicDrafter,
    AicLayout,
    AicTarget,
)
from specplan.hwprofiles.aiconfigurator.tokengrid import GRID_TOLERANCE, grid_points
from specplan.hwprofiles.aiconfigurator.verify import VerifyPricer


@dataclass(frozen=True, eq=False)
class Priced:
    """A priced profile as build.py hands it over: the pricer, the parts kept, the grid and the checks."""

    compiled: CompiledTarget
    layout: AicLayout
    drafter: AicDrafter | None
    pricer: VerifyPricer
    leaves: LeafCurves
    tokens: np.ndarray
    checks: list[Check]
    command: str
    gemm_checks: list[GemmCheck] = field(default_factory=list)
    physical: list[Finding] = field(default_factory=list)
    deepep: str = ""                # the DeepEP rule's header line (deepep.py); empty where it does not apply
    megamoe_carry: str = ""         # the MegaMoE carry rule's header line (megamoe_carry.py); empty where not applied

    @property
    def plain(self) -> np.ndarray:
        return self.leaves.charged_ms()


COMPOSITION = (
    "step_ms(B, C) = sum over the parts table of each part's own time at B (the non-attention operators: "
    "GEMMs, MoE and its dispatch/combine, norms, mixing, embedding, LM head, all-reduce) - overlap_hidden_ms "
    "+ attention_ms(B, C) + indexer_ms(B, C); attention_ms: GenerationAttention at batch R, KV C/R+q, q x "
    "query heads (multi-token queries packed as heads); MLA modules: module(B rows, KV q) + max(0, module(R, "
    "q x heads, KV C/R+q) - module(R, q x heads, KV q))")
DSV4_COMPOSITION = (
    "; DeepSeek-V4 modules (CSA, HCA): as MLA modules, heads capped at the native count and the cache read "
    "scaled linearly beyond it; indexer_ms = CSA layers x max(0, mqa(R, q, C/R+q) - mqa(R, 1, C/R+q)) from "
    "the paged-MQA-logits table (the indexer's extra query tokens); a V4 drafter's layers: one sliding-window "
    "module per layer, priced as HCA with KV capped at the window")
APPROXIMATIONS = (
    "canonical layout (requests of q tokens, context spread evenly); MLA split into projections at B and "
    "cache read at R; no host, scheduler or sampling time (kernel timings only); shapes the database did not "
    "sample are interpolated, beyond its largest sample extrapolated by the estimator; MoE routing by the "
    "estimator's workload distribution")
DSV4_APPROXIMATIONS = (
    "; CSA's per-token top-k reads folded into one read per request (under-estimates by up to q-1 top-k reads "
    "per request and layer); beyond the native head count the read is scaled linearly; DSpark's Markov head "
    "not in a drafter forward (the simulator prices it per position)")
OVERLAP_RULE = (
    "aiconfigurator-core's Overlap op (sdk/operations/overlap.py): group_a (router, dispatch, routed experts, "
    "combine) and group_b (the shared expert) run on two CUDA streams, latency = max(sum group_a, sum group_b); "
    "overlap_hidden_ms = min(sum group_a, sum group_b) is what the step does not pay of the parts' own times")


def provenance(priced: Priced) -> dict[str, str]:
    """The header lines of a verify-step or drafter-forward profile (module docstring)."""
    return {**identity(priced), **grid_lines(priced), **part_lines(priced), **physical_lines(priced)}


def physical_lines(priced: Priced) -> dict[str, str]:
    """The physical rule: the peaks, what it set (before/after), and every part's roofline (physical.py)."""
    target = priced.compiled.target
    roofs = roofline_lines(priced.pricer.plain_ops, priced.leaves.part_names(), target.dp)
    return physical_header(target.system, PHYSICAL_RULE, priced.physical, roofs)


def identity(priced: Priced) -> dict[str, str]:
    compiled, layout, drafter = priced.compiled, priced.layout, priced.drafter
    target, engine, q = compiled.target, compiled.engine, layout.query_tokens
    version = package_version()
    hidden = next(op["Embedding"]["hidden_size"] for op in walk(list(compiled.ops)) if kind_of(op) == "Embedding")
    chosen = "as the target names it" if target.moe_quant else "the package's choice for this checkpoint and engine"
    return {
        "device": f"{DEVICE_NAMES.get(target.system, target.system)} x {target.gpus} ({target.parallelism()}); "
                  f"AIConfigurator system {target.system}",
        "model": f"{target.model} ({compiled.model_summary})",
        "what": "verify step of the target" if drafter is None else f"drafter forward: {drafter.describe(hidden)}",
        "dtype": f"weights {engine['weight_dtype']}, MoE {engine['moe_dtype']} ({chosen}), activations "
                 f"{engine['activation_dtype']}, KV cache {engine['kv_cache_dtype']}",
        "source": f"NVIDIA AIConfigurator per-operator database and estimator, aiconfigurator-core {version}; "
                  f"composed by hwprofiles/aiconfigurator/{f' ({priced.command})' if priced.command else ''}",
        "package": f"aiconfigurator-core {version} (Apache-2.0, NVIDIA)",
        "database": f"systems/data/{target.system}, {target.backend} {target.backend_version} tables "
                    f"(estimator spec schema {compiled.spec_schema}, query mode {engine['database_mode']})",
        "backend": f"{target.backend} {target.backend_version}",
        "parallelism": target.parallelism(),
        "license": "Apache-2.0 (NVIDIA AIConfigurator); a table derived from it, not its raw timings",
        "layout": f"B tokens = R = ceil(B/{q}) requests x {q} query tokens (last padded); total KV context C "
                  f"spread evenly, C/R cached tokens per request"
                  + (f"; B and C split evenly over {target.dp} attention ranks" if target.dp > 1 else ""),
        "composition": COMPOSITION + (DSV4_COMPOSITION if is_dsv4(priced) else ""),
        "approximations": APPROXIMATIONS + (DSV4_APPROXIMATIONS if is_dsv4(priced) else ""),
        "kv_capacity_tokens": f"{compiled.kv_capacity_tokens} (the package's memory model at "
                              f"{layout.memory_fraction} of GPU memory)",
        **({"kv_memory": compiled.kv_memory.line()} if compiled.kv_memory else {}),
        **moe_communication(compiled, priced.deepep),
        **attention_data(target, list(compiled.ops), "generation"),
        **({"moe_backend": f"{target.moe_backend}: the engine's MoE backend; the database has no table of it for "
                           f"this geometry, so its default MoE path at {engine['moe_dtype']} gives the block's shape "
                           "and the public measurement its level (public_rule)"
                           + (f"; the EP{target.ep} level is carried from EP8 by the MegaMoE carry rule "
                              "(megamoe_carry)" if priced.megamoe_carry else "")} if target.moe_backend else {}),
        **({"megamoe_carry": priced.megamoe_carry} if priced.megamoe_carry else {}),
    }


def attention_data(target: AicTarget, ops: list[dict[str, Any]], phase: str) -> dict[str, str]:
    """Which model's DeepSeek-V4 attention-module rows price this file (none for another model).

    The database files its V4 module rows per model; V4-Flash's rows under-predict V4-Pro by
    1.27-1.42x on Blackwell (aiconfigurator #1434 / #1453), so a Pro file says whose rows it reads.
    """
    kind = "Dsv4Generation" if phase == "generation" else "Dsv4Context"
    body = next((op[kind] for op in walk(ops) if kind_of(op) == kind), None)
    if body is None:
        return {}
    heads, tp = int(body["num_heads"]), int(body["tp_size"])
    models = dsv4_module_models(target.system, target.backend, target.backend_version, phase, heads, tp)
    family = "V4-Pro" if "V4-Pro" in target.model else "V4-Flash"
    own = [m for m in models if family in m]
    where_rows = (f"{target.backend} {target.backend_version} dsv4 CSA / HCA {phase} module tables at {heads} "
                  f"heads per GPU, TP{tp}")
    if own:
        text = f"DeepSeek-{family}'s own attention-module rows ({', '.join(own)}) in the {where_rows}"
        text += (", not V4-Flash's (aiconfigurator #1434 / #1453: Flash's rows under-predict Pro by 1.27-1.42x on "
                 "Blackwell)" if family == "V4-Pro" else "")
    else:
        text = (f"no DeepSeek-{family} rows in the {where_rows}; the estimator reads "
                + (", ".join(models) if models else "no row there (it interpolates between head counts)"))
    return {"attention_data": text}


def moe_communication(compiled: CompiledTarget, deepep: str = "") -> dict[str, str]:
    """How dispatch and combine are priced for this target (none without a MoE): DeepEP's tables or the database's model."""
    body = next((op["MoeDispatch"] for op in walk(list(compiled.ops)) if kind_of(op) == "MoeDispatch"), None)
    if body is None:
        return {}
    if deepep.startswith(DEEPEP_RULE_START):
        return {"moe_communication": deepep}
    target = compiled.target
    why = (deepep if deepep else
           "the fused MegaMoE block carries its own all-to-all (public_rule)" if target.moe_backend else
           "DeepEP's tables (aiconfigurator-core's comm/sglang wideep_deepep_{ll,normal}_perf, hwprofiles/"
           "aiconfigurator/deepep.py) price SGLang's data-parallel attention over EP MoE only; this target's "
           + ("attention is tensor-parallel (no all-to-all)" if target.dp != target.ep or target.dp == 1
              else f"engine is {target.backend}"))
    return {"moe_communication": f"dispatch and combine by the database's {body['flavor']} model for "
                                 f"{body['backend']} (EP{body['moe_ep_size']}, attention DP{body['attention_dp_size']}, "
                                 f"{body['comm_quant']} payload): {why}"}


def is_dsv4(priced: Priced) -> bool:
    return any(dsv4_body(op) is not None for op in walk(list(priced.compiled.ops)))


def grid_lines(priced: Priced) -> dict[str, str]:
    tokens, plain, dp, q = priced.tokens, priced.plain, priced.compiled.target.dp, priced.layout.query_tokens
    b = grid_points(tokens, dp)
    grid_error = np.max(np.abs(np.interp(b, tokens, plain[tokens - 1]) - plain[b - 1]) / plain[b - 1])
    top = int(tokens[-1])
    grid = (f"{tokens.size} token counts: every m the GEMM tables sample up to {top} (both sides of each tile "
            f"edge), q x 2^k, and refinement until linear lookup matches the non-attention step at every "
            f"integer B within {GRID_TOLERANCE:.1%} (max {grid_error:.2%})" if dp == 1 else
            f"{tokens.size} token counts: B = 1 and {dp} x the attention rank's grid (every m the GEMM tables "
            f"sample, both sides of each tile edge, q x 2^k, refined until linear lookup matches the rank's "
            f"non-attention step at every integer rank share within {GRID_TOLERANCE:.1%}; max {grid_error:.2%} "
            f"at the multiples of {dp}); between them the rank's curve is interpolated, not the "
            f"ceil(B/{dp}) staircase")
    return {
        "token_grid": grid,
        "context_axis": "total KV context tokens of the batch (cached; the B being verified not counted); "
                        "the last row is the replica's KV capacity",
        "capture_mode": "per-operator GPU kernel latencies summed as the estimator composes them",
        "statistic": "the database's per-operator latency (one value per shape, no spread); a part set by a "
                     "public microbenchmark takes that source's statistic (its part line says which)",
        "parts_axis": f"the parts table: each non-attention part's own time at B (q = {q}); attention_ms and "
                      "indexer_ms, which read the KV cache, are columns of the main table",
    }


def reference_point(priced: Priced) -> tuple[int, float]:
    tokens = min(int(priced.tokens[-1]), REFERENCE_TOKENS)
    dp, q = priced.compiled.target.dp, priced.layout.query_tokens
    requests = math.ceil(math.ceil(tokens / dp) / q)
    return tokens, float(requests * REFERENCE_CACHED * dp)


def reference_parts(priced: Priced) -> list[tuple[str, float, str]]:
    """(part, ms, source) at the reference point, the attention parts included."""
    tokens, context = reference_point(priced)
    pricer, leaves = priced.pricer, priced.leaves
    out = [(p, float(leaves.part_ms(p)[tokens - 1]), leaves.part_source(p)) for p in leaves.part_names()]
    if pricer.direct or pricer.modules:
        out.append(("attention", pricer.attention_ms(tokens, context), pricer.attention_source(tokens, context)))
    if pricer.indexer is not None:
        out.append(("indexer", pricer.indexer_ms(tokens, context), "silicon"))
    return out


def part_lines(priced: Priced) -> dict[str, str]:
    """`provenance` (shares by source), `overlap`, `public_rule` and one `part.NAME` line per part."""
    tokens, context = reference_point(priced)
    parts = reference_parts(priced)
    hidden = float(priced.leaves.hidden_ms()[tokens - 1])
    own = sum(ms for _, ms, _ in parts)
    step = own - hidden
    by_source: dict[str, float] = {}
    for _, ms, source in parts:
        for one in source.split("/"):
            by_source[one] = by_source.get(one, 0.0) + ms / len(source.split("/"))
    shares = ", ".join(f"{s} {100 * ms / own:.0f}%" for s, ms in sorted(by_source.items(), key=lambda kv: -kv[1]))
    cached = f"{REFERENCE_CACHED} cached tokens per request"
    meta = {
        "provenance": f"{shares} of the parts' own time at B = {tokens}, C = {context:.0f} ({cached}): "
                      f"{own:.4f} ms, of which the overlap hides {hidden:.4f} ms; step {step:.4f} ms",
        "overlap": OVERLAP_RULE if priced.leaves.overlaps else "none (no operator of this list runs beside another)",
        "public_rule": f"{RULE}; {GEMM_RULE}; table {table_stamp()}; set here: "
                       + (", ".join(sorted(priced.leaves.notes)) or "no part") + gemm_coverage(priced),
    }
    operators = operator_names(priced.leaves)
    for name, ms, source in parts:
        note = priced.leaves.notes.get(name)
        physical = [f"{f.name} {f.why}, set from the {f.how}" for f in priced.physical if f.part == name]
        meta[f"part.{name}"] = (f"{ms:.4f} ms, {100 * ms / step:.1f}% of the step, {source}; "
                                f"{PART_MEANING.get(name, name)}; operators {operators.get(name, name)}"
                                + (f"; {PUBLIC_SOURCE}: {note}" if note else "")
                                + (f"; physical rule: {', '.join(physical)}" if physical else ""))
    return meta


def operator_names(leaves: LeafCurves) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for name in leaves.names:
        out.setdefault(PART_OF.get(name, name), []).append(name)
    return {part: " + ".join(names) for part, names in out.items()}


def gemm_coverage(priced: Priced) -> str:
    """Which of the profile's GEMMs no public measurement checks (their figures stay the database's)."""
    checked = {c.leaf.name for c in priced.gemm_checks}
    unchecked = [g for g in gemm_leaves(priced.pricer.plain_ops) if g.name not in checked]
    if not unchecked:
        return ""
    names = ", ".join(f"{g.name} ({g.precision}, N {g.n} K {g.k})" for g in unchecked)
    return (f"; GEMMs no public measurement checks on {priced.compiled.target.system} (the database's figures "
            f"stand): {names}")
