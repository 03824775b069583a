"""Step-time curves captured on a GPU by the project's torch harness: the prepared device run (issues 29, 40).

The device command (run from the repository root of the copy that travels; the machine's own
python3 with its torch, no install, no network, not this project's venv: the script imports
specplan from the tree it sits in, whatever is installed), with the device tool's
timeout_s=570:

    PYTHONUNBUFFERED=1 python3 benchmarks/profile_gpu.py --out $OUT

The same script on this machine's CPU at a tiny size (tests/test_profile_gpu.py runs it so):

    .venv/bin/python benchmarks/profile_gpu.py --plan tiny-cpu --out out/profile-gpu-cpu

The `gpu` plan, bf16, random weights, B tokens spread over ceil(B / 4) requests that each
attend to their own KV cache (the harness's layout; see hwprofiles/harness.py), in this order
(the first three are issue 40's eager/graph pair and its launch figures):

    llama3.1-8b-torch-cudagraph         Llama-3.1-8B verify step, CUDA graphs (one per bucket:
                                        1..16, every 8 to 64, then 80..128 by 16, 160..256 by
                                        32, 320..512 by 64), 1,024 KV tokens per request, parts
    llama3.1-8b-torch-eager             the same step eager, at the buckets and 65/129/193/257/385
                                        (the far side of the GEMM tile edges)
    llama3.1-8b-torch-launch            launch figures of that eager step (a JSON file): at B = 1, 8,
                                        64, 65, 128, 256, 512 the kernels one step launches
                                        (torch.profiler's CUDA kernel events; memcpy/memset apart),
                                        their summed device time, the step's host issue time; the
                                        host µs of one launch of a trivial kernel (x.add_ on one
                                        element, 2,000 back to back), and its device µs eager and
                                        inside one CUDA graph; launch-bound ms = kernels x µs
    qwen3-8b-torch-cudagraph            Qwen3-8B, CUDA graphs, parts
    llama3.1-8b-torch-drafter-dspark    DSpark-style parallel block: 2 layers + LM head over the
                                        anchor and 7 mask positions of R requests (B = 8R)
    llama3.1-8b-torch-markov            its Markov head (rank 256): one sequential position, R requests
    llama3.1-8b-torch-drafter-mtp       MTP-style layer: 1 layer + LM head, one token per request
    llama3.1-8b-torch-cudagraph-ctx8k   the target at 8,192 KV tokens per request (as far as the
                                        cache fits beside the weights), parts
    llama3.1-8b-torch-eager-ctx8k       eager at 8,192 KV tokens per request
    qwen3-8b-torch-eager                Qwen3-8B eager

"parts": each point also times the step's GEMMs and its attention alone (`gemm_ms`,
`attention_ms`; the rest is the difference), which benchmarks/profile_crosscheck.py holds
against AIConfigurator's operators. Each file is named GPU-MODEL-torch-..., the GPU's name
read from torch (h200 on an H200): the pair becomes the built-ins h200-llama3.1-8b-torch-eager
and h200-llama3.1-8b-torch-cudagraph. At the end the run prints benchmarks/eager_graph.py's
report of the pair and its launch figures beside the public ones (gLLM #264, sglang #24047,
tritonbench #1017).

The budget (never run on a GPU yet; the limits are estimates with room): the captures' hard
limits sum to 460 s (70 + 40 + 40 + 65 + 30 + 15 + 25 + 85 + 55 + 35); the plan's clock starts
before the environment step (torch import, nvidia-smi, the GEMM and copy ceilings: ~15 s), and
it starts no capture after 475 s (a capture gets the smaller of its limit and what is left), so
the captures end by ~475 s; the report reads three small files (< 5 s). That leaves ~90 s of
the 570 s for the interpreter's start and exit and a slow first CUDA context. Each capture
stops starting new points at its soft limit (limit - min(20 s, limit / 4)) and writes the
token counts it finished; the order puts the pair and its launch figures first.

Each capture runs as its own process (`--capture NAME`; the log prints its command line) under
its own time limit: a hard timeout kills it, and a soft one, earlier, stops its sweep so that
it writes the token counts it finished (its header says so). `--only NAME,...` reruns some of
the plan's captures (one that failed) under the same limits. What comes back (a device run
returns at most 8 files; this writes 3):

    OUT/curves.tar    the profile CSVs and the launch JSON, appended after each capture (a run cut
                      short keeps what finished)
    OUT/run.log       the environment (GPU, driver, CUDA, torch, memory, clocks, measured ceilings),
                      each capture's outcome and points, and the eager/graph report
    OUT/summary.json  the same, machine-readable

Then, here: `tar -xf curves.tar -C hwprofiles/data`, and the curves are built-ins (the launch
JSON sits beside them, where `benchmarks/eager_graph.py --gpu h200` reads it).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]


def use_this_tree() -> None:
    """Import `specplan` from this checkout, installed or not: pyproject's package-dir, by hand.

    The repository's folders install as `specplan.<folder>`, so a plain PYTHONPATH cannot
    find them; the package's search path here is its own folder and the repository root.
    """
    loaded = sys.modules.get("specplan")
    if loaded is not None:
        if not Path(loaded.__file__ or "").resolve().is_relative_to(REPO):
            sys.exit(f"profile_gpu: specplan is already imported from {loaded.__file__}, not from {REPO}")
        return
    spec = importlib.util.spec_from_file_location(
        "specplan", REPO / "specplan" / "__init__.py", submodule_search_locations=[str(REPO / "specplan"), str(REPO)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["specplan"] = module
    spec.loader.exec_module(module)


use_this_tree()

from specplan.hwprofiles.errors import ProfileError  # noqa: E402
from specplan.hwprofiles.fileformat import read_profile_csv, write_profile_csv  # noqa: E402
from specplan.hwprofiles.modelshape import ModelShape, drafter_shape, load_shape  # noqa: E402

GIB = 1 << 30
BUCKETS = (*range(1, 17), *range(24, 65, 8), *range(80, 129, 16), *range(160, 257, 32), *range(320, 513, 64))
TILE_EDGES = (65, 129, 193, 257, 385)  # eager only: the far side of the GEMM tile edges at 64, 128, ...
EAGER_TOKENS = tuple(sorted({*BUCKETS, *TILE_EDGES}))
DSPARK_BLOCK = 8  # the anchor and γ = 7 mask positions per request
DSPARK_TOKENS = tuple(DSPARK_BLOCK * r for r in (*range(1, 17), *range(24, 65, 8), *range(80, 129, 16)))
TINY_TOKENS = (1, 8, 24)
LAUNCH_TOKENS = (1, 8, 64, 65, 128, 256, 512)  # kernels counted per eager step: both sides of a tile edge


@dataclass(frozen=True)
class Capture:
    """One curve: what the harness times, the file it becomes (after the GPU's name), its time limit."""

    suffix: str
    shape: str
    mode: str
    tokens: tuple[int, ...]
    what: str
    context: int = 1024
    drafter: str | None = None
    drafter_layers: int = 1
    block_size: int = 7
    parts: bool = False
    layers: int | None = None
    repeats: int = 20
    limit_s: float = 60.0


@dataclass(frozen=True)
class Plan:
    """A list of captures for one device, dtype and time budget."""

    device: str
    dtype: str
    captures: tuple[Capture, ...]
    budget_s: float
    warmup: int = 3
    threads: int | None = None

    def capture(self, suffix: str) -> Capture:
        for capture in self.captures:
            if capture.suffix == suffix:
                return capture
        raise ProfileError(f"--capture: no capture {suffix!r} in this plan "
                           f"(valid: {', '.join(c.suffix for c in self.captures)})")


LLAMA = "llama3-8b"  # hwprofiles/shapes/llama3-8b.yaml: Llama 3 and 3.1 8B share it
PAIR = "llama3.1-8b-torch"  # the eager/graph pair and its launch figures: PAIR-eager, PAIR-cudagraph, PAIR-launch
PLANS = {
    "gpu": Plan("cuda", "bfloat16", budget_s=475, captures=(
        Capture(f"{PAIR}-cudagraph", LLAMA, "cudagraph", BUCKETS, "verify step, CUDA graphs", parts=True, limit_s=70),
        Capture(f"{PAIR}-eager", LLAMA, "eager", EAGER_TOKENS, "verify step, eager", limit_s=40),
        Capture(f"{PAIR}-launch", LLAMA, "launch", LAUNCH_TOKENS,
                "kernels one eager verify step launches, and the host cost of one launch", limit_s=40),
        Capture("qwen3-8b-torch-cudagraph", "qwen3-8b", "cudagraph", BUCKETS, "verify step, CUDA graphs",
                parts=True, limit_s=65),
        Capture("llama3.1-8b-torch-drafter-dspark", LLAMA, "cudagraph", DSPARK_TOKENS,
                "DSpark-style parallel block: 2 layers + LM head over R x 8 positions", drafter="parallel",
                drafter_layers=2, block_size=DSPARK_BLOCK, limit_s=30),
        Capture("llama3.1-8b-torch-markov", LLAMA, "cudagraph", BUCKETS,
                "DSpark's Markov head (rank 256), one position for R requests", drafter="markov", limit_s=15),
        Capture("llama3.1-8b-torch-drafter-mtp", LLAMA, "cudagraph", BUCKETS,
                "MTP-style layer: 1 layer + LM head, one token per request", drafter="ar", limit_s=25),
        Capture("llama3.1-8b-torch-cudagraph-ctx8k", LLAMA, "cudagraph", BUCKETS,
                "verify step, CUDA graphs, 8,192 KV tokens per request", context=8192, parts=True,
                repeats=10, limit_s=85),
        Capture("llama3.1-8b-torch-eager-ctx8k", LLAMA, "eager", EAGER_TOKENS,
                "verify step, eager, 8,192 KV tokens per request", context=8192, repeats=10, limit_s=55),
        Capture("qwen3-8b-torch-eager", "qwen3-8b", "eager", EAGER_TOKENS, "verify step, eager", limit_s=35),
    )),
    "tiny-cpu": Plan("cpu", "float32", budget_s=150, threads=1, warmup=1, captures=(
        Capture("tiny-torch-eager", "tiny-cpu", "eager", TINY_TOKENS, "verify step of the toy shape, 1 of 2 layers",
                context=64, parts=True, layers=1, repeats=5, limit_s=60),
        Capture("tiny-torch-launch", "tiny-cpu", "launch", TINY_TOKENS,
                "ops one eager verify step of the toy shape runs, and the host cost of one op", context=64,
                repeats=5, limit_s=60),
        Capture("tiny-torch-drafter-dspark", "tiny-cpu", "eager", (8, 16, 24), "parallel block of the toy shape",
                context=64, drafter="parallel", block_size=DSPARK_BLOCK, repeats=5, limit_s=60),
    )),
}


# --- the environment ------------------------------------------------------------------------------


def environment(plan: Plan) -> dict[str, Any]:
    """What the curves were measured on; a GPU plan without a GPU is a one-line error."""
    import torch

    env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                           "host": platform.node()}
    if plan.device == "cpu":
        from specplan.hwprofiles.harness import device_name
        if plan.threads:
            torch.set_num_threads(plan.threads)
        return {**env, "device": device_name(torch.device("cpu")), "slug": "cpu"}
    if not torch.cuda.is_available():
        raise ProfileError(f"torch {torch.__version__} sees no CUDA device and this plan needs one "
                           "(--plan tiny-cpu checks this script on a CPU)")
    props = torch.cuda.get_device_properties(0)
    env.update(gpu=torch.cuda.get_device_name(0), slug=gpu_slug(torch.cuda.get_device_name(0)),
               cuda=torch.version.cuda, cudnn=str(torch.backends.cudnn.version()),
               capability=f"{props.major}.{props.minor}", multiprocessors=props.multi_processor_count,
               nvidia_smi=nvidia_smi(), ceilings=ceilings(torch))
    torch.cuda.empty_cache()  # the captures run in other processes: leave them the memory
    free, total = torch.cuda.mem_get_info(0)
    return {**env, "memory_gib": round(total / GIB, 1), "free_gib": round(free / GIB, 1)}


