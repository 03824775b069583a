"""The torch profiling harness behind `specplan profile`: time verify-shaped forwards.

For each token count B of the grid, B tokens are spread over R requests
(`--requests R`, or R = ceil(B / tokens_per_request)), each request holding
a KV cache of the given context, and one flattened forward of
`specplan.hwprofiles.torch_model.DecoderModel` is timed: warm-up runs, then
`repeats` timed runs whose median (p10, p90, min, max kept) becomes the step
time. On CUDA each run is timed with CUDA events; in `cudagraph` mode each B
is captured as its own graph (a bucket) and replayed, and the file becomes
the padded staircase an engine replaying those buckets would see. With
`layers < shape.layers`, the stack and the head-only forward are timed and
scaled: `step = head + L/N · (measured − head)` (the file says so).

With `parts`, each point also times the step's GEMMs and its attention
alone (`torch_model.StepParts`) and the file gains `gemm_ms` and
`attention_ms` columns: the rest of the step is `step_ms − gemm_ms −
attention_ms`. A `stop_at` time limit ends the sweep early and keeps the
token counts finished by then (the file says what was cut).

Drafter shapes are timed the same way (see `modelshape.drafter_shape`): the
token axis is tokens per drafter forward, and the file's `usage` line says
how a drafting step composes from it. Imports torch; only the CLI command
and this module's callers need it.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch.nn.attention import SDPBackend

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.grid import staircase
from specplan.hwprofiles.modelshape import ModelShape, drafter_shape
from specplan.hwprofiles.profile import StepProfile
from specplan.hwprofiles.torch_model import (
    DecoderModel,
    KVCache,
    MarkovHead,
    StepParts,
    VerifyLayout,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class HarnessConfig:
    """What to time. `context_tokens` is per request; `total_context` (a list) makes a context axis."""

    shape: ModelShape
    tokens: list[int]
    device: str = "cpu"
    dtype: str = "float32"
    mode: str = "eager"
    context_tokens: int = 1024
    total_context: tuple[int, ...] = ()
    repeats: int = 20
    warmup: int = 3
    rounds: int = 1
    requests: int | None = None
    tokens_per_request: int = 4
    layers: int | None = None
    drafter: str | None = None
    drafter_layers: int = 1
    block_size: int = 7
    markov_rank: int = 256
    parts: bool = False
    seed: int = 0
    command: str = "specplan profile"


def check_config(cfg: HarnessConfig) -> None:
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ProfileError("--device cuda: torch sees no CUDA device here")
    if cfg.mode not in ("eager", "cudagraph"):
        raise ProfileError(f"--mode: must be eager or cudagraph, got {cfg.mode!r}")
    if cfg.mode == "cudagraph" and not cfg.device.startswith("cuda"):
        raise ProfileError("--mode cudagraph needs --device cuda")
    if cfg.dtype not in DTYPES:
        raise ProfileError(f"--dtype: must be one of {', '.join(DTYPES)}")
    if not 1 <= cfg.rounds <= cfg.repeats:
        raise ProfileError(f"--rounds: must be in 1..repeats ({cfg.repeats}), got {cfg.rounds}")
    if cfg.repeats < 1 or cfg.warmup < 0 or cfg.tokens_per_request < 1 or cfg.context_tokens < 0:
        raise ProfileError("--repeats, --tokens-per-request must be ≥ 1; --warmup, --context ≥ 0")
    if cfg.requests is not None and cfg.requests > min(cfg.tokens):
        raise ProfileError(f"--requests {cfg.requests}: more requests than the smallest token count {min(cfg.tokens)}")
    if cfg.layers is not None and not 1 <= cfg.layers <= cfg.shape.layers:
        raise ProfileError(f"--layers: must be in 1..{cfg.shape.layers}")
    if cfg.parts and (cfg.drafter == "markov" or cfg.shape.is_moe):
        raise ProfileError("parts: timed for dense decoders only (not a Markov head, not an MoE shape)")


def spread_tokens(tokens: int, requests: int) -> list[int]:
    """B tokens over R requests as evenly as possible (the first B mod R get one more)."""
    base, extra = divmod(tokens, requests)
    return [base + 1] * extra + [base] * (requests - extra)


def request_split(cfg: HarnessConfig, tokens: int) -> list[int]:
    """New tokens per request for a forward of `tokens` tokens, by the config's rule."""
    if cfg.drafter in ("ar", "markov"):
        return [1] * tokens
    per_request = cfg.block_size if cfg.drafter == "parallel" else cfg.tokens_per_request
    requests = cfg.requests or math.ceil(tokens / per_request)
    return spread_tokens(tokens, requests)


