"""A captured eager/graph pair and its launch figures, read back and set beside the public ones.

benchmarks/profile_gpu.py captures one step twice on the same GPU, in the same shape, dtype,
layout and context (Llama-3.1-8B, bf16, B tokens over ceil(B / 4) requests of 1,024 cached
tokens), and a third file of launch figures:

    GPU-llama3.1-8b-torch-eager.csv      the eager step at the graph's buckets and the tile edges
    GPU-llama3.1-8b-torch-cudagraph.csv  the step replayed from one CUDA graph per bucket (a staircase)
    GPU-llama3.1-8b-torch-launch.json    per token count: the kernels one eager step launches
                                         (torch.profiler), their summed device time, the step's host
                                         issue time; and the host µs of one launch of a trivial kernel
                                         (eager, and its device µs inside one CUDA graph)

`read_pair` loads them and refuses, in one line, files that are not the same step (model, dtype,
device, context, layout, timed layers) or not eager and graph. `report` gives the eager/graph
ratio per token count (beyond a bucket, the graph's padded step: what an engine replaying those
buckets pays), the kernels per step, the µs per launch and the launch-bound time kernels x µs per
launch; it holds the rule an eager step costs the larger of its kernels' time and its launch time,
max(graph, launch-bound), against the measured eager step; and it prints the captured figures
beside the public ones (PUBLIC, each with its source) that eager pricing takes today.

    .venv/bin/python benchmarks/eager_graph.py --gpu h200        # the committed files in hwprofiles/data
    .venv/bin/python benchmarks/eager_graph.py --launch L.json --eager E.csv --graph G.csv

profile_gpu.py prints the same report at the end of its run (without a graph curve on a CPU).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.fileformat import DATA_DIR, read_profile_csv
from specplan.hwprofiles.profile import StepProfile

LAUNCH_FORMAT = "specplan-launch/1"
STEP_COLUMNS = ("tokens", "kernels", "copies", "launch_calls", "kernel_busy_ms", "host_issue_ms", "step_ms",
                "launch_bound_ms")
PER_LAUNCH = ("op", "launches", "rounds", "eager_host_us", "eager_device_us", "graph_device_us",
              "graph_replay_host_us")
# provenance lines that must agree for two files to be the same step (as the harness writes them)
SAME_STEP = ("model", "dtype", "device", "batch_layout", "context_per_request", "tokens_per_request", "usage")
SAME_CURVE = ("layers_timed",)  # and, between the two curves, the same timed depth


@dataclass(frozen=True)
class PublicFigure:
    """A published figure eager pricing can take, with where it was published."""

    figure: str
    value: str
    source: str


PUBLIC = (
    PublicFigure("kernels per eager decode step",
                 "12,508 (DeepSeek-V4-Flash, TP4, one token: 291 per layer of 43); 8,412 after fusing "
                 "launch-bound regions (196 per layer)",
                 "gty111/gLLM PR #264 (Support DeepSeek V4), its Performance section"),
    PublicFigure("device time per kernel", "38.3 ms / 12,508 = 3.06 µs; 22.7 ms / 8,412 = 2.70 µs after fusion",
                 "gty111/gLLM PR #264 (GPU time of the step)"),
    PublicFigure("host time per launch",
                 "3.0 µs (raw cuLaunchKernel of a no-op Triton kernel, 0 args) to 3.3 µs (19 args); "
                 "4.7-5.6 µs through Triton's launcher, 6.8-9.1 µs through Inductor's (GB200)",
                 "meta-pytorch/tritonbench PR #1017 (Profile inductor launch overhead), its per-kernel table"),
    PublicFigure("launch-bound time of one step", "12,508 x 3.0 µs = 37.5 ms (against 38.3 ms of GPU time)",
                 "derived: gLLM PR #264's count at tritonbench PR #1017's raw launch"),
    PublicFigure("eager / graph step",
                 "~240 ms / 97.5 ms TPOT = x2.46 (DeepSeek-V4, one request, TP8 on 8x RTX PRO 6000, SM120)",
                 "sgl-project/sglang PR #24047 (SM120 support for DeepSeek-V4), 'Step 9: CUDA Graph Compatibility'"),
    PublicFigure("what an eager step pays on top of its graph",
                 "2.0 ms: ~400 launches x ~5 µs (assumed, not measured)",
                 "specplan today: engine.cuda_graph.eager_overhead_ms (simulator/engine/price/graphs.py)"),
)


@dataclass(frozen=True)
class Launches:
    """One launch-figures file: per token count (`steps` columns) and per launch (`per_launch`)."""

    name: str
    provenance: dict[str, str]
    per_launch: dict[str, Any]
    steps: dict[str, np.ndarray]

    @property
    def tokens(self) -> np.ndarray:
        return self.steps["tokens"].astype(np.int64)

    @property
    def launch_bound_ms(self) -> np.ndarray:
        """Kernels per step x the host's µs per launch, in ms."""
        return self.steps["kernels"] * float(self.per_launch["eager_host_us"]) / 1e3


