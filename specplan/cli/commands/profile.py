"""`specplan profile` (a step-time curve from the torch harness or AIConfigurator) and `specplan profile-plot`.

`profile` writes a profile CSV (hwprofiles/fileformat.py) that a scenario
can name as `hardware.profile: PATH`. `--source torch` (the default) times
a model shape with the torch harness and needs torch (the `profile` extra);
`--source aiconfigurator` composes verify steps (or, with `--drafter-layers`,
drafter forwards) from NVIDIA AIConfigurator's measured per-operator
database and needs aiconfigurator-core (the `aic` extra). Each imports its
package only when run. `profile-plot` draws step time and steps/s vs tokens
for profile files or `builtin:NAME`s (`--parts`: each step's named parts
stacked against tokens).
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from specplan.cli.args import whole_number
from specplan.cli.commands import help_of
from specplan.cli.output import add_force_arg, out_file
from specplan.hwprofiles.aiconfigurator import (
    AicDrafter,
    AicLayout,
    AicTarget,
    aic_command,
    aic_profile,
    literal_version,
)
from specplan.hwprofiles.fileformat import write_profile_csv
from specplan.hwprofiles.grid import parse_tokens
from specplan.hwprofiles.loader import load_profile
from specplan.hwprofiles.modelshape import load_shape
from specplan.hwprofiles.plot import save_parts_plot, save_profile_plot
from specplan.simulator.core.errors import SpecplanError

SOURCES = ("torch", "aiconfigurator")
TORCH_ONLY = ("device", "dtype", "tokens", "context", "mode", "layers", "repeats", "warmup", "rounds", "requests",
              "drafter", "block_size", "markov_rank", "parts", "threads", "seed")
AIC_ONLY = ("system", "backend", "backend_version", "tp", "ep", "dp", "max_tokens", "memory_fraction",
            "drafter_moe", "drafter_fuse", "moe_quant", "moe_backend")
DEFAULTS: dict[str, object] = {}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help=help_of("profile"))
    p.add_argument("--source", default="torch", choices=SOURCES,
                   help="torch: time a shape here; aiconfigurator: import measured GPU kernels (default torch)")
    p.add_argument("--model", required=True,
                   help="torch: shape name (hwprofiles/shapes/) or shape YAML path; aiconfigurator: a model id "
                        "it ships (e.g. meta-llama/Meta-Llama-3.1-8B) or a folder with config.json")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    p.add_argument("--dtype", help="float32, bfloat16 or float16 (default: float32 on CPU, bfloat16 on CUDA)")
    p.add_argument("--tokens", default="1:512", help="token counts: 1:512 (dense to 16, then stepped), 1:512:8, or 1,2,4,8")
    p.add_argument("--context", type=whole_number, default=1024, help="KV context tokens per request (default 1024)")
    p.add_argument("--total-context", help="comma list of total KV tokens per batch: adds a context axis")
    p.add_argument("--mode", default="eager", choices=("eager", "cudagraph"))
    p.add_argument("--out", required=True, help="profile CSV to write (an existing one kept unless --force)")
    add_force_arg(p)
    p.add_argument("--name", help="profile name (default: the file's stem)")
    p.add_argument("--layers", type=whole_number, help="time N layers and scale to the shape's depth")
    p.add_argument("--repeats", type=whole_number, default=20)
    p.add_argument("--warmup", type=whole_number, default=3)
    p.add_argument("--rounds", type=whole_number, default=1,
                   help="sweep the grid N times, repeats shared out, to spread load bursts (default 1)")
    spread = p.add_mutually_exclusive_group()
    spread.add_argument("--requests", type=whole_number, help="spread B tokens over exactly R requests")
    spread.add_argument("--tokens-per-request", type=whole_number, default=4,
                        help="R = ceil(B / K) requests (default K = 4: one anchor + 3 drafts)")
    p.add_argument("--drafter", choices=("ar", "parallel", "markov"),
                   help="time a drafter instead: ar (Eagle3-like), parallel (DFlash-like), markov (DSpark head)")
    p.add_argument("--drafter-layers", type=whole_number,
                   help="torch: layers of an ar/parallel drafter (default 1); aiconfigurator: write a drafter-forward "
                        "profile of N of the target's decoder layers + LM head")
    p.add_argument("--block-size", type=whole_number, default=7, help="γ for a parallel drafter (tokens per request)")
    p.add_argument("--markov-rank", type=whole_number, default=256)
    p.add_argument("--parts", action="store_true",
                   help="also time the step's GEMMs and attention alone (gemm_ms, attention_ms columns)")
    p.add_argument("--threads", type=whole_number, help="torch CPU threads (default on CPU: 1, the stable choice on a shared machine)")
    p.add_argument("--seed", type=whole_number, default=0)
    p.add_argument("--quiet", action="store_true")
    aic = p.add_argument_group("--source aiconfigurator")
    aic.add_argument("--system", help="AIConfigurator system: h200_sxm, h100_sxm, b200_sxm, gb200, ...")
    aic.add_argument("--backend", default="vllm", choices=("vllm", "sglang", "trtllm"))
    aic.add_argument("--backend-version", help="database version, e.g. 0.24.0 (default: the package's current one)")
    aic.add_argument("--tp", type=whole_number, default=1, help="tensor-parallel GPUs per replica (default 1)")
    aic.add_argument("--ep", type=whole_number, default=1, help="MoE expert-parallel degree (default 1)")
    aic.add_argument("--dp", type=whole_number, default=1, help="attention data-parallel ranks per replica (default 1)")
    aic.add_argument("--max-tokens", type=whole_number, default=8192, help="largest B in the table (default 8192)")
    aic.add_argument("--memory-fraction", type=float, default=0.9,
                     help="GPU memory share for weights + KV cache, sets the last context row (default 0.9)")
    aic.add_argument("--moe-quant", default="", help="routed experts' precision as the engine runs them, e.g. "
                     "nvfp4, w4a8_mxfp4_mxfp8_trtllm, fp8_block (default: the checkpoint's, as the engine runs it)")
    aic.add_argument("--moe-backend", default="", choices=("", "megamoe"),
                     help="the engine's MoE backend where not its default (megamoe: SGLang's fused DeepGEMM MegaMoE)")
    aic.add_argument("--drafter-moe", action="store_true", help="the drafter's layers are the target's MoE layers")
    aic.add_argument("--drafter-fuse", type=whole_number, default=0,
                     help="K: a K x hidden -> hidden input projection (MTP eh_proj: 2, Eagle3: 3; default none)")
    p.set_defaults(func=profile)
    DEFAULTS.update({action.dest: action.default for action in p._actions})

    plot = sub.add_parser("profile-plot", help=help_of("profile-plot"))
    plot.add_argument("profiles", nargs="+", help="profile CSV files or builtin:NAME")
    plot.add_argument("--out", required=True, help="PNG to write (an existing one kept unless --force)")
    add_force_arg(plot)
    plot.add_argument("--max-tokens", type=whole_number, help="right end of the token axis")
    plot.add_argument("--context", type=float, help="total KV context for profiles with a context axis")
    plot.add_argument("--scale", choices=("auto", "linear", "log"), default="auto",
                      help="token and time axes: log over more than 1,024 tokens (auto), or as given")
    plot.add_argument("--parts", action="store_true",
                      help="draw each profile's named parts stacked against tokens (files with a parts table)")
    plot.set_defaults(func=profile_plot)


def _torch():
    try:
        # torch is the optional 'profile' extra
        import torch
    except ImportError:
        raise SpecplanError("specplan profile needs torch: pip install 'specplan[profile]'") from None
    return torch


def profile(args: argparse.Namespace) -> int:
    _check_source_options(args)
    if args.source == "aiconfigurator":
        out_file(args.out, args.force)
        return _import_aiconfigurator(args)
    torch = _torch()
    out_file(args.out, args.force)
    if args.threads is None and not args.device.startswith("cuda"):
        args.threads = 1
    threads_before = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return _measure_and_write(args)
    finally:
        torch.set_num_threads(threads_before)


def _measure_and_write(args: argparse.Namespace) -> int:
    # the harness imports torch (the optional 'profile' extra)
    from specplan.hwprofiles.harness import HarnessConfig, run_harness

    cfg = HarnessConfig(
        shape=load_shape(args.model), tokens=parse_tokens(args.tokens), device=args.device,
        dtype=args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32"),
        mode=args.mode, context_tokens=args.context, total_context=_int_list(args.total_context),
        repeats=args.repeats, warmup=args.warmup, rounds=args.rounds, requests=args.requests,
        tokens_per_request=args.tokens_per_request, layers=args.layers, drafter=args.drafter,
        drafter_layers=args.drafter_layers or 1, block_size=args.block_size, markov_rank=args.markov_rank,
        parts=args.parts, seed=args.seed, command=_command_line(args),
    )
    out = Path(args.out)
    t0 = time.perf_counter()
    result = run_harness(cfg, args.name or out.stem, None if args.quiet else print)
    write_profile_csv(result, out)
    if not args.quiet:
        print(f"wrote {out} ({len(result.tokens)} points, {time.perf_counter() - t0:.1f} s)")
    return 0


def _check_source_options(args: argparse.Namespace) -> None:
    """An option of the other source is an error, not silently ignored."""
    other = AIC_ONLY if args.source == "torch" else TORCH_ONLY
    for dest in other:
        if getattr(args, dest) != DEFAULTS.get(dest):
            flag = "--" + dest.replace("_", "-")
            wanted = "aiconfigurator" if args.source == "torch" else "torch"
            raise SpecplanError(f"{flag} applies to --source {wanted}")


def _import_aiconfigurator(args: argparse.Namespace) -> int:
    if not args.system:
        raise SpecplanError("--system is required with --source aiconfigurator (e.g. h200_sxm)")
    if (args.drafter_moe or args.drafter_fuse) and args.drafter_layers is None:
        raise SpecplanError("--drafter-moe and --drafter-fuse describe a drafter: give --drafter-layers N")
    total = _int_list(args.total_context)
    target = AicTarget(args.model, args.system, args.backend,
                       literal_version(args.system, args.backend, args.backend_version), args.tp, args.ep, args.dp,
                       args.moe_quant, args.moe_backend)
    layout = AicLayout(args.tokens_per_request, args.max_tokens, total, args.memory_fraction)
    drafter = None if args.drafter_layers is None else AicDrafter(args.drafter_layers, args.drafter_moe,
                                                                  args.drafter_fuse)
    out = Path(args.out)
    t0 = time.perf_counter()
    result = aic_profile(target, layout, args.name or out.stem, aic_command(target, layout, drafter), drafter)
    write_profile_csv(result, out)
    if not args.quiet:
        rows = 1 if result.context_tokens is None else len(result.context_tokens)
        shape = f"{len(result.tokens)} token counts x {rows} contexts"
        print(f"wrote {out} ({shape}, {time.perf_counter() - t0:.1f} s)")
    return 0


def _command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this measurement (recorded in the file's `source`)."""
    skip = {"func", "quiet", "command", "out", "force", "source", *AIC_ONLY}
    if args.drafter is None:
        skip |= {"drafter_layers", "block_size", "markov_rank"}
    if args.requests is not None:
        skip.add("tokens_per_request")
    parts = ["specplan", "profile"]
    for key, value in vars(args).items():
        if key in skip or value is None or value is False:
            continue
        parts += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return shlex.join(parts)


def _int_list(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise SpecplanError(f"--total-context: expected a comma list of integers, got {text!r}") from None
    if list(values) != sorted(set(values)) or min(values) < 0:
        raise SpecplanError("--total-context: values must be non-negative, ascending and distinct")
    return values


def profile_plot(args: argparse.Namespace) -> int:
    profiles = [load_profile(spec) for spec in args.profiles]
    out_file(args.out, args.force)
    if args.parts:
        out = save_parts_plot(profiles, args.out, args.max_tokens, args.context, args.scale)
    else:
        out = save_profile_plot(profiles, args.out, args.max_tokens, args.context, args.scale)
    print(f"wrote {out}")
    return 0
