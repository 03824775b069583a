"""Measured GPU step-time curves from NVIDIA AIConfigurator's per-operator database.

Place in the data flow: `specplan profile --source aiconfigurator` and
`python -m specplan.hwprofiles.builtins` call this module to write profile CSVs
(`fileformat.py`); a scenario then names the file like any other profile.
Nothing else imports aiconfigurator-core (the optional `aic` extra).

AIConfigurator (the `aiconfigurator-core` package, Apache-2.0) ships kernel
timings measured on real H100/H200/B200/GB200 GPUs under vLLM, SGLang and
TensorRT-LLM (GEMM, context/generation attention, MLA modules, MoE,
all-reduce, ...), model configs, and a compiled estimator that walks a
model's operator list and looks every operator up in those tables. Its
decode step prices R requests of one new token each. A speculative verify
step is not that: it is R requests with 1 + ℓ_r query tokens each, over their
KV caches. This module composes the verify step from the same tables:

    T(B, C) = Σ non-attention ops at B tokens      GEMMs, MoE (+ dispatch), norms, activation,
                                                   embedding, LM head, TP all-reduce
            + attention of R requests, q query tokens each, C / R cached tokens each

Canonical layout. The profile stays a (B, C) table: tokens B in the forward,
C = total KV context of the batch (tokens already cached; the B being
verified are not counted). Each B is read as R = ceil(B / q) requests of q
query tokens (the last one padded to q), q = 4 by default (the anchor plus
three drafts, the torch harness's default too), with C spread evenly (C / R
cached tokens each). Why this is enough: the attention kernels are bound by
reading the KV cache, and the bytes read depend on C, not on how C is split;
the split changes per-request overheads only. In the database, moving the
same C from 128 requests × 1,024 tokens to 32 × 4,096 changes Llama-3.1-8B's
attention on an H200 by 9% (4.78 vs 4.35 ms), and the attention term is
the smaller part of a step below ~100k tokens of context. A scenario whose
requests verify 2 tokens (MTP-1) or 8 is priced with this same layout.

Attention, by the operator the database has for it:

- `GenerationAttention` (MHA/GQA; Llama, Qwen3 dense and MoE): the generation
  attention table at batch R, KV length C/R + q, with q × H query heads. The
  q query tokens of one request share its KV heads; FlashAttention's decode
  path packs the q·H/KV query rows of a KV head into one tile, as it packs
  GQA heads, so a multi-token query is a decode with q times the query heads.
  The table measures that axis (num_heads at fixed num_key_value_heads): on
  the H200 under vLLM 0.24 it is flat within 6% from 1 to 64 query heads per
  KV head at a fixed batch and context. Beyond the table's largest head
  count the estimator extrapolates (and floors at its speed-of-light model):
  Llama-3.1-8B at q = 4 asks for 128 query heads over 8 KV heads where the
  table stops at 96, which adds nothing at 1k cached tokens per request and
  up to 25% of the small no-context attention term.
- MLA modules (DeepSeek-V3): the database measures the whole MLA block
  (projections, the MLA kernel, output projection) per decode batch. Split:
  module(B rows, h heads, KV q) prices the projections at B tokens, plus the
  cache read of R requests, module(R, q·h, C/R + q) − module(R, q·h, q),
  floored at 0 (FlashMLA folds a request's q query tokens into its heads the
  same way).
- DeepSeek-V4 attention modules (`Dsv4Generation`: CSA, compress ratio 4,
  with its lightning indexer; HCA, compress ratio 128; the package prices
  pure sliding-window layers as HCA): the database measures the whole
  decode module per layer like MLA's, so the same split applies, with the
  q query tokens folded into the heads (FlashMLA's sparse decode folds them
  the same way). The module table's head axis is the TP degree's local
  heads (native / TP, up to the native count at TP1); where q·h exceeds
  the native count (TP1, data-parallel attention) the cache read is scaled
  linearly from the native count, module(R, q·h) read = q·h / native ×
  module(R, native) read (the kernel runs q·h / 64 head tiles, each reading
  the request's cache; the estimator's own extrapolation beyond the table
  falls with more heads). CSA's indexer scores the q query tokens of a
  request against its compressed keys in one paged-MQA-logits call whose
  cost the module's head axis does not carry (the indexer has its own 64
  heads at every TP), so CSA layers add mqa(R, q, C/R + q) − mqa(R, 1,
  C/R + q) from the database's `dsv4_paged_mqa_logits_module` table (batch
  R, q query tokens, C/R + q cached; linear interpolation on its grid,
  clamped at its edges). Approximated: CSA selects top-k keys per query
  token, so a verify's q tokens read up to q different top-k sets where the
  fold counts one (an under-estimate of at most (q − 1) top-k reads per
  request and layer).
- any other operator whose time depends on the KV length (DSA, linear
  attention, Mamba, ...) is refused with an error rather than priced wrong.

The estimator's own MTP path (`nextn`) prices a verify as R·(1+ℓ) independent
one-token decodes, each re-reading its request's cache, plus the MTP layers'
compute; at 128 requests of 4 tokens and 1k context that reads the Llama
cache four times (18.3 ms of attention instead of 4.9). It is not used here.

What is approximated (written into every file's header): the layout above;
the MLA split; host, scheduler and sampling time (the database times GPU
kernels; no engine overhead is added); operators at shapes the database did
not sample (the estimator interpolates between samples and extrapolates
beyond the largest: MLA modules beyond batch 1,024, attention beyond batch
2,048 or KV 131,072); MoE routing follows the estimator's workload
distribution (power law), not real traffic. Nothing is smoothed: the grid
of B holds every token count the GEMM tables sample (both sides of each
tile edge), each attention batch the table samples (q · 2^k), and more
points where needed so that linear lookup reproduces the estimator's
non-attention time at every integer B within 0.5%.

Drafter forwards (`AicDrafter`) reuse the target's operators: N of its
decoder layers (dense, or its MoE layers with `moe`), an optional
K·hidden → hidden fuse projection (MTP's eh_proj: K = 2; Eagle3: K = 3),
the final norm and LM head, priced over T tokens = R = ceil(T / q) requests
of q positions with the same context axis. For DeepSeek-V4 the drafter's
layers (the MTP module's, DSpark's) use sliding-window attention: one
module per layer, priced as the package prices SWA layers (HCA) with the
KV length capped at the window (128 tokens), with the target's mHC pre/post
per layer. DSpark's sequential Markov head is not in the forward: the
simulator prices it per draft position (`markov_head_fraction`).

Every file states how much of its step at a reference point (B = 128
tokens, 1,024 cached tokens per request) the database measured on silicon,
and how much came from its empirical or mixed rules, per operator.
"""