def gpu_slug(name: str) -> str:
    """'NVIDIA H200' -> 'h200': the model token of the GPU's name, lower case ('gpu' if none)."""
    match = re.search(r"\b([A-Za-z]{1,3}\d{2,4}[A-Za-z]?)\b", name.replace("NVIDIA", ""))
    return match.group(1).lower() if match else "gpu"


def nvidia_smi() -> str:
    fields = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,persistence_mode"
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unavailable"
    return f"{fields}: {done.stdout.strip().splitlines()[0]}"


def ceilings(torch: Any) -> dict[str, float]:
    """This GPU's bf16 GEMM rate and copy bandwidth, measured now: the yardsticks for the curves."""
    n, repeats = 8192, 10
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    src = torch.empty(GIB, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    gemm_ms = timed_ms(torch, lambda: a @ b, repeats)
    copy_ms = timed_ms(torch, lambda: dst.copy_(src), repeats)
    return {"bf16_gemm_tflops": round(2 * n**3 / gemm_ms / 1e9, 1),
            "copy_tb_per_s_read_plus_write": round(2 * GIB / copy_ms / 1e9, 2)}


def timed_ms(torch: Any, run: Any, repeats: int) -> float:
    for _ in range(3):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


# --- what fits ------------------------------------------------------------------------------------


def timed_shape(capture: Capture) -> ModelShape:
    shape = load_shape(capture.shape)
    return shape if capture.drafter is None else drafter_shape(shape, capture.drafter, capture.drafter_layers)


def fitting_tokens(capture: Capture, free_bytes: float | None) -> tuple[tuple[int, ...], str]:
    """The capture's token counts whose KV cache fits beside the weights; a note on what was cut.

    Budget: 85% of the free memory, less the weights and 4 GiB for activations and graph pools.
    """
    if free_bytes is None or capture.drafter == "markov":
        return capture.tokens, ""
    shape = timed_shape(capture)
    per_request = {"ar": 1, "parallel": capture.block_size}.get(capture.drafter or "", 4)
    budget = 0.85 * free_bytes - 2 * shape.params() - 4 * GIB

    def kv_bytes(b: int) -> int:
        requests = math.ceil(b / per_request)
        return requests * (capture.context + math.ceil(b / requests)) * shape.kv_bytes_per_token(2)

    kept = tuple(b for b in capture.tokens if kv_bytes(b) <= budget)
    if len(kept) == len(capture.tokens):
        return kept, ""
    first_cut = capture.tokens[len(kept)]
    return kept, (f"token counts above {kept[-1] if kept else 0} left out: the KV cache of B = {first_cut} "
                  f"({kv_bytes(first_cut) / GIB:.1f} GiB) does not fit beside the weights in "
                  f"{free_bytes / GIB:.0f} GiB free")


# --- one capture (a child process) ----------------------------------------------------------------


def capture_main(args: argparse.Namespace) -> int:
    """Time one capture and write its file into --out; the soft time limit keeps what finished."""
    import torch

    from specplan.hwprofiles.harness import HarnessConfig, run_harness

    plan = PLANS[args.plan]
    capture = plan.capture(args.capture)
    stop_at = time.monotonic() + args.stop_after_s
    if plan.threads:
        torch.set_num_threads(plan.threads)
    tokens = [int(t) for t in args.tokens.split(",")] if args.tokens else list(capture.tokens)
    cfg = HarnessConfig(
        shape=load_shape(capture.shape), tokens=tokens, device=plan.device, dtype=plan.dtype,
        mode="eager" if capture.mode == "launch" else capture.mode, context_tokens=capture.context,
        repeats=capture.repeats, warmup=plan.warmup, layers=capture.layers, drafter=capture.drafter,
        drafter_layers=capture.drafter_layers, block_size=capture.block_size, parts=capture.parts,
        command=(f"benchmarks/profile_gpu.py --plan {args.plan} --capture {capture.suffix} "
                 f"--tokens {','.join(map(str, tokens))}"),
    )
    name = f"{args.slug}-{capture.suffix}"
    if capture.mode == "launch":
        return launch_main(cfg, capture, name, Path(args.out), stop_at)
    profile = run_harness(cfg, name, print, stop_at=stop_at)
    profile.provenance["what"] = capture.what
    if args.note:
        profile.provenance["grid"] = args.note
    path = write_profile_csv(profile, Path(args.out) / f"{name}.csv")
    print(f"wrote {path.name}: {len(tokens)} token counts planned, "
          f"{'cut by its time limit' if 'time_limit' in profile.provenance else 'all timed'}")
    return 0


# --- the launch capture (a child process) ---------------------------------------------------------

LAUNCH_FORMAT = "specplan-launch/1"
LAUNCH_OP = "x.add_(1) on a one-element tensor"
LAUNCHES, LAUNCH_ROUNDS = 2000, 7
COPIES = ("Memcpy", "Memset")  # the profiler's device events that are copies, not kernels
# ops that move no data (views, allocations): no kernel on a GPU, so not counted on a CPU either
NO_KERNEL_OPS = frozenset(f"aten::{op}" for op in (
    "view", "view_as", "as_strided", "_reshape_alias", "_unsafe_view", "alias", "reshape", "flatten", "unflatten",
    "t", "transpose", "permute", "expand", "expand_as", "unsqueeze", "squeeze", "slice", "select", "narrow",
    "split", "split_with_sizes", "chunk", "unbind", "contiguous", "detach", "lift_fresh", "resolve_conj",
    "resolve_neg", "empty", "empty_strided", "empty_like", "new_empty", "resize_", "to", "type_as", "result_type"))


def launch_main(cfg: Any, capture: Capture, name: str, out: Path, stop_at: float) -> int:
    """Count the kernels of one eager step per token count, time one launch; write NAME.json into `out`.

    The step is the eager capture's own (the harness's model, layout and context), so the file pairs
    with the eager and CUDA-graph curves of the same name stem.
    """
    import torch

    from specplan.hwprofiles.harness import Bench, provenance

    torch.manual_seed(cfg.seed)
    bench = Bench(cfg)
    per_launch = launch_cost(torch, bench.device)
    print(f"one launch ({LAUNCH_OP}): {per_launch['eager_host_us']:.2f} µs of host time eager"
          + ("" if per_launch["graph_device_us"] is None else
             f", {per_launch['eager_device_us']:.2f} µs of device time eager, "
             f"{per_launch['graph_device_us']:.2f} µs inside one CUDA graph"))
    steps: list[dict[str, Any]] = []
    for b in cfg.tokens:
        if time.monotonic() >= stop_at:
            break
        steps.append(step_launches(torch, bench, b, per_launch["eager_host_us"]))
        print("B={tokens:5d}: {kernels} kernels, {launch_bound_ms:.3f} ms launch-bound, host issue "
              "{host_issue_ms:.3f} ms, step {step_ms:.3f} ms".format(**steps[-1]))
    if not steps:
        raise ProfileError(f"{name}: the time limit came before the first token count was counted")
    prov = provenance(replace(cfg, tokens=[s["tokens"] for s in steps]), bench)
    prov.update(launch_provenance(capture, name, cfg.repeats, bench.device.type == "cuda"))
    if len(steps) < len(cfg.tokens):
        prov["time_limit"] = (f"stopped by its time limit before B = {cfg.tokens[len(steps)]}: {len(steps)} of "
                              f"{len(cfg.tokens)} token counts kept (planned up to {cfg.tokens[-1]})")
    columns = {key: [rounded(s[key]) for s in steps] for key in steps[0]}
    document = {"format": LAUNCH_FORMAT, "name": name, "provenance": prov, "per_launch": per_launch,
                "steps": columns}  # one list per column, one entry per token count
    (out / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {name}.json: {len(cfg.tokens)} token counts planned, "
          f"{'cut by its time limit' if 'time_limit' in prov else 'all counted'}")
    return 0


def rounded(value: Any) -> Any:
    """Floats to 5 significant digits for the file (ms to tenths of a µs and better; µs to hundredths)."""
    return float(f"{value:.5g}") if isinstance(value, float) else value


def launch_provenance(capture: Capture, name: str, repeats: int, cuda: bool) -> dict[str, str]:
    stem = name.removesuffix("-launch")
    clock = "CUDA events" if cuda else "wall clock"
    counting = ("CUDA kernel events of torch.profiler over one step (Memcpy/Memset events counted apart as "
                "copies); launch_calls: the host's cudaLaunch*/cuLaunch* calls in the same trace" if cuda else
                "the aten ops of torch.profiler over one step that do work and call none that does (views and "
                "allocations left out): a CPU stand-in for kernels; no launch calls on a CPU")
    return {
        "what": capture.what,
        "capture_mode": "eager; each token count's step also run once under torch.profiler to count its kernels",
        "statistic": (f"step_ms: median of {repeats} runs ({clock}); host_issue_ms: median of {repeats} runs; "
                      "kernels: one profiled run"),
        "pair": f"{stem}-eager and {stem}-cudagraph (the same step, eager and replayed)",
        "counting": counting,
        "kernel_busy": "kernel_busy_ms: the counted kernels' own durations summed (the device's busy time, "
                       "launch gaps left out)",
        "host_issue": ("host_issue_ms: wall time of the step's call without waiting for the device, median of the "
                       "repeats: the launch-bound time where the host is the slower side (on a CPU, the step)"),
        "per_launch": (f"{LAUNCH_OP}, {LAUNCHES} launches back to back, median of {LAUNCH_ROUNDS} rounds: "
                       "eager_host_us = wall time to issue them / launches; eager_device_us = CUDA events around "
                       "them / launches; graph_device_us = the same, captured as one CUDA graph and replayed; "
                       "graph_replay_host_us = host time of one replay call"),
        "launch_bound": "launch_bound_ms = kernels x eager_host_us / 1000",
    }


def launch_cost(torch: Any, device: Any) -> dict[str, Any]:
    """Host µs per launch of a trivial kernel, eager; on CUDA also the device µs per kernel, eager and in a graph."""
    from specplan.hwprofiles.harness import capture

    cuda = device.type == "cuda"
    with torch.inference_mode():
        x = torch.zeros(1, device=device)

        def burst() -> None:
            for _ in range(LAUNCHES):
                x.add_(1.0)

        burst()  # first-use costs
        eager = [timed_burst(torch, burst, cuda) for _ in range(LAUNCH_ROUNDS)]
        graph = []
        if cuda:
            replay = capture(burst, 1)
            graph = [timed_burst(torch, replay, cuda) for _ in range(LAUNCH_ROUNDS)]
    return {"op": LAUNCH_OP, "launches": LAUNCHES, "rounds": LAUNCH_ROUNDS,
            "eager_host_us": rounded(statistics.median(h for h, _ in eager)),
            "eager_device_us": rounded(statistics.median(d for _, d in eager)) if cuda else None,
            "graph_device_us": rounded(statistics.median(d for _, d in graph)) if cuda else None,
            "graph_replay_host_us": rounded(statistics.median(h for h, _ in graph) * LAUNCHES) if cuda else None}


def timed_burst(torch: Any, run: Any, cuda: bool) -> tuple[float, float]:
    """(host µs, device µs) per launch of one call of `run`, which launches LAUNCHES kernels (device 0 on a CPU)."""
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter()
    run()
    host_us = (time.perf_counter() - t0) * 1e6 / LAUNCHES
    if not cuda:
        return host_us, 0.0
    end.record()
    end.synchronize()
    return host_us, start.elapsed_time(end) * 1e3 / LAUNCHES


def step_launches(torch: Any, bench: Any, tokens: int, per_launch_us: float) -> dict[str, Any]:
    """One token count: the eager step's time, its host issue time, and the kernels it launches."""
    from specplan.hwprofiles.harness import Timer

    cfg, cuda = bench.cfg, bench.device.type == "cuda"
    timer = Timer(bench.device)
    with torch.inference_mode():
        step = bench.forwards(tokens, None)["step"]
        step_ms = statistics.median(timer.time(step, cfg.repeats, cfg.warmup).tolist())
        host_ms = []
        for _ in range(cfg.repeats):
            timer.sync()
            t0 = time.perf_counter()
            step()
            host_ms.append((time.perf_counter() - t0) * 1e3)
        timer.sync()
        counted = count_launches(torch, profiled_events(torch, step, cuda), cuda)
    return {"tokens": tokens, **counted, "host_issue_ms": statistics.median(host_ms), "step_ms": step_ms,
            "launch_bound_ms": counted["kernels"] * per_launch_us / 1e3}


def does_work(event: Any) -> bool:
    """An aten op that is not a view or an allocation."""
    return bool(event.name.startswith("aten::") and event.name not in NO_KERNEL_OPS)


def works_below(event: Any) -> bool:
    """Whether the op or any op it called does work (the CPU stand-in counts the deepest ops that do)."""
    return does_work(event) or any(works_below(c) for c in event.cpu_children)


def profiled_events(torch: Any, run: Any, cuda: bool) -> list[Any]:
    """The torch.profiler events of one call of `run` (CPU ops; on CUDA also the device's kernels)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities) as prof:
        run()
        if cuda:
            torch.cuda.synchronize()
    return list(prof.events())


def count_launches(torch: Any, events: list[Any], cuda: bool) -> dict[str, Any]:
    """Kernels, copies and launch calls of one profiled step, and the counted kernels' summed time (ms).

    On CUDA the kernels are the device events that are not copies; a trace without device events
    (no CUPTI) is an error, not a zero. On a CPU the ops that do work and call none that does
    (aten::mm under aten::linear, not the transposes and views around it) stand in.
    """
    if not cuda:
        ops = [e for e in events if does_work(e) and not any(works_below(c) for c in e.cpu_children)]
        return {"kernels": len(ops), "copies": 0, "launch_calls": 0,
                "kernel_busy_ms": sum(e.time_range.elapsed_us() for e in ops) / 1e3}
    device = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels = [e for e in device if not e.name.startswith(COPIES)]
    calls = sum(e.name.startswith(("cudaLaunch", "cuLaunch")) for e in events)
    if not kernels:
        raise ProfileError(f"torch.profiler recorded no CUDA kernel events ({calls} launch calls seen): "
                           "is CUPTI missing from this torch?")
    return {"kernels": len(kernels), "copies": len(device) - len(kernels), "launch_calls": calls,
            "kernel_busy_ms": sum(e.time_range.elapsed_us() for e in kernels) / 1e3}


# --- the plan (the parent process) -----------------------------------------------------------------


@dataclass
class Outcome:
    """What became of one capture."""

    name: str
    status: str  # ok | partial (its time limit cut the grid) | failed | killed (hard limit) | skipped (budget)
    seconds: float = 0.0
    points: int = 0
    planned: int = 0
    command: list[str] = field(default_factory=list)
    detail: str = ""
    file: str = ""  # what it wrote: NAME.csv (a curve) or NAME.json (launch figures)


class Run:
    """The output folder: the log, the summary and the tar of curves, each updated as captures finish."""

    def __init__(self, out: Path, work: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        for stale in ("curves.tar", "run.log", "summary.json"):
            (out / stale).unlink(missing_ok=True)
        self.out, self.work = out, work
        self.log: IO[str] = open(out / "run.log", "a", buffering=1)  # noqa: SIM115 (closed in finish)
        self.outcomes: list[Outcome] = []
        self.env: dict[str, Any] = {}

    def say(self, line: str) -> None:
        print(line, flush=True)
        self.log.write(line + "\n")

    def record(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        if outcome.status in ("ok", "partial"):
            with tarfile.open(self.out / "curves.tar", "a") as tar:
                tar.add(self.work / outcome.file, arcname=outcome.file)
        summary = {"environment": self.env, "captures": [asdict(o) for o in self.outcomes]}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")

    def written(self) -> dict[str, Path]:
        """The files the captures wrote, by capture name."""
        return {o.name: self.work / o.file for o in self.outcomes if o.status in ("ok", "partial")}

    def finish(self) -> None:
        self.log.close()


def run_plan(args: argparse.Namespace) -> int:
    if args.work:
        return run_captures(args, Path(args.work))
    with tempfile.TemporaryDirectory(prefix="profile_gpu-") as work:
        return run_captures(args, Path(work))


def chosen(plan: Plan, only: str | None) -> tuple[Capture, ...]:
    """The plan's captures, or those `--only` names (a rerun of what failed), in the plan's order."""
    if not only:
        return plan.captures
    names, valid = only.split(","), [c.suffix for c in plan.captures]
    for name in names:
        if name not in valid:
            raise ProfileError(f"--only: no capture {name!r} in this plan (valid: {', '.join(valid)})")
    return tuple(c for c in plan.captures if c.suffix in names)


def run_captures(args: argparse.Namespace, work: Path) -> int:
    """Every capture of the plan in turn, each in its own process, until the budget runs out; then the report."""
    plan = PLANS[args.plan]
    captures = chosen(plan, args.only)
    start = time.monotonic()
    run = Run(Path(args.out), work)
    try:
        run.env = environment(plan)
        for key, value in run.env.items():
            run.say(f"# {key}: {value}")
        budget = args.budget_s or plan.budget_s
        free = run.env["free_gib"] * GIB if "free_gib" in run.env else None
        for capture in captures:
            left = budget - (time.monotonic() - start)
            run.record(run_capture(run, plan, capture, min(capture.limit_s, left), free, args.plan))
        report_launches(run, captures)
    finally:
        run.finish()
    done = sum(o.status in ("ok", "partial") for o in run.outcomes)
    print(f"{done} of {len(captures)} captures written to {Path(args.out) / 'curves.tar'} "
          f"in {time.monotonic() - start:.0f} s")
    return 0 if done == len(captures) else 1


def run_capture(run: Run, plan: Plan, capture: Capture, limit_s: float, free: float | None, plan_name: str) -> Outcome:
    """Run one capture in its own process under `limit_s`; its output goes to the log."""
    name = f"{run.env['slug']}-{capture.suffix}"
    tokens, note = fitting_tokens(capture, free)
    if limit_s < 10 or not tokens:
        run.say(f"skip    {name}: {'no time left in the budget' if tokens else note}")
        return Outcome(name, "skipped", planned=len(capture.tokens), detail=note or "budget")
    soft = limit_s - min(20.0, limit_s / 4)
    command = [sys.executable, *(["-S"] if sys.flags.no_site else []), str(Path(__file__).resolve()),
               "--plan", plan_name, "--capture", capture.suffix, "--slug", run.env["slug"], "--out", str(run.work),
               "--tokens", ",".join(map(str, tokens)), "--stop-after-s", f"{soft:.0f}", *(["--note", note] if note else [])]
    run.say(f"start   {name} ({capture.what}; {len(tokens)} token counts, limit {limit_s:.0f} s): "
            + " ".join(command[1:]))
    t0 = time.monotonic()
    try:
        done = subprocess.run(command, stdout=run.log, stderr=subprocess.STDOUT, timeout=limit_s, check=False,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})  # a killed capture's lines stay in the log
    except subprocess.TimeoutExpired:
        run.say(f"killed  {name}: past its hard limit of {limit_s:.0f} s")
        return Outcome(name, "killed", limit_s, 0, len(tokens), command, f"hard limit {limit_s:.0f} s")
    seconds = time.monotonic() - t0
    file = f"{name}.{'json' if capture.mode == 'launch' else 'csv'}"
    if done.returncode != 0 or not (run.work / file).is_file():
        run.say(f"failed  {name}: exit status {done.returncode} after {seconds:.0f} s (its output is above)")
        return Outcome(name, "failed", seconds, 0, len(tokens), command, f"exit status {done.returncode}")
    points, step_ms, prov = written_points(run.work / file)
    status = "partial" if "time_limit" in prov else "ok"
    run.say(f"{status:7s} {name}: {points} of {len(tokens)} token counts in {seconds:.0f} s, "
            f"{min(step_ms):.3f} to {max(step_ms):.3f} ms")
    return Outcome(name, status, seconds, points, len(tokens), command, prov.get("time_limit", note), file)


def written_points(path: Path) -> tuple[int, list[float], dict[str, str]]:
    """A capture's file read back: its measured points, their step times (ms) and its provenance."""
    if path.suffix == ".json":
        document = json.loads(path.read_text())
        return len(document["steps"]["tokens"]), document["steps"]["step_ms"], document["provenance"]
    profile = read_profile_csv(path)
    points = len(profile.provenance.get("buckets", "").split()) or len(profile.tokens)
    return points, profile.step_ms_table.ravel().tolist(), profile.provenance


def report_launches(run: Run, captures: tuple[Capture, ...]) -> None:
    """Each launch capture's figures beside its eager/graph pair and the public figures, into the log."""
    written = run.written()
    for capture in captures:
        name = f"{run.env['slug']}-{capture.suffix}"
        if capture.mode != "launch" or name not in written:
            continue
        stem = name.removesuffix("-launch")
        # benchmarks/eager_graph.py reads the pair back; loaded here, by path, only when there is one to read
        reader = sibling("eager_graph")
        try:
            text = reader.report(reader.read_pair(written[name], written.get(f"{stem}-eager"),
                                                  written.get(f"{stem}-cudagraph")))
        except ProfileError as exc:
            text = f"report: {exc}"
        for line in ["", *text.splitlines()]:
            run.say(line)


def sibling(name: str) -> Any:
    """benchmarks/NAME.py as a module (this folder is no package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for curves.tar, run.log and summary.json")
    parser.add_argument("--plan", choices=sorted(PLANS), default="gpu")
    parser.add_argument("--budget-s", type=float, help="stop starting captures after this many seconds")
    parser.add_argument("--only", help="comma list of the plan's captures to run (a rerun of those that failed)")
    parser.add_argument("--work", help="folder for the files before they are packed (default: a new temporary one)")
    child = parser.add_argument_group("one capture (what the plan runs in a child process)")
    child.add_argument("--capture", help="the capture to time, by its name after the GPU's")
    child.add_argument("--slug", default="gpu", help="the GPU's name in the file name")
    child.add_argument("--tokens", help="comma list of token counts (default: the capture's own)")
    child.add_argument("--stop-after-s", type=float, default=1e9, help="no new point after this many seconds")
    child.add_argument("--note", help="a header line on the grid (what the memory fit left out)")
    args = parser.parse_args(argv)
    try:
        return capture_main(args) if args.capture else run_plan(args)
    except ProfileError as exc:
        print(f"profile_gpu: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
