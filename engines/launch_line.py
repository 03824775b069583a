"""A serving engine's launch line read into a deployment scenario: the inverse of the engines' launchers.

Place: an engine habit (how its launch line spells a deployment), so it lives with the rows; `specplan fit
--launch` calls it.

    scenario_of_launch("vllm serve MODEL --max-num-seqs 256 ...", profile="builtin:h200-llama3.1-8b-vllm")
        -> (a scenario mapping, the flags read, the flags not modelled)

The line names the engine (`vllm serve` or `python -m sglang.launch_server`); the GPU does not appear in it, so
the step-time profile is given beside it (`--profile`), and the engine's version is the profile's unless given.
Flags, as the engines' argument parsers spell them (specplan.engines.launch lists the same for the other
direction):

    vLLM    --tensor-parallel-size / -tp, --data-parallel-size / -dp (with --enable-expert-parallel: DP
            attention over DP ranks), --max-num-seqs (per DP rank), --max-num-batched-tokens (the step's
            budget and the chunk), --gpu-memory-utilization, --max-cudagraph-capture-size,
            --enforce-eager (no decode graph), --enable-prefix-caching / --no-enable-prefix-caching,
            --speculative-config JSON {method, num_speculative_tokens}
    SGLang  --tp-size / --tp, --dp-size / --dp with --enable-dp-attention, --max-running-requests,
            --chunked-prefill-size, --mem-fraction-static, --cuda-graph-max-bs, --disable-cuda-graph,
            --speculative-algorithm NEXTN | EAGLE | EAGLE3 | DFLASH | DSPARK with --speculative-num-steps,
            --speculative-num-draft-tokens or --speculative-dspark-block-size

Flags that do not change a step's price (--host, --port, --model, --trust-remote-code, ...) are read and named
as not modelled; a speculating line needs the drafter's acceptance from the runs' scrapes (`--metrics`) or a
`--set drafter.acceptance...` (a launch line does not say how often drafts are accepted).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specplan.engines.sglang import ALGORITHM
from specplan.engines.vllm import METHOD
from specplan.errors import SpecplanError

SGLANG_FAMILY = {**{v: k for k, v in ALGORITHM.items()}, "EAGLE": "eagle3"}
VLLM_FAMILY = {**{v: k for k, v in METHOD.items()}, "deepseek_mtp": "mtp", "eagle": "eagle3"}
SWITCHES = {"--enable-expert-parallel", "--enable-dp-attention", "--enforce-eager", "--disable-cuda-graph",
            "--enable-prefix-caching", "--no-enable-prefix-caching", "--disable-radix-cache", "--trust-remote-code"}


class LaunchLineError(SpecplanError):
    """A launch line that cannot be read as vllm serve or sglang.launch_server arguments."""


def engine_and_flags(line: str) -> tuple[str, str | None, dict[str, str | bool]]:
    """('vllm' | 'sglang', the model, {flag: value or True})."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise LaunchLineError(f"--launch: cannot split the line ({exc})") from None
    if words[:2] == ["vllm", "serve"]:
        engine, rest = "vllm", words[2:]
    elif "sglang.launch_server" in words:
        engine, rest = "sglang", words[words.index("sglang.launch_server") + 1:]
    else:
        raise LaunchLineError("--launch: expected 'vllm serve MODEL ...' or 'python -m sglang.launch_server ...'")
    model = None
    if engine == "vllm" and rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
    flags: dict[str, str | bool] = {}
    i = 0
    while i < len(rest):
        word = rest[i]
        if not word.startswith("-"):
            raise LaunchLineError(f"--launch: '{word}' follows no flag")
        name, eq, value = word.partition("=")
        if eq:
            flags[name] = value
        elif name in SWITCHES or i + 1 == len(rest) or rest[i + 1].startswith("--"):
            flags[name] = True
        else:
            flags[name] = rest[i + 1]
            i += 1
        i += 1
    return engine, model or str(flags.get("--model-path") or flags.get("--model") or "") or None, flags


def whole(flags: dict[str, str | bool], *names: str) -> int | None:
    for name in names:
        if name in flags:
            value = flags[name]
            try:
                return int(str(value))
            except ValueError:
                raise LaunchLineError(f"--launch: {name} {value}: expected a whole number") from None
    return None


def fraction(flags: dict[str, str | bool], name: str) -> float | None:
    if name not in flags:
        return None
    try:
        return float(str(flags[name]))
    except ValueError:
        raise LaunchLineError(f"--launch: {name} {flags[name]}: expected a number") from None