class Timer:
    """Wall-clock on CPU, CUDA events on GPU; returns milliseconds per run."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def time(self, run: Callable[[], object], repeats: int, warmup: int) -> np.ndarray:
        for _ in range(warmup):
            run()
        self.sync()
        out = np.empty(repeats)
        for i in range(repeats):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                end.record()
                end.synchronize()
                out[i] = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                run()
                out[i] = (time.perf_counter() - t0) * 1e3
        return out

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def capture(run: Callable[[], object], warmup: int) -> Callable[[], object]:
    """Capture `run` as a CUDA graph (after warm-up on a side stream); returns its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(max(warmup, 1)):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph.replay


class Bench:
    """The model under test and the forwards to time at one token count."""

    def __init__(self, cfg: HarnessConfig) -> None:
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self.dtype = DTYPES[cfg.dtype]
        self.shape = self.timed_shape()
        if self.shape.markov_rank:
            self.model: torch.nn.Module = MarkovHead(self.shape, self.device, self.dtype, cfg.seed)
        else:
            self.model = DecoderModel(self.shape, self.device, self.dtype, cfg.seed)
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)

    def timed_shape(self) -> ModelShape:
        cfg = self.cfg
        shape = cfg.shape if cfg.drafter is None else drafter_shape(cfg.shape, cfg.drafter, cfg.drafter_layers, cfg.markov_rank)
        return replace(shape, layers=cfg.layers) if cfg.layers else shape

    @property
    def depth_scale(self) -> float:
        """Full depth over timed depth: above 1 when `layers` timed fewer layers than the shape has."""
        cfg = self.cfg
        return cfg.shape.layers / self.shape.layers if cfg.layers and cfg.layers < cfg.shape.layers else 1.0

    def forwards(self, tokens: int, total_context: int | None) -> dict[str, Callable[[], object]]:
        """`step` (`head` when scaling layers, the parts with `parts`) as closures over static inputs."""
        ids = torch.randint(0, self.shape.vocab, (tokens,), generator=self.generator, device=self.device)
        if isinstance(self.model, MarkovHead):
            unary = torch.randn(tokens, self.shape.vocab, generator=self.generator, device=self.device).to(self.dtype)
            return {"step": lambda: self.model(ids, unary)}
        split = request_split(self.cfg, tokens)
        per_request = self.cfg.context_tokens if total_context is None else total_context // len(split)
        cache = KVCache.allocate(self.shape, len(split), per_request + max(split), self.device, self.dtype)
        if self.device.type == "cuda":
            cache.fill_random([per_request] * len(split), self.generator)
        else:
            cache.lengths.fill_(per_request)
        layout = VerifyLayout.build(split, cache)
        runs = {"step": lambda: self.model(ids, layout, cache)}
        if self.depth_scale > 1:
            runs["head"] = lambda: self.model(ids, layout, cache, run_layers=False)
        if self.cfg.parts:
            assert isinstance(self.model, DecoderModel)
            parts = StepParts(self.model, layout, cache, self.generator)
            runs.update(gemm_layers=parts.layer_gemms, gemm_head=parts.head_gemm, attention=parts.attention)
        return runs


def time_forwards(bench: Bench, tokens: int, total_context: int | None, repeats: int) -> dict[str, np.ndarray]:
    """Raw run times (ms) of each of `Bench.forwards`' closures at one token count: warm-up, then `repeats` runs."""
    cfg, timer = bench.cfg, Timer(bench.device)
    with torch.inference_mode():
        runs = bench.forwards(tokens, total_context)
        if cfg.mode == "cudagraph":
            runs = {k: capture(run, cfg.warmup) for k, run in runs.items()}
        return {k: timer.time(run, repeats, cfg.warmup) for k, run in runs.items()}


def summarise(bench: Bench, samples: dict[str, np.ndarray]) -> dict[str, float]:
    """Median and spread of the step time (and the parts' medians), scaled to the full depth."""
    step, scale = samples["step"], bench.depth_scale
    if "head" in samples:
        head = float(np.median(samples["head"]))
        # the layers' share cannot be negative: a noisy head timing above a step sample clamps to 0
        step = head + scale * np.maximum(step - head, 0.0)
    stats = {"step_ms": float(np.median(step)), "p10_ms": float(np.percentile(step, 10)),
             "p90_ms": float(np.percentile(step, 90)), "min_ms": float(step.min()), "max_ms": float(step.max())}
    if "attention" in samples:
        stats["gemm_ms"] = float(np.median(samples["gemm_head"]) + scale * np.median(samples["gemm_layers"]))
        stats["attention_ms"] = float(scale * np.median(samples["attention"]))
    return stats


