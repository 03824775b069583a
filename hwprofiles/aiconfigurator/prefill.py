"""Prefill pricing: the context phase of a target as a (T, C) step profile.

Place in the data flow: `python -m specplan.hwprofiles.builtins` writes the
`*-prefill` built-ins with `prefill_profile`; a scenario names one as its
prefill pool's step time.

A prefill step computes T new prompt tokens of R requests, request i adding n_i tokens over p_i
tokens already in its KV cache (a cached prefix, or the chunks of its prompt computed in earlier
steps). Its non-attention operators run at T tokens, its LM head at R tokens (one sampled token per
request) and its attention over n_i·(p_i + n_i/2) query-key pairs per request (causal). A prefill
profile is a StepProfile over (T, C) with C = Σ n_i·(n_i + 2·p_i), twice the pairs: one number per
batch that a simulator computes in one numpy reduction. Each (T, C) point is priced under a
canonical layout read back from the two numbers: R = round(T / s) requests of s = C / T new tokens
each and no prefix while s ≤ T (uniform prompts: the shapes the database's context-attention table
measures, reproduced exactly), else one request of T new tokens over a prefix p = (C / T − T) / 2
(capped at PREFILL_MAX_PREFIX: rows beyond any real context only bound the interpolation).

Attention is the database's context-phase module of the model: `ContextAttention` (MHA/GQA) or
DeepSeek-V4's `Dsv4Context` (CSA and HCA layers: the whole module, projections, compressor,
indexer and sparse attention, per layer, priced at the layout's requests, new tokens and prefix).
With dp data-parallel attention ranks, (T, C) is the replica's and every rank holds an even share:
ceil(T / dp) tokens and C / dp pairs (the decode built-ins' layout), its MoE block over every
rank's tokens as the estimator prices the context phase of an attention-DP target. An MoE model's
file also carries the attention column and a parts table (the non-attention parts at T), so the
engine can price each rank's own part apart from the MoE block every rank meets
(specplan.simulator.engine.price.rank_split).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from specplan.hwprofiles.aiconfigurator.compile import (
    CompiledTarget,
    compile_target,
    engine_spec,
    moe_quant_mode,
)
from specplan.hwprofiles.aiconfigurator.deepep import deepep_rule
from specplan.hwprofiles.aiconfigurator.operators import kind_of
from specplan.hwprofiles.aiconfigurator.package import (
    one_line,
    package_version,
    quiet,
    require_aic,
)
from specplan.hwprofiles.aiconfigurator.parts import REFERENCE_TOKENS, LeafCurves
from specplan.hwprofiles.aiconfigurator.physical_rule import (
    Finding,
    apply_physical_rule,
    physical_header,
    roofline_lines,
)
from specplan.hwprofiles.aiconfigurator.provenance import attention_data, moe_communication
from specplan.hwprofiles.aiconfigurator.targets import DEVICE_NAMES, AicTarget, where
from specplan.hwprofiles.aiconfigurator.tokengrid import (
    GRID_TOLERANCE,
    gemm_sample_tokens,
    grid_points,
    replica_grid,
)
from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.profile import StepProfile

PREFILL_CONTEXT_ROWS = (0, *(4**k for k in range(8, 17)), 2 * 4**16)
PREFILL_MAX_TOKENS = 16384
PREFILL_QUERY_STEP = 16
PREFILL_MAX_PREFIX = 1 << 20   # the layout's prefix is capped here (far beyond any model's context)
ATTENTION_KINDS = ("ContextAttention", "Dsv4Context")   # the context-phase modules priced by the layout
MOE_PARTS = ("dispatch", "routed_experts", "combine")


def prefill_layout(tokens: int, pairs: float) -> tuple[int, int, int]:
    """(requests R, new tokens per request, prefix per request) of the canonical layout at (T, C)."""
    s = max(pairs / tokens, 1.0)
    if s <= tokens:
        requests = max(1, round(tokens / s))
        return requests, max(1, round(tokens / requests)), 0
    return 1, tokens, min(round((s - tokens) / 2), PREFILL_MAX_PREFIX)


class PrefillPricer:
    """Prices a prefill step over (T, C) from the context-phase operators (see the section comment)."""

    def __init__(self, compiled: CompiledTarget, context_ops: list[dict[str, Any]]) -> None:
        self.where = f"{compiled.target.model} on {where(compiled.target)}"
        self.dp = compiled.target.dp
        kinds = [kind_of(op) for op in context_ops]
        unsupported = sorted({k for k in kinds if "Attention" in k or "Mla" in k or "Dsa" in k or "DeepSeek" in k}
                             - set(ATTENTION_KINDS))
        if unsupported:
            raise ProfileError(f"{self.where}: context operator(s) {', '.join(unsupported)} have no prefill "
                                f"rule here (supported: {', '.join(ATTENTION_KINDS)})")
        self.attention = [i for i, k in enumerate(kinds) if k in ATTENTION_KINDS]
        self.logits = [i for i, op in enumerate(context_ops) if "logits" in str(op[kind_of(op)].get("name", ""))]
        self.plain = [i for i in range(len(context_ops)) if i not in self.attention and i not in self.logits]
        self.moe = any(kind_of(context_ops[i]) == "Moe" for i in self.plain)
        spec = {"schema_version": compiled.spec_schema, "engine": compiled.engine,
                "context_ops": context_ops, "generation_ops": []}
        aic = require_aic()
        # aiconfigurator-core is the optional 'aic' extra
        from aiconfigurator_core.sdk.engine import EngineHandle

        with one_line(f"compile {self.where}"):
            self.handle = EngineHandle(bytes(aic.engine_spec_bincode_from_json(json.dumps(spec))))

    def entries(self, indices: list[int], batch: int, new_tokens: int, prefix: int = 0) -> list[tuple]:
        if not indices:
            return []
        with one_line(f"price {self.where}"):
            return list(self.handle.evaluate_context_ops(indices, batch_size=batch, s=new_tokens, prefix=prefix))

    def ms(self, indices: list[int], batch: int, new_tokens: int, prefix: int = 0) -> float:
        return float(sum(entry[1] for entry in self.entries(indices, batch, new_tokens, prefix)))

    def leaf_curves(self, max_tokens: int) -> LeafCurves:
        """Every non-attention operator of the replica at T = 1..max_tokens, each rank at ceil(T / dp) tokens."""
        rows = [self.entries(self.plain, 1, t) for t in range(1, -(-max_tokens // self.dp) + 1)]
        if any(len(row) != len(self.plain) for row in rows):
            raise ProfileError(f"{self.where}: a context operator priced as several entries; no parts rule for it")
        names = tuple(str(e[0]).removeprefix("context_") for e in rows[0])
        sources = tuple(str(e[3]) for e in rows[min(len(rows), REFERENCE_TOKENS) - 1])
        rank = np.array([[float(e[1]) for e in row] for row in rows])
        return LeafCurves(names, sources, rank[np.arange(max_tokens) // self.dp], ())

    def layout_ms(self, tokens: int, pairs: float) -> float:
        """LM head at R tokens + attention of the canonical layout at one rank's (T, C)."""
        requests, new, prefix = prefill_layout(tokens, pairs)
        return self.ms(self.logits, requests, 1) + self.ms(self.attention, requests, new, prefix)

    def attention_ms(self, tokens: int, pairs: float) -> float:
        """Attention alone of the canonical layout at one rank's (T, C)."""
        requests, new, prefix = prefill_layout(tokens, pairs)
        return self.ms(self.attention, requests, new, prefix)