def scenario_of_launch(line: str, profile: str, version: str | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    """The scenario mapping a launch line spells (with `profile`), the flags read and those not modelled."""
    engine, model, flags = engine_and_flags(line)
    engine_block, gpus, drafter, used = engine_of_flags(engine, flags)
    engine_block = {"name": engine, **({"version": version} if version else {}), **engine_block}
    raw: dict[str, Any] = {"name": f"{engine}-{(model or 'model').split('/')[-1]}", "seed": 1,
                           "horizon": {"requests": 64},
                           "hardware": {"profile": profile, "gpus_per_replica": gpus}, "engine": engine_block,
                           "workload": {"arrivals": {"kind": "bench_client", "num_prompts": 64, "max_concurrency": 16,
                                                     "client": engine},
                                        "prompt_tokens": {"kind": "fixed", "value": 1024},
                                        "output_tokens": {"kind": "fixed", "value": 256}}}
    if drafter:
        raw["drafter"], raw["policy"] = drafter
    ignored = sorted(f for f in flags if f not in used and f not in ("--model-path", "--model"))
    return raw, sorted(used), ignored


Take = Callable[..., "int | None"]   # take(*names): the first named flag's whole number, marked read


@dataclass(frozen=True)
class Spelling:
    """How one engine's launch line spells a deployment: the flag names, and the two parts it reads its own way
    (the batch and prefill caps, the speculation)."""

    tp: tuple[str, ...]
    dp: tuple[str, ...]
    dp_attention: str               # the switch that makes DP ranks attention ranks
    memory: str                     # the GPU memory fraction
    graphs_off: str
    graphs_largest: str
    gpus_per_dp_rank: bool          # a DP rank is its own GPUs (vLLM) or shares the TP group's (SGLang)
    caps: Callable[[Take, int], dict[str, Any]]
    drafter: Callable[[dict[str, str | bool], Take, set[str]], Any]



def vllm_caps(take: Take, dp: int) -> dict[str, Any]:
    block: dict[str, Any] = {"max_batch_requests": (take("--max-num-seqs") or 256) * dp}
    tokens = take("--max-num-batched-tokens")
    if tokens is not None:
        block["max_step_tokens"] = tokens * dp
        block["prefill"] = {"mode": "chunked", "chunk_tokens": tokens}
    return block


def sglang_caps(take: Take, dp: int) -> dict[str, Any]:
    chunk = take("--chunked-prefill-size")
    return {"max_batch_requests": take("--max-running-requests") or "auto",
            "prefill": {"mode": "chunked", "chunk_tokens": chunk if chunk and chunk > 0 else 8192,
                        "schedule": "separate"}}


def vllm_drafter(flags: dict[str, str | bool], take: Take, used: set[str]) -> Any:
    used.update({"--no-enable-prefix-caching", "--enable-prefix-caching"} & set(flags))
    if "--speculative-config" not in flags:
        return None
    used.add("--speculative-config")
    try:
        config = json.loads(str(flags["--speculative-config"]))
    except json.JSONDecodeError:
        raise LaunchLineError("--launch: --speculative-config: not valid JSON") from None
    family = VLLM_FAMILY.get(str(config.get("method", "")))
    length = config.get("num_speculative_tokens")
    if family is None or not isinstance(length, int) or length < 1:
        raise LaunchLineError(f"--launch: --speculative-config {config}: expected a method of "
                              f"{', '.join(VLLM_FAMILY)} and num_speculative_tokens >= 1")
    return speculation(family, length)


def sglang_drafter(flags: dict[str, str | bool], take: Take, used: set[str]) -> Any:
    if "--speculative-algorithm" not in flags:
        return None
    used.add("--speculative-algorithm")
    family = SGLANG_FAMILY.get(str(flags["--speculative-algorithm"]).upper())
    if family is None:
        raise LaunchLineError(f"--launch: --speculative-algorithm {flags['--speculative-algorithm']}: expected "
                              f"one of {', '.join(SGLANG_FAMILY)}")
    length = (take("--speculative-dspark-block-size") if family == "dspark" else None) \
        or take("--speculative-num-steps") or max(1, (take("--speculative-num-draft-tokens") or 2) - 1)
    used.update({"--speculative-num-draft-tokens", "--speculative-eagle-topk",
                 "--speculative-draft-model-path"} & set(flags))
    return speculation(family, length)


SPELLINGS = {
    "vllm": Spelling(("--tensor-parallel-size", "-tp"), ("--data-parallel-size", "-dp"), "--enable-expert-parallel",
                     "--gpu-memory-utilization", "--enforce-eager", "--max-cudagraph-capture-size", True,
                     vllm_caps, vllm_drafter),
    "sglang": Spelling(("--tp-size", "--tp"), ("--dp-size", "--dp"), "--enable-dp-attention", "--mem-fraction-static",
                       "--disable-cuda-graph", "--cuda-graph-max-bs", False, sglang_caps, sglang_drafter),
}


def engine_of_flags(engine: str, flags: dict[str, str | bool]) -> tuple[dict[str, Any], int, Any, set[str]]:
    """(the engine block, GPUs per replica, the drafter and policy or None, the flags read) in `engine`'s spelling."""
    spelling, used = SPELLINGS[engine], set[str]()

    def take(*names: str) -> int | None:
        used.update(n for n in names if n in flags)
        return whole(flags, *names)

    tp, dp = take(*spelling.tp) or 1, take(*spelling.dp) or 1
    block = spelling.caps(take, dp)
    if dp > 1 and spelling.dp_attention in flags:
        used.add(spelling.dp_attention)
        block["dp_attention"] = {"ranks": dp}
    memory = fraction(flags, spelling.memory)
    if memory is not None:
        used.add(spelling.memory)
        block["memory_fraction"] = memory
    block.update(graphs(flags, used, spelling.graphs_off, spelling.graphs_largest, engine))
    drafter = spelling.drafter(flags, take, used)
    return block, tp * dp if spelling.gpus_per_dp_rank else tp, drafter, used


def graphs(flags: dict[str, str | bool], used: set[str], off: str, largest: str, engine: str) -> dict[str, Any]:
    """The decode graphs: none with `off`, else the engine's capture rule up to `largest` where given."""
    if off in flags:
        used.add(off)
        return {}
    size = whole(flags, largest)
    if size is not None:
        used.add(largest)
    return {"cuda_graph": {"engine": engine, **({"max_capture_size": size} if size else {})}}


def speculation(family: str, length: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The drafter and policy a speculating line runs: a fixed length (MTP-1 at one draft)."""
    policy = {"name": "mtp-1"} if family == "mtp" and length == 1 else {"name": "static", "params": {"length": length}}
    return {"family": family, "block_size": length}, policy
