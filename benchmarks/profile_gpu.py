"""Step-time curves captured on a GPU by the project's torch harness: the prepared device run (issue 29).

The device command (run from the repository root of the copy that travels; the machine's own
python3 with its torch, no install, no network, not this project's venv: the script imports
specplan from the tree it sits in, whatever is installed), with the device tool's
timeout_s=570 (the plan stops starting captures at 7 min 50 s):

    PYTHONUNBUFFERED=1 python3 benchmarks/profile_gpu.py --out $OUT

The same script on this machine's CPU at a tiny size (tests/test_profile_gpu.py runs it so):

    .venv/bin/python benchmarks/profile_gpu.py --plan tiny-cpu --out out/profile-gpu-cpu

The `gpu` plan, bf16, random weights, B tokens spread over ceil(B / 4) requests that each
attend to their own KV cache (the harness's layout; see hwprofiles/harness.py):

    llama3.1-8b-torch-cudagraph         Llama-3.1-8B verify step, CUDA graphs (one per bucket:
                                        1..16, every 8 to 64, then 80..128 by 16, 160..256 by
                                        32, 320..512 by 64), 1,024 KV tokens per request, parts
    qwen3-8b-torch-cudagraph            Qwen3-8B, the same
    llama3.1-8b-torch-drafter-dspark    DSpark-style parallel block: 2 layers + LM head over the
                                        anchor and 7 mask positions of R requests (B = 8R)
    llama3.1-8b-torch-markov            its Markov head (rank 256): one sequential position, R requests
    llama3.1-8b-torch-drafter-mtp       MTP-style layer: 1 layer + LM head, one token per request
    llama3.1-8b-torch-cudagraph-ctx8k   the target at 8,192 KV tokens per request (as far as the
                                        cache fits beside the weights), parts
    llama3.1-8b-torch-eager             eager (no graphs), the buckets and 65/129/193/257/385
    llama3.1-8b-torch-eager-ctx8k       eager at 8,192 KV tokens per request
    qwen3-8b-torch-eager                Qwen3-8B eager

"parts": each point also times the step's GEMMs and its attention alone (`gemm_ms`,
`attention_ms`; the rest is the difference), which benchmarks/profile_crosscheck.py holds
against AIConfigurator's operators. Each file is named GPU-MODEL-torch-..., the GPU's name
read from torch (h200 on an H200).

Each capture runs as its own process (`--capture NAME`; the log prints its command line) under
its own time limit: a hard timeout kills it, and a soft one, earlier, stops its sweep so that
it writes the token counts it finished (its header says so). What comes back (a device run
returns at most 8 files; this writes 3):

    OUT/curves.tar    the profile CSVs, appended after each capture (a run cut short keeps what finished)
    OUT/run.log       the environment (GPU, driver, CUDA, torch, memory, clocks, measured ceilings)
                      and each capture's outcome and points
    OUT/summary.json  the same, machine-readable

Then, here: `tar -xf curves.tar -C hwprofiles/data`, and the curves are built-ins.
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
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
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
PLANS = {
    "gpu": Plan("cuda", "bfloat16", budget_s=470, captures=(
        Capture("llama3.1-8b-torch-cudagraph", LLAMA, "cudagraph", BUCKETS, "verify step, CUDA graphs",
                parts=True, limit_s=70),
        Capture("qwen3-8b-torch-cudagraph", "qwen3-8b", "cudagraph", BUCKETS, "verify step, CUDA graphs",
                parts=True, limit_s=70),
        Capture("llama3.1-8b-torch-drafter-dspark", LLAMA, "cudagraph", DSPARK_TOKENS,
                "DSpark-style parallel block: 2 layers + LM head over R x 8 positions", drafter="parallel",
                drafter_layers=2, block_size=DSPARK_BLOCK, limit_s=35),
        Capture("llama3.1-8b-torch-markov", LLAMA, "cudagraph", BUCKETS,
                "DSpark's Markov head (rank 256), one position for R requests", drafter="markov", limit_s=20),
        Capture("llama3.1-8b-torch-drafter-mtp", LLAMA, "cudagraph", BUCKETS,
                "MTP-style layer: 1 layer + LM head, one token per request", drafter="ar", limit_s=30),
        Capture("llama3.1-8b-torch-cudagraph-ctx8k", LLAMA, "cudagraph", BUCKETS,
                "verify step, CUDA graphs, 8,192 KV tokens per request", context=8192, parts=True,
                repeats=10, limit_s=90),
        Capture("llama3.1-8b-torch-eager", LLAMA, "eager", EAGER_TOKENS, "verify step, eager", limit_s=45),
        Capture("llama3.1-8b-torch-eager-ctx8k", LLAMA, "eager", EAGER_TOKENS,
                "verify step, eager, 8,192 KV tokens per request", context=8192, repeats=10, limit_s=60),
        Capture("qwen3-8b-torch-eager", "qwen3-8b", "eager", EAGER_TOKENS, "verify step, eager", limit_s=40),
    )),
    "tiny-cpu": Plan("cpu", "float32", budget_s=120, threads=1, warmup=1, captures=(
        Capture("tiny-torch-eager", "tiny-cpu", "eager", TINY_TOKENS, "verify step of the toy shape, 1 of 2 layers",
                context=64, parts=True, layers=1, repeats=5, limit_s=60),
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
    """Time one capture and write its CSV into --out; the soft time limit keeps what finished."""
    import torch

    from specplan.hwprofiles.harness import HarnessConfig, run_harness

    plan = PLANS[args.plan]
    capture = plan.capture(args.capture)
    stop_at = time.monotonic() + args.stop_after_s
    if plan.threads:
        torch.set_num_threads(plan.threads)
    tokens = [int(t) for t in args.tokens.split(",")] if args.tokens else list(capture.tokens)
    cfg = HarnessConfig(
        shape=load_shape(capture.shape), tokens=tokens, device=plan.device, dtype=plan.dtype, mode=capture.mode,
        context_tokens=capture.context, repeats=capture.repeats, warmup=plan.warmup, layers=capture.layers,
        drafter=capture.drafter, drafter_layers=capture.drafter_layers, block_size=capture.block_size,
        parts=capture.parts, command=(f"benchmarks/profile_gpu.py --plan {args.plan} --capture {capture.suffix} "
                                      f"--tokens {','.join(map(str, tokens))}"),
    )
    name = f"{args.slug}-{capture.suffix}"
    profile = run_harness(cfg, name, print, stop_at=stop_at)
    profile.provenance["what"] = capture.what
    if args.note:
        profile.provenance["grid"] = args.note
    path = write_profile_csv(profile, Path(args.out) / f"{name}.csv")
    print(f"wrote {path.name}: {len(tokens)} token counts planned, "
          f"{'cut by its time limit' if 'time_limit' in profile.provenance else 'all timed'}")
    return 0


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
        csv = self.work / f"{outcome.name}.csv"
        if outcome.status in ("ok", "partial"):
            with tarfile.open(self.out / "curves.tar", "a") as tar:
                tar.add(csv, arcname=csv.name)
        summary = {"environment": self.env, "captures": [asdict(o) for o in self.outcomes]}
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")

    def finish(self) -> None:
        self.log.close()


def run_plan(args: argparse.Namespace) -> int:
    if args.work:
        return run_captures(args, Path(args.work))
    with tempfile.TemporaryDirectory(prefix="profile_gpu-") as work:
        return run_captures(args, Path(work))


def run_captures(args: argparse.Namespace, work: Path) -> int:
    """Every capture of the plan in turn, each in its own process, until the budget runs out."""
    plan = PLANS[args.plan]
    start = time.monotonic()
    run = Run(Path(args.out), work)
    try:
        run.env = environment(plan)
        for key, value in run.env.items():
            run.say(f"# {key}: {value}")
        budget = args.budget_s or plan.budget_s
        free = run.env["free_gib"] * GIB if "free_gib" in run.env else None
        for capture in plan.captures:
            left = budget - (time.monotonic() - start)
            run.record(run_capture(run, plan, capture, min(capture.limit_s, left), free, args.plan))
    finally:
        run.finish()
    done = sum(o.status in ("ok", "partial") for o in run.outcomes)
    print(f"{done} of {len(plan.captures)} captures written to {Path(args.out) / 'curves.tar'} "
          f"in {time.monotonic() - start:.0f} s")
    return 0 if done == len(plan.captures) else 1


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
    csv = run.work / f"{name}.csv"
    if done.returncode != 0 or not csv.is_file():
        run.say(f"failed  {name}: exit status {done.returncode} after {seconds:.0f} s (its output is above)")
        return Outcome(name, "failed", seconds, 0, len(tokens), command, f"exit status {done.returncode}")
    profile = read_profile_csv(csv)
    status = "partial" if "time_limit" in profile.provenance else "ok"
    points = len(profile.provenance.get("buckets", "").split()) or len(profile.tokens)
    run.say(f"{status:7s} {name}: {points} of {len(tokens)} token counts in {seconds:.0f} s, "
            f"{float(profile.step_ms_table.min()):.3f} to {float(profile.step_ms_table.max()):.3f} ms")
    return Outcome(name, status, seconds, points, len(tokens), command, profile.provenance.get("time_limit", note))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for curves.tar, run.log and summary.json")
    parser.add_argument("--plan", choices=sorted(PLANS), default="gpu")
    parser.add_argument("--budget-s", type=float, help="stop starting captures after this many seconds")
    parser.add_argument("--work", help="folder for the CSVs before they are packed (default: a new temporary one)")
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