from __future__ import annotations

import copy
import difflib
import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.profile import StepProfile

INSTALL_HINT = "pip install 'specplan[aic]'"
CONTEXT_GRID_TOKENS = (0, 16384, 65536, 262144)
MODULE_KINDS = ("MlaModuleGeneration", "Dsv4Generation")
REFERENCE_TOKENS = 128           # the reference point of each file's provenance split
REFERENCE_CACHED = 1024          # cached tokens per request there
GRID_TOLERANCE = 0.005
DEVICE_NAMES = {
    "h100_sxm": "NVIDIA H100 SXM 80GB", "h200_sxm": "NVIDIA H200 SXM 141GB", "b200_sxm": "NVIDIA B200 180GB",
    "b300_sxm": "NVIDIA B300", "gb200": "NVIDIA GB200", "gb300": "NVIDIA GB300", "a100_sxm": "NVIDIA A100 SXM",
}
MEMORY_FRACTION_KIND = {"trtllm": "of_free"}   # vLLM and SGLang size the KV cache as a fraction of all memory


@dataclass(frozen=True)
class AicTarget:
    """A model served by one replica: an AIConfigurator model id on a system, backend and version.

    `model` is a Hugging Face id that aiconfigurator-core ships a config for,
    or a local directory holding a `config.json`. `tp` × `dp` GPUs serve it;
    `ep` is the MoE expert-parallel degree (the MoE tensor-parallel degree is
    tp·dp / ep). With `dp` > 1 the profile's B and C are the replica's, split
    evenly over the dp attention ranks.
    """

    model: str
    system: str
    backend: str = "vllm"
    backend_version: str = "0.24.0"
    tp: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for key in ("tp", "ep", "dp"):
            if getattr(self, key) < 1:
                raise ProfileError(f"--{key}: must be a positive integer")
        if (self.tp * self.dp) % self.ep:
            raise ProfileError(f"--ep: {self.ep} must divide tp x dp = {self.tp * self.dp}")

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


# --- the optional package -----------------------------------------------------------------------


def require_aic() -> Any:
    """The `aiconfigurator_core` package, or a one-line ProfileError saying how to install it."""
    try:
        # aiconfigurator-core is the optional 'aic' extra
        import aiconfigurator_core
    except ImportError:
        raise ProfileError(
            f"--source aiconfigurator needs aiconfigurator-core: {INSTALL_HINT}"
        ) from None
    return aiconfigurator_core


def package_version() -> str:
    try:
        return metadata.version("aiconfigurator-core")
    except metadata.PackageNotFoundError:
        return "unknown"


@contextmanager
def quiet() -> Iterator[None]:
    """Silence the package's warnings (data-loading notes) while it works."""
    logger = logging.getLogger("aiconfigurator_core")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


# --- compiling the target's operators -----------------------------------------------------------


@dataclass(frozen=True)
class CompiledTarget:
    """The target's decode operators as the estimator's JSON, its database and its KV capacity."""

    target: AicTarget
    ops: tuple[dict[str, Any], ...]
    engine: dict[str, Any]
    spec_schema: int
    num_layers: int
    kv_capacity_tokens: int
    model_summary: str