@dataclass(frozen=True)
class Pair:
    """A launch file and, where captured, its eager and CUDA-graph curves of the same step."""

    launch: Launches
    eager: StepProfile | None = None
    graph: StepProfile | None = None

    @property
    def layers(self) -> int | None:
        found = re.search(r"\blayers (\d+)", self.launch.provenance.get("model", ""))
        return int(found.group(1)) if found else None

    def ratios(self) -> dict[str, np.ndarray]:
        """Per eager token count up to the graph's largest bucket: eager ms, graph ms, the bucket, eager/graph."""
        if self.eager is None or self.graph is None:
            raise ProfileError("eager/graph ratio: both curves are needed")
        buckets = graph_buckets(self.graph)
        tokens = self.eager.tokens[self.eager.tokens <= buckets[-1]]
        eager, graph = self.eager.step_ms(tokens), self.graph.step_ms(tokens)
        bucket = buckets[np.searchsorted(buckets, tokens)]
        return {"tokens": tokens, "eager_ms": eager, "graph_ms": graph, "bucket": bucket, "ratio": eager / graph}


def read_launches(path: str | Path) -> Launches:
    """A launch-figures file (profile_gpu.py's NAME.json); every problem is one line naming the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read launch figures ({exc.__class__.__name__})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}: not a launch-figures file (not JSON: line {exc.lineno})") from None
    if not isinstance(document, dict) or document.get("format") != LAUNCH_FORMAT:
        raise ProfileError(f"{path}: not a launch-figures file (format {LAUNCH_FORMAT} expected)")
    steps, per_launch = document.get("steps", {}), document.get("per_launch", {})
    missing = [k for k in STEP_COLUMNS if k not in steps] + [k for k in PER_LAUNCH if k not in per_launch]
    if missing:
        raise ProfileError(f"{path}: missing {', '.join(missing)}")
    columns = {k: np.asarray(steps[k], dtype=float) for k in STEP_COLUMNS}
    if len({c.size for c in columns.values()}) != 1 or columns["tokens"].size == 0:
        raise ProfileError(f"{path}: the step columns must be non-empty and of one length")
    if not float(per_launch["eager_host_us"]) > 0:
        raise ProfileError(f"{path}: eager_host_us must be positive")
    return Launches(str(document.get("name", path.stem)), dict(document.get("provenance", {})), per_launch, columns)


def read_pair(launch: str | Path, eager: str | Path | None = None, graph: str | Path | None = None) -> Pair:
    """The launch figures and the curves given, checked to be one step eager and replayed (one-line error)."""
    pair = Pair(read_launches(launch), read_profile_csv(eager) if eager else None,
                read_profile_csv(graph) if graph else None)
    check_modes(pair)
    files = [(role, curve.provenance) for role, curve in (("eager", pair.eager), ("graph", pair.graph)) if curve]
    for role, prov in files:
        differs(SAME_STEP, ("launch", pair.launch.provenance), (role, prov))
    if len(files) == 2:
        differs(SAME_CURVE, *files)
    return pair


def differs(keys: tuple[str, ...], first: tuple[str, dict[str, str]], second: tuple[str, dict[str, str]]) -> None:
    """A one-line error at the first provenance line of `keys` on which two files disagree."""
    for key in keys:
        if first[1].get(key) != second[1].get(key):
            raise ProfileError(f"not one eager/graph pair: {key} differs, {first[0]} {first[1].get(key)!r}, "
                               f"{second[0]} {second[1].get(key)!r}")


def check_modes(pair: Pair) -> None:
    modes = {"eager": pair.eager, "cudagraph": pair.graph}
    for mode, curve in modes.items():
        if curve is not None and not curve.provenance.get("capture_mode", "").startswith(mode):
            raise ProfileError(f"not one eager/graph pair: {curve.name} was captured "
                               f"{curve.provenance.get('capture_mode', 'without a capture_mode line')!r}, not {mode}")


def graph_buckets(graph: StepProfile) -> np.ndarray:
    if "buckets" not in graph.provenance:
        raise ProfileError(f"{graph.name}: no 'buckets' line in its header (a CUDA-graph capture writes one)")
    return np.array([int(b) for b in graph.provenance["buckets"].split()])


# --- the report -------------------------------------------------------------------------------------


def report(pair: Pair) -> str:
    """The pair's figures and the public ones side by side, as markdown."""
    launch = pair.launch
    lines = [f"## {launch.name.removesuffix('-launch')}: an eager step against its CUDA-graph replay, and a launch",
             "", f"device: {launch.provenance.get('device', '?')}; torch {launch.provenance.get('torch', '?')}; "
             f"{launch.provenance.get('model', '?')}; {launch.provenance.get('batch_layout', '?')}",
             f"one launch ({launch.per_launch['op']}, {launch.per_launch['launches']} back to back): "
             f"{per_launch_text(launch.per_launch)}", ""]
    if pair.eager is not None and pair.graph is not None:
        lines += [ratio_table(pair), ""]
    else:
        lines += ["eager/graph: " + ("no graph curve" if pair.eager is not None else "no eager curve")
                  + " beside these launch figures", ""]
    lines += [launch_table(pair), "", "### Beside the public figures", "", side_by_side(pair)]
    return "\n".join(lines)