def run_harness(cfg: HarnessConfig, name: str, progress: Callable[[str], None] | None = None,
                stop_at: float | None = None) -> StepProfile:
    """Time every token count (× every total context) and return the profile with its provenance.

    The grid is swept `cfg.rounds` times, each visit timing its share of the
    repeats, so a burst of load from other processes spreads over all
    points instead of bending a contiguous stretch of the curve. Past
    `stop_at` (a `time.monotonic()` instant) no new point is started; the
    profile keeps the token counts timed at every context by then.
    """
    check_config(cfg)
    torch.manual_seed(cfg.seed)
    bench = Bench(cfg)
    contexts: list[int | None] = list(cfg.total_context) or [None]
    for b in {cfg.tokens[0], cfg.tokens[-1]}:  # first-use costs (allocator, thread pools, kernels) go here
        time_forwards(bench, b, contexts[0], 1)
    pooled, stopped = sweep(bench, contexts, stop_at)
    kept = next((j for j in range(len(cfg.tokens)) if any(not pooled[i, j] for i in range(len(contexts)))),
                len(cfg.tokens))
    if kept == 0:
        raise ProfileError(f"{name}: the time limit came before the first token count was timed")
    tokens = cfg.tokens[:kept]
    stats = {(i, j): summarise(bench, {k: np.concatenate(v) for k, v in pooled[i, j].items()})
             for i in range(len(contexts)) for j in range(kept)}
    if progress:
        for (i, j), point in stats.items():
            ctx = "" if contexts[i] is None else f" ctx={contexts[i]}"
            progress(f"B={tokens[j]:5d}{ctx}: {point['step_ms']:.3f} ms")
    table = {k: np.array([[stats[i, j][k] for j in range(kept)] for i in range(len(contexts))])
             for k in stats[0, 0]}
    prov = provenance(replace(cfg, tokens=tokens), bench)
    if stopped:
        runs = min(sum(len(t) for t in pooled[i, j]["step"]) for i, j in stats)
        prov["time_limit"] = (f"stopped by its time limit {stopped}: {kept} of {len(cfg.tokens)} token counts kept "
                              f"(planned up to {cfg.tokens[-1]}), at least {runs} of {cfg.repeats} timed runs each")
    return profile_from_table(cfg, name, tokens, contexts, table, prov)


def sweep(bench: Bench, contexts: list[int | None], stop_at: float | None,
          ) -> tuple[dict[tuple[int, int], dict[str, list[np.ndarray]]], str]:
    """Raw run times per (context, token) point over `rounds` sweeps; where a time limit stopped it ('' if not).

    Token-major order, so that a sweep cut short leaves a prefix of token
    counts timed at every context.
    """
    cfg = bench.cfg
    points = [(i, j) for j in range(len(cfg.tokens)) for i in range(len(contexts))]
    pooled: dict[tuple[int, int], dict[str, list[np.ndarray]]] = {p: {} for p in points}
    for r in range(cfg.rounds):
        share = cfg.repeats // cfg.rounds + (r < cfg.repeats % cfg.rounds)
        for i, j in points:
            if stop_at is not None and time.monotonic() >= stop_at:
                return pooled, f"in sweep {r + 1} of {cfg.rounds}, before B = {cfg.tokens[j]}"
            for key, times in time_forwards(bench, cfg.tokens[j], contexts[i], share).items():
                pooled[i, j].setdefault(key, []).append(times)
    return pooled, ""


def profile_from_table(cfg: HarnessConfig, name: str, tokens: list[int], contexts: list[int | None],
                       table: dict[str, np.ndarray], prov: dict[str, str]) -> StepProfile:
    """The profile of timed points: `table[column]` is (contexts, tokens); CUDA-graph buckets become a staircase."""
    token_axis = np.array(tokens, dtype=np.int64)
    if cfg.mode == "cudagraph":
        token_axis, table = _padded(tokens, table)
    squeeze = (lambda a: a[0]) if contexts == [None] else (lambda a: a)
    columns = {k: squeeze(v) for k, v in table.items() if k != "step_ms"}
    return StepProfile(
        name=name, tokens=token_axis, step_ms_table=squeeze(table["step_ms"]),
        context_tokens=None if contexts == [None] else np.array(contexts, dtype=np.int64),
        provenance=prov, extra={"columns": columns},
    )