def check_model(model: str) -> None:
    """Refuse a model id the package has no config for (it would try to download one)."""
    if Path(model).is_dir():
        if not (Path(model) / "config.json").is_file():
            raise ProfileError(f"--model: {model} has no config.json")
        return
    require_aic()
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.common import DefaultHFModels

    if model not in DefaultHFModels:
        close = difflib.get_close_matches(model, sorted(DefaultHFModels), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ProfileError(
            f"--model: aiconfigurator-core {package_version()} ships no config for {model!r}{hint}; "
            "give one of its model ids or a directory holding config.json"
        )


@lru_cache(maxsize=16)
def database(system: str, backend: str, version: str) -> Any:
    """The package's performance database for a system, backend and version (cached per process)."""
    require_aic()
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk import perf_database

    with quiet():
        known = perf_database.get_supported_databases()
        if system not in known:
            raise ProfileError(f"--system: no AIConfigurator data for {system!r} (systems: {', '.join(sorted(known))})")
        if backend not in known[system]:
            raise ProfileError(f"--backend: no {backend} data on {system} (has: {', '.join(sorted(known[system]))})")
        try:
            db = perf_database.get_database(system, backend, version)
        except ValueError:
            slots = perf_database.get_version_slots(system, backend) or {}
            listed = ", ".join(f"{k} {v}" for k, v in slots.items() if v)
            raise ProfileError(f"--backend-version: {backend} {version} is not a version aiconfigurator-core "
                                f"serves on {system} (slots: {listed or 'none'})") from None
    if db is None:
        raise ProfileError(f"aiconfigurator-core has no {backend} {version} database for {system}")
    return db


def compile_target(target: AicTarget, max_tokens: int, query_tokens: int, memory_fraction: float) -> CompiledTarget:
    """Build the target's operator list and KV capacity; every failure is a one-line ProfileError."""
    check_model(target.model)
    db = database(target.system, target.backend, target.backend_version)
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.engine import build_engine_spec_json
    from aiconfigurator_core.sdk.models import get_model

    config = build_model_config(
        tp_size=target.tp, pp_size=1, attention_dp_size=target.dp,
        moe_tp_size=target.gpus // target.ep, moe_ep_size=target.ep,
    )
    with quiet():
        try:
            model = get_model(target.model, config, target.backend)
            spec = json.loads(build_engine_spec_json(
                model, model_path=target.model, system=target.system, backend=target.backend,
                backend_version=target.backend_version, kv_block_size=None, systems_path=None, nextn=0,
                database=db,
            ))
        except Exception as exc:  # the package raises many kinds; the user needs one line
            raise ProfileError(f"aiconfigurator-core cannot build {target.model} for {where(target)}: "
                                f"{first_line(exc)}") from None
    capacity = kv_capacity_tokens(target, max_tokens, query_tokens, memory_fraction)
    return CompiledTarget(
        target=target, ops=tuple(spec["generation_ops"]), engine=spec["engine"],
        spec_schema=int(spec["schema_version"]), num_layers=int(model._num_layers),
        kv_capacity_tokens=capacity, model_summary=summarize_model(model, spec["generation_ops"]),
    )


def kv_capacity_tokens(target: AicTarget, max_tokens: int, query_tokens: int, memory_fraction: float) -> int:
    """KV-cache tokens one replica holds, by the package's memory model (weights, activations, overheads)."""
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.memory import estimate_kv_cache

    with quiet():
        try:
            estimate = estimate_kv_cache(
                target.model, target.system, target.backend, target.backend_version,
                max_num_tokens=max_tokens, max_batch_size=math.ceil(max_tokens / query_tokens),
                memory_fraction_kind=MEMORY_FRACTION_KIND.get(target.backend, "of_total"),
                memory_fraction_value=memory_fraction, tp_size=target.tp, attention_dp_size=target.dp,
                moe_tp_size=target.gpus // target.ep, moe_ep_size=target.ep,
            )
        except Exception as exc:  # as above: one line for the user
            raise ProfileError(f"aiconfigurator-core cannot size the KV cache of {target.model} on "
                                f"{where(target)}: {first_line(exc)}") from None
    tokens = int(estimate["total_kv_size_tokens"]) * target.dp
    if tokens <= 0:
        raise ProfileError(f"{target.model} does not fit on {where(target)}: no memory left for a KV cache")
    return tokens


def summarize_model(model: Any, ops: list[dict[str, Any]]) -> str:
    cfg = model.config
    parts = [f"{model._num_layers} layers"]
    attention = ""
    for op in walk(ops):
        kind, body = kind_of(op), op[kind_of(op)]
        if kind == "Embedding":
            parts.append(f"hidden {body['hidden_size']}, vocab {body['vocab_size']}")
        elif kind == "GenerationAttention" and not attention:
            attention = f"{body['n']} query / {body['n_kv']} KV heads per GPU, head_dim {body['head_size']}"
            parts.append(attention)
        elif kind == "MlaModuleGeneration" and not attention:
            attention = f"MLA, {body['num_heads']} heads per GPU"
            parts.append(attention)
        elif kind == "Dsv4Generation" and not attention:
            attention = dsv4_summary(ops)
            parts.append(attention)
        elif kind == "Moe":
            parts.append(f"MoE {body['num_experts']} experts top-{body['topk']}, expert ffn {body['inter_size']}")
    parts.append(f"aiconfigurator-core model class {type(model).__name__}, nextn {getattr(cfg, 'nextn', 0)}")
    return ", ".join(dict.fromkeys(parts))


def dsv4_summary(ops: list[dict[str, Any]]) -> str:
    bodies = [inner["Dsv4Generation"] for inner in walk(ops) if kind_of(inner) == "Dsv4Generation"]
    layers = " + ".join(f"{b['attn_kind'].upper()} x {b['scale_factor']:g}" for b in bodies)
    first = bodies[0]
    return (f"DeepSeek-V4 attention ({layers} layers; sliding window {first['window_size']}, top-k "
            f"{first['index_topk']}, indexer {first['index_n_heads']} heads), {first['num_heads']} heads per GPU, mHC")


def where(target: AicTarget) -> str:
    return f"{target.system} {target.backend} {target.backend_version} {target.parallelism()}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else exc.__class__.__name__)[:300]


# --- operator lists -----------------------------------------------------------------------------


def kind_of(op: dict[str, Any]) -> str:
    return next(iter(op))


def walk(ops: Any) -> Iterator[dict[str, Any]]:
    """Every operator, nested ones (Overlap groups, Fallback branches) included."""
    if isinstance(ops, list):
        for item in ops:
            yield from walk(item)
    elif isinstance(ops, dict):
        if len(ops) == 1 and isinstance(next(iter(ops.values())), dict) and kind_of(ops)[0].isupper():
            yield ops
        for value in ops.values():
            if isinstance(value, (list, dict)):
                yield from walk(value)


def is_module(op: dict[str, Any]) -> bool:
    """An MLA or DeepSeek-V4 attention module (or a Fallback whose primary is one): one table each."""
    kind = kind_of(op)
    if kind == "Fallback":
        return kind_of(op[kind]["primary"]) in MODULE_KINDS
    return kind in MODULE_KINDS


def with_query_heads(op: dict[str, Any], q: int) -> dict[str, Any]:
    """The same attention operator with q times the query heads (q query tokens per request).

    A DeepSeek-V4 module stops at its native head count (the table's largest);
    `head_overflow` gives the linear factor for the rest.
    """
    out = copy.deepcopy(op)
    for inner in walk(out):
        body = inner[kind_of(inner)]
        if kind_of(inner) == "GenerationAttention":
            body["n"] = body["n"] * q
        elif kind_of(inner) == "MlaModuleGeneration":
            body["num_heads"] = body["num_heads"] * q
        elif kind_of(inner) == "Dsv4Generation":
            body["num_heads"] = min(body["num_heads"] * q, body["native_heads"])
    return out


def head_overflow(op: dict[str, Any], q: int) -> float:
    """q·h / native for a DeepSeek-V4 module asked for more heads than its native count, else 1."""
    for inner in walk(op):
        body = inner[kind_of(inner)]
        if kind_of(inner) == "Dsv4Generation" and body["num_heads"] * q > body["native_heads"]:
            return body["num_heads"] * q / body["native_heads"]
    return 1.0


def dsv4_body(op: dict[str, Any]) -> dict[str, Any] | None:
    """The DeepSeek-V4 module inside `op` (itself or a Fallback's primary), or None."""
    return next((inner["Dsv4Generation"] for inner in walk(op) if kind_of(inner) == "Dsv4Generation"), None)


def is_csa(op: dict[str, Any]) -> bool:
    body = dsv4_body(op)
    return body is not None and body["attn_kind"] == "Csa"


def csa_layers(op: dict[str, Any]) -> float:
    """How many CSA layers this module stands for (its scale factor), else 0."""
    body = dsv4_body(op)
    return float(body["scale_factor"]) if body is not None and body["attn_kind"] == "Csa" else 0.0


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


# --- pricing a verify step -------------------------------------------------------------------


class VerifyPricer:
    """Prices T(B, C) for one operator list under the canonical layout (module docstring).

    It compiles one engine whose decode list is: the plain operators, each
    GenerationAttention with q·H query heads, each MLA module as is and with
    q·h heads; then evaluates slices of it at the shapes the layout gives.
    """

    def __init__(self, compiled: CompiledTarget, ops: list[dict[str, Any]], q: int, window: int = 0) -> None:
        self.q = q
        self.dp = compiled.target.dp
        self.window = window
        self.where = f"{compiled.target.model} on {where(compiled.target)}"
        plain = [op for op in ops if kind_of(op) != "GenerationAttention" and not is_module(op)]
        direct = [with_query_heads(op, q) for op in ops if kind_of(op) == "GenerationAttention"]
        modules = [op for op in ops if is_module(op)]
        folded = [op for op in modules if head_overflow(op, q) == 1.0]
        overflow = [op for op in modules if head_overflow(op, q) > 1.0]
        groups = (plain, direct, modules, [with_query_heads(op, q) for op in folded + overflow])
        starts = np.cumsum([0, *(len(g) for g in groups)])
        self.plain, self.direct, self.modules, wide = (
            list(range(starts[i], starts[i + 1])) for i in range(4))
        scales = [head_overflow(op, q) for op in overflow]
        self.wide, self.overflow = wide[:len(folded)], list(zip(wide[len(folded):], scales, strict=True))
        self.csa_layers = sum(csa_layers(op) for op in modules)
        self.indexer = mqa_table(compiled, ops) if self.csa_layers and q > 1 else None
        try:
            self.handle = engine_handle(compiled, [op for group in groups for op in group])
        except Exception as exc:  # the package raises many kinds; the user needs one line
            raise ProfileError(f"aiconfigurator-core cannot compile {self.where}: {first_line(exc)}") from None
        self.check_plain_ops_ignore_context()

    def evaluate(self, indices: list[int], batch: int, kv: int, tokens: int | None = None) -> list[tuple]:
        if not indices:
            return []
        try:
            return list(self.handle.evaluate_generation_ops(indices, batch_size=batch, s=kv, x=tokens))
        except Exception as exc:  # as above
            raise ProfileError(f"aiconfigurator-core cannot price {self.where}: {first_line(exc)}") from None

    def ms(self, indices: list[int], batch: int, kv: int, tokens: int | None = None) -> float:
        return float(sum(entry[1] for entry in self.evaluate(indices, batch, kv, tokens)))

    def check_plain_ops_ignore_context(self) -> None:
        """Refuse operators that read the KV cache but have no verify-shaped rule here."""
        short = self.evaluate(self.plain, 8, 2, 64)
        long = self.evaluate(self.plain, 8, 65536, 64)
        for (name, a, *_), (_, b, *_) in zip(short, long, strict=True):
            if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
                raise ProfileError(
                    f"operator {name} depends on the KV length and has no verify-shaped rule here "
                    "(supported: GenerationAttention, MLA modules)"
                )

    def rank_shape(self, tokens: int, context: float) -> tuple[int, int, int]:
        """(tokens, requests, cached tokens per request read) on one attention rank."""
        b = math.ceil(tokens / self.dp)
        requests = math.ceil(b / self.q)
        cached = round(context / self.dp / requests)
        return b, requests, min(cached, self.window) if self.window else cached

    def plain_ms(self, tokens: int) -> float:
        b = math.ceil(tokens / self.dp)
        return self.ms(self.plain, math.ceil(b / self.q), self.q, b)

    def attention_ms(self, tokens: int, context: float) -> float:
        b, requests, cached = self.rank_shape(tokens, context)
        direct = self.ms(self.direct, requests, cached + self.q)
        if not self.modules:
            return direct
        base = self.ms(self.modules, b, self.q)
        return direct + base + max(self.read_ms(requests, cached), 0.0) + self.indexer_ms(requests, cached)

    def read_ms(self, requests: int, cached: int) -> float:
        """The modules' cache read for R requests of q folded query tokens (scaled past the native heads)."""
        read = self.ms(self.wide, requests, cached + self.q) - self.ms(self.wide, requests, self.q)
        for index, scale in self.overflow:
            read += scale * (self.ms([index], requests, cached + self.q) - self.ms([index], requests, self.q))
        return read

    def indexer_ms(self, requests: int, cached: int) -> float:
        """CSA's indexer scoring q query tokens instead of the module's one, over the CSA layers."""
        if self.indexer is None:
            return 0.0
        extra = self.indexer.ms(requests, self.q, cached + self.q) - self.indexer.ms(requests, 1, cached + self.q)
        return self.csa_layers * max(extra, 0.0)

    def op_sources(self, tokens: int, context: float) -> str:
        """`name source` per operator at one point: silicon (measured), empirical, mixed, ..."""
        b, requests, cached = self.rank_shape(tokens, context)
        entries = self.evaluate(self.plain, requests, self.q, b) + self.evaluate(
            self.direct + self.modules, requests, cached + self.q)
        seen = {name.removeprefix("generation_"): source for name, _, _, source, *_ in entries}
        return ", ".join(f"{name} {source}" for name, source in seen.items())

    def op_split(self, tokens: int, context: float) -> list[tuple[str, float, str]]:
        """(operator, ms, source) at one point; the sum is step_ms(tokens, context)."""
        b, requests, cached = self.rank_shape(tokens, context)
        split: dict[str, list] = {}
        for name, ms, _, source, *_ in self.evaluate(self.plain, requests, self.q, b):
            split.setdefault(name.removeprefix("generation_"), [0.0, source])[0] += ms
        attention = self.attention_ms(tokens, context) - self.indexer_ms(requests, cached)
        sources = {entry[3] for entry in self.evaluate(self.direct + self.modules, requests, cached + self.q)}
        if self.direct or self.modules:
            split["attention"] = [attention, "/".join(sorted(sources))]
        if self.indexer is not None:
            split["indexer_mqa_logits"] = [self.indexer_ms(requests, cached), "silicon"]
        return [(name, float(ms), source) for name, (ms, source) in split.items()]


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
    db = database(target.system, target.backend, target.backend_version)
    heads = next(int(body["index_n_heads"]) for op in ops if is_csa(op) and (body := dsv4_body(op)) is not None)
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.engine_table_view import fetch_table_view

    with quiet():
        view = fetch_table_view(db, "_dsv4_sparse_kernel_data.paged_mqa_logits") or {}
    by_tp = view.get(heads) or {}
    if not by_tp:
        raise ProfileError(f"{target.model} on {where(target)}: the database has no paged-MQA-logits table for "
                            f"{heads} indexer heads, so CSA layers cannot be priced for multi-token queries")
    return MqaTable(by_tp[min(by_tp)])


def engine_handle(compiled: CompiledTarget, ops: list[dict[str, Any]]) -> Any:
    """A compiled estimator whose decode operator list is `ops` (no context phase)."""
    aic = require_aic()
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.engine import EngineHandle

    spec = {"schema_version": compiled.spec_schema, "engine": compiled.engine,
            "context_ops": [], "generation_ops": ops}
    with quiet():
        return EngineHandle(bytes(aic.engine_spec_bincode_from_json(json.dumps(spec))))


# --- grids ---------------------------------------------------------------------------------------


def context_rows(capacity: int, requested: tuple[int, ...]) -> tuple[int, ...]:
    """The C rows: as requested, or 0, 16k, 64k, 256k below the KV capacity, then the capacity."""
    if requested:
        return requested
    top = capacity // 1024 * 1024
    return (*(c for c in CONTEXT_GRID_TOKENS if c < top), top)


def gemm_sample_tokens(compiled: CompiledTarget, ops: list[dict[str, Any]]) -> set[int]:
    """Token counts (m) the GEMM tables sample for the GEMM precisions these operators use."""
    target = compiled.target
    samples = gemm_samples(target.system, target.backend, target.backend_version)
    modes = {op["Gemm"]["quant_mode"] for op in walk(ops) if kind_of(op) == "Gemm"}
    return {m for mode in modes for m in samples.get(mode, ())}


@lru_cache(maxsize=16)
def gemm_samples(system: str, backend: str, version: str) -> dict[str, frozenset[int]]:
    """GEMM precision → the token counts m its table samples (the engine's own view of the table)."""
    db = database(system, backend, version)
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.engine_table_view import fetch_table_view

    with quiet():
        view = fetch_table_view(db, "_gemm_data") or {}
    return {getattr(mode, "name", str(mode)): frozenset(int(m) for m in by_m) for mode, by_m in view.items()}


def replica_grid(samples: set[int], q: int, plain: np.ndarray, dp: int) -> np.ndarray:
    """The B grid of a replica: `token_grid` on one attention rank's tokens, times dp.

    With dp ranks the step at B is the rank's at ceil(B / dp) tokens, a
    staircase in B; the grid holds B = dp x (the rank's grid), every rank
    holding the same share (and B = 1), so lookups between two multiples of
    dp interpolate the rank's curve rather than reproduce the staircase.
    """
    if dp == 1:
        return token_grid(samples, q, plain)
    ranks = token_grid(samples, q, plain[dp - 1::dp])
    return np.unique(np.r_[1, ranks * dp]).astype(np.int64)


def grid_points(tokens: np.ndarray, dp: int) -> np.ndarray:
    """The B at which the grid must reproduce the step: every B (dp = 1), or every multiple of dp."""
    return np.arange(dp, int(tokens[-1]) + 1, dp)


def token_grid(samples: set[int], q: int, curve_ms: np.ndarray) -> np.ndarray:
    """Sampled token counts ∪ q·2^k ∪ refinement until linear lookup matches `curve_ms` within tolerance.

    `curve_ms[i]` is the step at B = i + 1 for every B up to the last.
    """
    last = curve_ms.size
    powers = {q * 2**k for k in range(32) if q * 2**k <= last}
    grid = sorted({b for b in (samples | powers) if 1 <= b <= last} | {1, last})
    b = np.arange(1, last + 1)
    while True:
        error = np.abs(np.interp(b, grid, curve_ms[np.array(grid) - 1]) - curve_ms) / curve_ms
        worst = int(np.argmax(error))
        if error[worst] <= GRID_TOLERANCE:
            return np.array(grid, dtype=np.int64)
        grid = sorted({*grid, worst + 1})


# --- profiles ------------------------------------------------------------------------------------


def aic_command(target: AicTarget, layout: AicLayout, drafter: AicDrafter | None = None) -> str:
    """The `specplan profile` command that writes this profile (recorded in its `source`)."""
    parts = ["specplan profile --source aiconfigurator", f"--model {target.model}", f"--system {target.system}",
             f"--backend {target.backend}", f"--backend-version {target.backend_version}"]
    parts += [f"--{key} {getattr(target, key)}" for key in ("tp", "ep", "dp") if getattr(target, key) != 1]
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


def literal_version(system: str, backend: str, version: str | None) -> str:
    """The database version a request names (`None` or an alias such as `current`: the slot's version)."""
    return str(database(system, backend, version or "current").version)


def aic_profile(target: AicTarget, layout: AicLayout, name: str, command: str = "",
                drafter: AicDrafter | None = None) -> StepProfile:
    """The verify-step (or, with `drafter`, the drafter-forward) profile of `target`."""
    require_aic()
    with quiet():
        return build_profile(target, layout, name, command, drafter)


def build_profile(target: AicTarget, layout: AicLayout, name: str, command: str,
                  drafter: AicDrafter | None) -> StepProfile:
    compiled = compile_target(target, layout.max_tokens, layout.query_tokens, layout.memory_fraction)
    ops = list(compiled.ops) if drafter is None else drafter_ops(compiled, drafter)
    pricer = VerifyPricer(compiled, ops, layout.query_tokens, 0 if drafter is None else attention_window(ops))
    plain = np.array([pricer.plain_ms(b) for b in range(1, layout.max_tokens + 1)])
    tokens = replica_grid(gemm_sample_tokens(compiled, ops), layout.query_tokens, plain, target.dp)
    contexts = context_rows(compiled.kv_capacity_tokens, layout.context_tokens)
    attention = np.array([[pricer.attention_ms(int(b), c) for b in tokens] for c in contexts])
    return StepProfile(
        name=name, tokens=tokens, step_ms_table=plain[tokens - 1] + attention,
        context_tokens=np.array(contexts, dtype=np.int64),
        provenance=provenance(compiled, layout, pricer, tokens, plain, command, drafter),
        extra={"columns": {"attention_ms": attention}},
    )


def provenance(compiled: CompiledTarget, layout: AicLayout, pricer: VerifyPricer, tokens: np.ndarray,
               plain: np.ndarray, command: str, drafter: AicDrafter | None) -> dict[str, str]:
    target, engine, q = compiled.target, compiled.engine, layout.query_tokens
    version = package_version()
    hidden = next(op["Embedding"]["hidden_size"] for op in walk(list(compiled.ops)) if kind_of(op) == "Embedding")
    forward = "verify step of the target" if drafter is None else f"drafter forward: {drafter.describe(hidden)}"
    b = grid_points(tokens, target.dp)
    grid_error = np.max(np.abs(np.interp(b, tokens, plain[tokens - 1]) - plain[b - 1]) / plain[b - 1])
    meta = {
        "device": f"{DEVICE_NAMES.get(target.system, target.system)} x {target.gpus} ({target.parallelism()}); "
                  f"AIConfigurator system {target.system}",
        "model": f"{target.model} ({compiled.model_summary})",
        "what": forward,
        "dtype": f"weights {engine['weight_dtype']}, MoE {engine['moe_dtype']}, activations "
                 f"{engine['activation_dtype']}, KV cache {engine['kv_cache_dtype']} (the package's default "
                 "quantisation for this model)",
        "source": f"NVIDIA AIConfigurator per-operator database and estimator, aiconfigurator-core {version}; "
                  f"composed by hwprofiles/aiconfigurator.py{f' ({command})' if command else ''}",
        "package": f"aiconfigurator-core {version} (Apache-2.0, NVIDIA)",
        "database": f"systems/data/{target.system}, {target.backend} {target.backend_version} tables "
                    f"(estimator spec schema {compiled.spec_schema}, query mode {engine['database_mode']})",
        "backend": f"{target.backend} {target.backend_version}",
        "parallelism": target.parallelism(),
        "license": "Apache-2.0 (NVIDIA AIConfigurator); a table derived from it, not its raw timings",
        "layout": f"B tokens = R = ceil(B/{q}) requests x {q} query tokens (last padded); total KV context C "
                  f"spread evenly, C/R cached tokens per request"
                  + (f"; B and C split evenly over {target.dp} attention ranks" if target.dp > 1 else ""),
        "composition": "step_ms(B, C) = sum of non-attention operators at B tokens (GEMMs, MoE and dispatch, "
                       "norms, activation, embedding, LM head, all-reduce) + attention_ms; attention_ms: "
                       "GenerationAttention at batch R, KV C/R+q, q x query heads (multi-token queries packed "
                       "as heads); MLA modules: module(B rows, KV q) + max(0, module(R, q x heads, KV C/R+q) "
                       "- module(R, q x heads, KV q))",
        "approximations": "canonical layout (requests of q tokens, context spread evenly); MLA split into "
                          "projections at B and cache read at R; no host, scheduler or sampling time (kernel "
                          "timings only); shapes the database did not sample are interpolated, beyond its "
                          "largest sample extrapolated by the estimator; MoE routing by the estimator's "
                          "workload distribution",
        "op_sources": pricer.op_sources(min(int(tokens[-1]), 128), 0),
        "kv_capacity_tokens": f"{compiled.kv_capacity_tokens} (the package's memory model at "
                              f"{layout.memory_fraction} of GPU memory)",
        "token_grid": f"{tokens.size} token counts: every m the GEMM tables sample up to {int(tokens[-1])} "
                      f"(both sides of each tile edge), q x 2^k, and refinement until linear lookup matches "
                      f"the estimator's non-attention time at every integer B within {GRID_TOLERANCE:.1%} "
                      f"(max {grid_error:.2%})" if target.dp == 1 else
                      f"{tokens.size} token counts: B = 1 and {target.dp} x the attention rank's grid (every m "
                      f"the GEMM tables sample, both sides of each tile edge, q x 2^k, refined until linear "
                      f"lookup matches the rank's non-attention time at every integer rank share within "
                      f"{GRID_TOLERANCE:.1%}; max {grid_error:.2%} at the multiples of {target.dp}); between "
                      f"them the rank's curve is interpolated, not the ceil(B/{target.dp}) staircase",
        "context_axis": "total KV context tokens of the batch (cached; the B being verified not counted); "
                        "the last row is the replica's KV capacity",
        "capture_mode": "per-operator GPU kernel latencies summed as the estimator composes them",
        "statistic": "the database's per-operator latency (one value per shape, no spread); attention_ms "
                     "is the attention part of step_ms",
    }
    if any(dsv4_body(op) is not None for op in pricer_ops(compiled, drafter)):
        meta["composition"] += DSV4_COMPOSITION
        meta["approximations"] += DSV4_APPROXIMATIONS
    return {**meta, **source_split(pricer, min(int(tokens[-1]), REFERENCE_TOKENS))}


DSV4_COMPOSITION = (
    "; DeepSeek-V4 modules (CSA, HCA): as MLA modules, heads capped at the native count and the cache read "
    "scaled linearly beyond it, + CSA layers x max(0, mqa(R, q, C/R+q) - mqa(R, 1, C/R+q)) from the "
    "paged-MQA-logits table (the indexer's extra query tokens); a V4 drafter's layers: one sliding-window "
    "module per layer, priced as HCA with KV capped at the window"
)
DSV4_APPROXIMATIONS = (
    "; CSA's per-token top-k reads folded into one read per request (under-estimates by up to q-1 top-k reads "
    "per request and layer); beyond the native head count the read is scaled linearly; DSpark's Markov head "
    "not in a drafter forward (the simulator prices it per position)"
)


def pricer_ops(compiled: CompiledTarget, drafter: AicDrafter | None) -> list[dict[str, Any]]:
    return list(compiled.ops) if drafter is None else drafter_ops(compiled, drafter)


def source_split(pricer: VerifyPricer, tokens: int) -> dict[str, str]:
    """`provenance` (silicon / empirical / mixed shares of the step) and one `op.NAME` line per operator."""
    requests = math.ceil(math.ceil(tokens / pricer.dp) / pricer.q)
    context = requests * REFERENCE_CACHED * pricer.dp
    split = pricer.op_split(tokens, context)
    total = sum(ms for _, ms, _ in split)
    shares: dict[str, float] = {}
    for _, ms, source in split:
        for part in source.split("/"):
            shares[part] = shares.get(part, 0.0) + ms / len(source.split("/"))
    where_at = f"at B = {tokens}, C = {context} ({REFERENCE_CACHED} cached tokens per request), {total:.3f} ms"
    others = [f"{name} {source} {100 * ms / total:.0f}%" for name, ms, source in split
              if source != "silicon" and ms >= 0.005 * total]
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    meta = {"provenance": ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in ranked) + f" of the step {where_at}"
            + (f" (not silicon: {', '.join(others)})" if others else "")}
    for name, ms, source in split:
        meta[f"op.{name}"] = f"{ms:.4f} ms, {100 * ms / total:.1f}%, {source}"
    return meta