def per_launch_text(per_launch: dict[str, Any]) -> str:
    text = f"{per_launch['eager_host_us']:.2f} µs of host time eager"
    if per_launch.get("graph_device_us") is not None:
        text += (f"; {per_launch['eager_device_us']:.2f} µs of device time per kernel eager, "
                 f"{per_launch['graph_device_us']:.2f} µs inside one CUDA graph "
                 f"(one replay call: {per_launch['graph_replay_host_us']:.0f} µs of host time)")
    return text


def ratio_table(pair: Pair) -> str:
    r = pair.ratios()
    rows = ["| B | eager ms | graph ms (bucket) | eager/graph |", "|---|---|---|---|"]
    for i, b in enumerate(r["tokens"]):
        padded = "" if r["bucket"][i] == b else f" ({r['bucket'][i]})"
        rows.append(f"| {b} | {r['eager_ms'][i]:.3f} | {r['graph_ms'][i]:.3f}{padded} | {r['ratio'][i]:.2f} |")
    at = r["tokens"] == r["bucket"]
    rows.append(f"\neager/graph at the buckets: median {np.median(r['ratio'][at]):.2f}, at B = {r['tokens'][0]} "
                f"{r['ratio'][0]:.2f}, at B = {r['tokens'][at][-1]} {r['ratio'][at][-1]:.2f}, "
                f"range {r['ratio'][at].min():.2f} to {r['ratio'][at].max():.2f}")
    return "\n".join(rows)