def prefill_profile(target: AicTarget, name: str, max_tokens: int = PREFILL_MAX_TOKENS,
                    memory_fraction: float = 0.9, command: str = "") -> StepProfile:
    """The prefill-step profile of `target`: step_ms(T, C) over batched prompt tokens and their pairs."""
    require_aic()
    dp = target.dp
    with quiet():
        compiled = compile_target(target, max_tokens, 1, memory_fraction)
        ops = context_op_list(compiled)
        pricer = PrefillPricer(compiled, ops)
        plain_ops = [ops[i] for i in pricer.plain]
        deepep = deepep_rule(pricer.leaf_curves(max_tokens), plain_ops, target, prefill=True)
        leaves, findings = apply_physical_rule(deepep.leaves, plain_ops, compiled, 1, twin=False)
        plain = leaves.charged_ms()       # the replica at T: each rank at ceil(T / dp)
        tokens = replica_grid(gemm_sample_tokens(compiled, list(compiled.ops)), PREFILL_QUERY_STEP, plain, dp)
        rows = PREFILL_CONTEXT_ROWS
        layout = np.array([[pricer.layout_ms(-(-int(t) // dp), c / dp) for t in tokens] for c in rows])
        extra = split_tables(pricer, leaves, tokens, rows) if pricer.moe else {}
        checked = physical_lines(target, plain_ops, leaves.part_names(), findings) if pricer.moe else {}
    return StepProfile(
        name=name, tokens=tokens, step_ms_table=plain[tokens - 1] + layout,
        context_tokens=np.array(rows, dtype=np.int64),
        provenance=prefill_provenance(compiled, tokens, plain, command, pricer.moe)
        | attention_data(target, ops, "context") | moe_communication(compiled, deepep.line) | checked,
        extra=extra,
    )


PREFILL_PHYSICAL = ("each operator at every T within [0.8 x roofline, 8 x max(roofline, 3 us per kernel or 10 us "
                    "per collective)] (roofline_peaks), at ceil(T/dp) tokens per rank; a failing operator is clamped "
                    "into its band (the decode files' rule without the twin comparison, which is made on "
                    "decode-phase tables)")


def physical_lines(target: AicTarget, ops: list[dict[str, Any]], parts: list[str],
                   findings: list[Finding]) -> dict[str, str]:
    """An MoE prefill file's physical-rule lines: the peaks, what the rule set, each part's roofline."""
    return physical_header(target.system, PREFILL_PHYSICAL, findings, roofline_lines(ops, parts, target.dp))


def split_tables(pricer: PrefillPricer, leaves: LeafCurves, tokens: np.ndarray,
                 rows: tuple[int, ...]) -> dict[str, Any]:
    """An MoE model's attention column (T, C) and parts table (T): what the engine splits by rank."""
    dp = pricer.dp
    attention = np.array([[pricer.attention_ms(-(-int(t) // dp), c / dp) for t in tokens] for c in rows])
    parts = {f"{part}_ms": leaves.part_ms(part)[tokens - 1] for part in leaves.part_names()}
    return {"columns": {"attention_ms": attention}, "parts": parts}


def context_op_list(compiled: CompiledTarget) -> list[dict[str, Any]]:
    """The target's context-phase operator list, as the estimator builds it."""
    return list(engine_spec(compiled.target)[1]["context_ops"])


def prefill_command(target: AicTarget, max_tokens: int = PREFILL_MAX_TOKENS) -> str:
    """How the prefill built-in is made (recorded in its `source`)."""
    topology = "".join(f", {key}={getattr(target, key)}" for key in ("ep", "dp") if getattr(target, key) != 1)
    return (f"specplan.hwprofiles.aiconfigurator.prefill_profile(AicTarget({target.model!r}, {target.system!r}, "
            f"{target.backend!r}, {target.backend_version!r}, tp={target.tp}{topology}), max_tokens={max_tokens})")


def prefill_provenance(compiled: CompiledTarget, tokens: np.ndarray, plain: np.ndarray,
                       command: str, split: bool = False) -> dict[str, str]:
    target, engine = compiled.target, compiled.engine
    version = package_version()
    at = grid_points(tokens, target.dp)  # every T (one rank), or every multiple of the ranks
    grid_error = np.max(np.abs(np.interp(at, tokens, plain[tokens - 1]) - plain[at - 1]) / plain[at - 1])
    lines = {
        "phase": "prefill",
        "device": f"{DEVICE_NAMES.get(target.system, target.system)} x {target.gpus} ({target.parallelism()}); "
                  f"AIConfigurator system {target.system}",
        "model": f"{target.model} ({compiled.model_summary})",
        "what": "prefill (context-phase) step of the target: T new prompt tokens of a batch of requests",
        "dtype": f"weights {engine['weight_dtype']}, activations {engine['activation_dtype']}, KV cache "
                 f"{engine['kv_cache_dtype']} (the package's default quantisation for this model)",
        "source": f"NVIDIA AIConfigurator per-operator database (context-phase tables) and estimator, "
                  f"aiconfigurator-core {version}; composed by hwprofiles/aiconfigurator/"
                  f"{f' ({command})' if command else ''}",
        "package": f"aiconfigurator-core {version} (Apache-2.0, NVIDIA)",
        "database": f"systems/data/{target.system}, {target.backend} {target.backend_version} tables "
                    f"(context_attention, gemm, ...; estimator spec schema {compiled.spec_schema})",
        "backend": f"{target.backend} {target.backend_version}",
        "parallelism": target.parallelism(),
        "license": "Apache-2.0 (NVIDIA AIConfigurator); a table derived from it, not its raw timings",
        "tokens_axis": "T: new prompt tokens computed in the step (all requests of the batch)",
        "context_axis": "C = sum over the batch's requests of n*(n + 2p): n new tokens over p tokens already "
                        "cached (twice the causal attention pairs); C >= T; past the last row the last two rows' "
                        "slope continues (an estimate: the attention is bound by the pairs it computes; "
                        "hwprofiles/profile.py)",
        "layout": "(T, C) is priced as R = round(T/s) requests of s = C/T new tokens and no prefix when s <= T, "
                  "else one request of T new tokens over a prefix (C/T - T)/2",
        "composition": "step_ms(T, C) = context-phase non-attention operators at T tokens (GEMMs, norms, "
                       "activation, embedding, all-reduce) + LM head at R tokens + ContextAttention of the layout",
        "approximations": "a heterogeneous batch is priced as the uniform layout with the same T and C (exact for "
                          "uniform batches; attention kernels are bound by the pairs they compute); kernel "
                          "timings only, no host or scheduler time; shapes the database did not sample are "
                          "interpolated, beyond its largest sample (isl 16,384, batch 256) extrapolated by the "
                          "estimator",
        "kv_capacity_tokens": f"{compiled.kv_capacity_tokens} (the package's memory model at 0.9 of GPU memory)",
        **({"kv_memory": compiled.kv_memory.line()} if compiled.kv_memory else {}),
        "token_grid": f"{tokens.size} token counts: every m the GEMM tables sample up to {int(tokens[-1])}, "
                      f"{PREFILL_QUERY_STEP} x 2^k, and refinement until linear lookup matches the non-attention "
                      f"time at every integer T within {GRID_TOLERANCE:.1%} (max {grid_error:.2%})",
        "capture_mode": "per-operator GPU kernel latencies summed as the estimator composes them",
        "statistic": "the database's per-operator latency (one value per shape, no spread)",
    }
    return lines | (moe_lines(compiled, tokens, grid_error) if split else {})


def moe_lines(compiled: CompiledTarget, tokens: np.ndarray, grid_error: float) -> dict[str, str]:
    """What an MoE model's prefill file adds: its layout over ranks, its attention module, its split."""
    target, engine = compiled.target, compiled.engine
    dp = target.dp
    ranks = f"; with {dp} data-parallel attention ranks each holds ceil(T/{dp}) tokens and C/{dp}" if dp > 1 else ""
    rank_grid = f"{dp} x the attention rank's grid: " if dp > 1 else ""
    return {
        "dtype": f"weights {engine['weight_dtype']}, MoE {moe_quant_mode(target) or 'the package default'} (the "
                 f"package's choice for this checkpoint and engine, as the decode built-ins), activations "
                 f"{engine['activation_dtype']}, KV cache {engine['kv_cache_dtype']}",
        "token_grid": f"{tokens.size} token counts: {rank_grid}every m the GEMM tables sample, "
                      f"{PREFILL_QUERY_STEP} x 2^k, and refinement until linear lookup matches the non-attention "
                      f"time within {GRID_TOLERANCE:.1%} (max {grid_error:.2%}) at every T{' a multiple of the ranks' if dp > 1 else ''}",
        "tokens_axis": f"T: new prompt tokens computed in the step (all requests of the batch){ranks}",
        "composition": "step_ms(T, C) = context-phase non-attention operators at T tokens (GEMMs, MoE with its "
                       "dispatch and combine over every rank's tokens, norms, mHC mixing, embedding) + LM head at "
                       "R tokens + the context-phase attention module of the layout (ContextAttention, or "
                       "DeepSeek-V4's Dsv4Context: the whole CSA / HCA module per layer)",
        "parts_axis": "attention_ms: the attention module alone (a column of the main table); the parts table: "
                      "each non-attention part's own time at T; the engine prices a rank's own part as the step "
                      "less the MoE block (dispatch, routed_experts, combine), which every rank meets",
        "public_rule": "not applied: the public kernel and GEMM measurements (hwprofiles/public/kernels.csv) are "
                       "of decode-size token counts; the prefill parts are the database's",
    }