# --- the context phase: prefill steps ------------------------------------------------------------
#
# A prefill step computes T new prompt tokens of R requests, request i adding n_i tokens over p_i
# tokens already in its KV cache (a cached prefix, or the chunks of its prompt computed in earlier
# steps). Its non-attention operators run at T tokens, its LM head at R tokens (one sampled token per
# request) and its attention over n_i·(p_i + n_i/2) query-key pairs per request (causal). A prefill
# profile is a StepProfile over (T, C) with C = Σ n_i·(n_i + 2·p_i), twice the pairs: one number per
# batch that a simulator computes in one numpy reduction. Each (T, C) point is priced under a
# canonical layout read back from the two numbers: R = round(T / s) requests of s = C / T new tokens
# each and no prefix while s ≤ T (uniform prompts: the shapes the database's context-attention table
# measures, reproduced exactly), else one request of T new tokens over a prefix p = (C / T − T) / 2
# (capped at PREFILL_MAX_PREFIX: rows beyond any real context only bound the interpolation).

PREFILL_CONTEXT_ROWS = (0, *(4**k for k in range(8, 17)), 2 * 4**16)
PREFILL_MAX_TOKENS = 16384
PREFILL_QUERY_STEP = 16
PREFILL_MAX_PREFIX = 1 << 20   # the layout's prefix is capped here (far beyond any model's context)


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
        kinds = [kind_of(op) for op in context_ops]
        unsupported = sorted({k for k in kinds if "Attention" in k and k != "ContextAttention"} | {
            k for k in kinds if "Mla" in k or "Dsa" in k or "DeepSeek" in k})
        if unsupported:
            raise ProfileError(f"{self.where}: context operator(s) {', '.join(unsupported)} have no prefill "
                                "rule here (supported: ContextAttention, the MHA/GQA models)")
        self.attention = [i for i, k in enumerate(kinds) if k == "ContextAttention"]
        self.logits = [i for i, op in enumerate(context_ops) if "logits" in str(op[kind_of(op)].get("name", ""))]
        self.plain = [i for i in range(len(context_ops)) if i not in self.attention and i not in self.logits]
        spec = {"schema_version": compiled.spec_schema, "engine": compiled.engine,
                "context_ops": context_ops, "generation_ops": []}
        aic = require_aic()
        # aiconfigurator-core is the optional 'aic' extra
        from aiconfigurator_core.sdk.engine import EngineHandle

        try:
            self.handle = EngineHandle(bytes(aic.engine_spec_bincode_from_json(json.dumps(spec))))
        except Exception as exc:  # the package raises many kinds; the user needs one line
            raise ProfileError(f"aiconfigurator-core cannot compile {self.where}: {first_line(exc)}") from None

    def ms(self, indices: list[int], batch: int, new_tokens: int, prefix: int = 0) -> float:
        if not indices:
            return 0.0
        try:
            out = self.handle.evaluate_context_ops(indices, batch_size=batch, s=new_tokens, prefix=prefix)
        except Exception as exc:  # as above
            raise ProfileError(f"aiconfigurator-core cannot price {self.where}: {first_line(exc)}") from None
        return float(sum(entry[1] for entry in out))

    def plain_ms(self, tokens: int) -> float:
        """Non-attention operators at T tokens (GEMMs, norms, activation, embedding, all-reduce)."""
        return self.ms(self.plain, 1, tokens)

    def layout_ms(self, tokens: int, pairs: float) -> float:
        """LM head at R tokens + attention of the canonical layout at (T, C)."""
        requests, new, prefix = prefill_layout(tokens, pairs)
        return self.ms(self.logits, requests, 1) + self.ms(self.attention, requests, new, prefix)