def launch_table(pair: Pair) -> str:
    """Per counted token count: kernels, launch-bound time, host issue time; the max rule where both curves are."""
    launch, steps = pair.launch, pair.launch.steps
    us = float(launch.per_launch["eager_host_us"])
    rule = pair.eager is not None and pair.graph is not None
    head = (f"| B | kernels | copies | launch-bound ms (x {us:.2f} µs) | host issue ms | kernel busy ms "
            "| eager step ms (this capture) |" + (" graph ms | max(graph, launch-bound) / eager |" if rule else ""))
    rows = [head, "|---" * (7 + 2 * rule) + "|"]
    for i, b in enumerate(launch.tokens):
        cells = [f"{int(steps['kernels'][i]):,}", f"{int(steps['copies'][i])}", f"{launch.launch_bound_ms[i]:.3f}",
                 f"{steps['host_issue_ms'][i]:.3f}", f"{steps['kernel_busy_ms'][i]:.3f}", f"{steps['step_ms'][i]:.3f}"]
        if rule:
            assert pair.eager is not None and pair.graph is not None
            graph, eager = float(pair.graph.step_ms(b)), float(pair.eager.step_ms(b))
            cells += [f"{graph:.3f}", f"{max(graph, launch.launch_bound_ms[i]) / eager:.2f}"]
        rows.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def side_by_side(pair: Pair) -> str:
    """Each public figure beside what this capture measured of the same thing."""
    rows = ["| figure | captured here | public | source |", "|---|---|---|---|"]
    rows += [f"| {p.figure} | {captured(pair, p.figure)} | {p.value} | {p.source} |" for p in PUBLIC]
    return "\n".join(rows)


def captured(pair: Pair, figure: str) -> str:
    """This capture's own figure for one row of PUBLIC (at its smallest token count, where per step)."""
    launch, steps = pair.launch, pair.launch.steps
    b, kernels = int(launch.tokens[0]), int(steps["kernels"][0])
    per_layer = f": {kernels / pair.layers:.0f} per layer of {pair.layers}" if pair.layers else ""
    both = pair.eager is not None and pair.graph is not None
    extra_ms = float(pair.eager.step_ms(b) - pair.graph.step_ms(b)) if pair.eager and pair.graph else 0.0
    return {
        "kernels per eager decode step": f"{kernels:,} at B = {b}{per_layer}",
        "device time per kernel": f"{steps['kernel_busy_ms'][0] / kernels * 1e3:.2f} µs at B = {b}",
        "host time per launch": f"{launch.per_launch['eager_host_us']:.2f} µs ({launch.per_launch['op']}, eager torch)",
        "launch-bound time of one step": (f"{kernels:,} x {launch.per_launch['eager_host_us']:.2f} µs = "
                                          f"{launch.launch_bound_ms[0]:.2f} ms (host issue measured: "
                                          f"{steps['host_issue_ms'][0]:.2f} ms) at B = {b}"),
        "eager / graph step": f"x{pair.ratios()['ratio'][0]:.2f} at B = {b}" if both else "no pair",
        "what an eager step pays on top of its graph": f"{extra_ms:.2f} ms at B = {b}" if both else "no pair",
    }[figure]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--gpu", help="read hwprofiles/data/GPU-llama3.1-8b-torch-{launch.json,eager.csv,cudagraph.csv}")
    parser.add_argument("--launch", help="launch figures (profile_gpu.py's NAME-launch.json)")
    parser.add_argument("--eager", help="the eager curve (CSV)")
    parser.add_argument("--graph", help="the CUDA-graph curve (CSV)")
    args = parser.parse_args()
    if args.gpu:
        stem = DATA_DIR / f"{args.gpu}-llama3.1-8b-torch"
        files = (f"{stem}-launch.json", f"{stem}-eager.csv", f"{stem}-cudagraph.csv")
    elif args.launch and args.eager and args.graph:
        files = (args.launch, args.eager, args.graph)
    else:
        parser.error("give --gpu, or all of --launch, --eager and --graph")
    try:
        print(report(read_pair(*files)))
    except ProfileError as exc:
        print(f"eager_graph: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