def _padded(buckets: list[int], table: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    out = {}
    for key, values in table.items():
        tokens, out[key] = staircase(buckets, values)
    return tokens, out


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (driver {_driver_version()}, CUDA {torch.version.cuda})"
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"CPU {model} ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def provenance(cfg: HarnessConfig, bench: Bench) -> dict[str, str]:
    shape = bench.shape
    prov = {
        "device": device_name(bench.device),
        "model": shape.describe() if cfg.layers is None else replace(shape, layers=cfg.shape.layers).describe(),
        "dtype": cfg.dtype,
        "torch": torch.__version__,
        "source": f"measured by the specplan torch harness: {cfg.command}",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "capture_mode": cfg.mode if cfg.mode == "eager" else "cudagraph (one graph per bucket, padded to the next bucket)",
        "repeats": (f"{cfg.repeats} timed runs per point in {cfg.rounds} sweep(s) of the grid, "
                    f"each visit after {cfg.warmup} warm-up"),
        "statistic": f"median of {cfg.repeats} runs ({'CUDA events' if bench.device.type == 'cuda' else 'wall clock'}); p10/p90/min/max kept",
        "batch_layout": _layout_rule(cfg),
        "attention": ("torch scaled_dot_product_attention over the padded batch with a block-causal additive mask, "
                      "the query heads of each KV head folded into the query axis"),
    }
    if cfg.mode == "cudagraph":
        prov["buckets"] = " ".join(str(b) for b in cfg.tokens)
    if cfg.layers and cfg.layers < cfg.shape.layers:
        prov["layers_timed"] = (f"{cfg.layers} of {cfg.shape.layers}; scaled: step = head + "
                                f"{cfg.shape.layers}/{cfg.layers} x (measured - head), head timed alone")
    if cfg.drafter:
        prov["usage"] = _drafter_usage(cfg)
    prov.update(_request_shape(cfg))
    if cfg.parts:
        prov["parts"] = _parts_rule(bench)
    prov["attention_backend"] = sdpa_backend(bench)
    return prov


def _request_shape(cfg: HarnessConfig) -> dict[str, str]:
    """Machine-readable layout keys where the layout has one: new tokens and KV context per request."""
    if cfg.requests is not None or cfg.total_context:
        return {}
    per_request = {"ar": 1, "markov": 1, "parallel": cfg.block_size}.get(cfg.drafter or "", cfg.tokens_per_request)
    shape = {"tokens_per_request": str(per_request)}
    if cfg.drafter != "markov":
        shape["context_per_request"] = str(cfg.context_tokens)
    return shape


def _parts_rule(bench: Bench) -> str:
    scaled = f", scaled to {bench.cfg.shape.layers} layers as the step is" if bench.depth_scale > 1 else ""
    return ("gemm_ms: every projection GEMM (QKV, output, gate/up, down of each layer) and the LM head, timed "
            "alone on static inputs; attention_ms: every layer's KV-cache write and attention call, timed alone; "
            "the rest (embedding, norms, RoPE, activation, residual adds, and launch gaps in eager mode) is "
            f"step_ms - gemm_ms - attention_ms; each part the median of its own runs{scaled}")


def sdpa_backend(bench: Bench) -> str:
    """Which fused attention kernel torch picks for this model's attention call (from a small call of its shape)."""
    shape, dev, dtype = bench.shape, bench.device, bench.dtype
    if shape.markov_rank:
        return "none (no attention)"
    g = shape.heads // shape.kv_heads
    q = torch.zeros(2, shape.kv_heads, 4 * g, shape.head_dim, device=dev, dtype=dtype)
    kv = torch.zeros(2, shape.kv_heads, 64, shape.head_dim, device=dev, dtype=dtype)
    mask = torch.zeros(2, 1, 4 * g, 64, device=dev, dtype=dtype)
    try:
        return SDPBackend(torch._fused_sdp_choice(q, kv, kv, mask, 0.0, False)).name.lower()
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return "unknown (torch does not say)"


def _layout_rule(cfg: HarnessConfig) -> str:
    if cfg.drafter == "markov":
        return "one sequential head call: B = R requests, no KV cache"
    context = (f"{cfg.context_tokens} KV context tokens per request" if not cfg.total_context
               else "context axis = total KV tokens of the batch, split evenly over its requests")
    if cfg.drafter == "ar":
        return f"B = R requests x 1 token; {context}"
    if cfg.drafter == "parallel":
        rule = f"R = {cfg.requests}" if cfg.requests else f"R = ceil(B / {cfg.block_size})"
        return f"B = R x block {cfg.block_size} tokens ({rule}); {context}"
    rule = f"R = {cfg.requests} requests" if cfg.requests else f"R = ceil(B / {cfg.tokens_per_request}) requests"
    return f"B tokens spread evenly over {rule}; {context}"


def _drafter_usage(cfg: HarnessConfig) -> str:
    return {
        "ar": "autoregressive drafter: drafting a block of γ for R requests costs γ x step_ms(R)",
        "parallel": "parallel drafter: drafting a block of γ for R requests costs step_ms(R x γ), one forward",
        "markov": "sequential Markov head: γ x step_ms(R), on top of the parallel backbone's forward",
    }[cfg.drafter or ""]