def prefill_profile(target: AicTarget, name: str, max_tokens: int = PREFILL_MAX_TOKENS,
                    memory_fraction: float = 0.9, command: str = "") -> StepProfile:
    """The prefill-step profile of `target`: step_ms(T, C) over batched prompt tokens and their pairs."""
    require_aic()
    with quiet():
        compiled = compile_target(target, max_tokens, 1, memory_fraction)
        pricer = PrefillPricer(compiled, context_op_list(compiled))
        plain = np.array([pricer.plain_ms(t) for t in range(1, max_tokens + 1)])
        tokens = token_grid(gemm_sample_tokens(compiled, list(compiled.ops)), PREFILL_QUERY_STEP, plain)
        rows = PREFILL_CONTEXT_ROWS
        layout = np.array([[pricer.layout_ms(int(t), c) for t in tokens] for c in rows])
    return StepProfile(
        name=name, tokens=tokens, step_ms_table=plain[tokens - 1] + layout,
        context_tokens=np.array(rows, dtype=np.int64),
        provenance=prefill_provenance(compiled, tokens, plain, command),
    )


def context_op_list(compiled: CompiledTarget) -> list[dict[str, Any]]:
    """The target's context-phase operator list, as the estimator builds it."""
    target = compiled.target
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.engine import build_engine_spec_json
    from aiconfigurator_core.sdk.models import get_model

    config = build_model_config(tp_size=target.tp, pp_size=1, attention_dp_size=target.dp,
                                moe_tp_size=target.gpus // target.ep, moe_ep_size=target.ep)
    try:
        model = get_model(target.model, config, target.backend)
        spec = json.loads(build_engine_spec_json(
            model, model_path=target.model, system=target.system, backend=target.backend,
            backend_version=target.backend_version, kv_block_size=None, systems_path=None, nextn=0,
            database=database(target.system, target.backend, target.backend_version)))
    except Exception as exc:  # the package raises many kinds; the user needs one line
        raise ProfileError(f"aiconfigurator-core cannot build {target.model} for {where(target)}: "
                            f"{first_line(exc)}") from None
    return list(spec["context_ops"])


def prefill_command(target: AicTarget, max_tokens: int = PREFILL_MAX_TOKENS) -> str:
    """How the prefill built-in is made (recorded in its `source`)."""
    return (f"specplan.hwprofiles.aiconfigurator.prefill_profile(AicTarget({target.model!r}, {target.system!r}, "
            f"{target.backend!r}, {target.backend_version!r}, tp={target.tp}), max_tokens={max_tokens})")


def prefill_provenance(compiled: CompiledTarget, tokens: np.ndarray, plain: np.ndarray,
                       command: str) -> dict[str, str]:
    target, engine = compiled.target, compiled.engine
    version = package_version()
    grid_error = np.max(np.abs(np.interp(np.arange(1, plain.size + 1), tokens, plain[tokens - 1]) - plain) / plain)
    return {
        "phase": "prefill",
        "device": f"{DEVICE_NAMES.get(target.system, target.system)} x {target.gpus} ({target.parallelism()}); "
                  f"AIConfigurator system {target.system}",
        "model": f"{target.model} ({compiled.model_summary})",
        "what": "prefill (context-phase) step of the target: T new prompt tokens of a batch of requests",
        "dtype": f"weights {engine['weight_dtype']}, activations {engine['activation_dtype']}, KV cache "
                 f"{engine['kv_cache_dtype']} (the package's default quantisation for this model)",
        "source": f"NVIDIA AIConfigurator per-operator database (context-phase tables) and estimator, "
                  f"aiconfigurator-core {version}; composed by hwprofiles/aiconfigurator.py"
                  f"{f' ({command})' if command else ''}",
        "package": f"aiconfigurator-core {version} (Apache-2.0, NVIDIA)",
        "database": f"systems/data/{target.system}, {target.backend} {target.backend_version} tables "
                    f"(context_attention, gemm, ...; estimator spec schema {compiled.spec_schema})",
        "backend": f"{target.backend} {target.backend_version}",
        "parallelism": target.parallelism(),
        "license": "Apache-2.0 (NVIDIA AIConfigurator); a table derived from it, not its raw timings",
        "tokens_axis": "T: new prompt tokens computed in the step (all requests of the batch)",
        "context_axis": "C = sum over the batch's requests of n*(n + 2p): n new tokens over p tokens already "
                        "cached (twice the causal attention pairs); C >= T",
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
        "token_grid": f"{tokens.size} token counts: every m the GEMM tables sample up to {int(tokens[-1])}, "
                      f"{PREFILL_QUERY_STEP} x 2^k, and refinement until linear lookup matches the non-attention "
                      f"time at every integer T within {GRID_TOLERANCE:.1%} (max {grid_error:.2%})",
        "capture_mode": "per-operator GPU kernel latencies summed as the estimator composes them",
        "statistic": "the database's per-operator latency (one value per shape, no spread)",
    }
