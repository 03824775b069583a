"""A planned deployment → the engine launch configuration that serves it (vLLM, SGLang, TensorRT-LLM).

    launch = launch_config(scenario, provenance)        # the winner at its planned size
    launch.vllm()     a `vllm serve` command per pool (one line per replica kind)
    launch.sglang()   `python -m sglang.launch_server` per pool
    launch.trtllm()   TensorRT-LLM LLM-API YAML with draft_len_schedule (a `length-schedule` policy only)

What is read: the model and the parallelism (TP / EP / DP) from the decode
profile's provenance (`model:`, `parallelism:` lines of a built-in), the
batch limit (`engine.max_batch_requests`), the serving mode (chunked prefill
chunk size; a prefill pool's replica count), the prefix cache, and the
speculation: the drafter family and its verified length (`params.length`
of a fixed-length policy, else the drafter's block size).

Flags, as the engines' own argument parsers spell them:

    vLLM    --tensor-parallel-size, --data-parallel-size, --enable-expert-parallel,
            --max-num-seqs, --max-num-batched-tokens, --enable-prefix-caching /
            --no-enable-prefix-caching, --kv-transfer-config (NixlConnector, kv_both),
            --speculative-config JSON {method: mtp | eagle3 | dflash | dspark, model,
            num_speculative_tokens, enable_adaptive_verification, num_speculative_tokens_per_batch_size}
    SGLang  --tp-size, --dp-size, --enable-dp-attention, --ep-size, --max-running-requests,
            --chunked-prefill-size, --disable-radix-cache, --disaggregation-mode prefill | decode,
            --speculative-algorithm NEXTN | EAGLE3 | DFLASH | DSPARK, --speculative-draft-model-path,
            --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens,
            --speculative-dspark-block-size
    TRT-LLM speculative_config: {max_draft_len, draft_len_schedule} (as `specplan tune` exports it)

The planned policy, where an engine runs it (`ENGINE_POLICY` says which, and
each script says which version has the flag):

- DSpark's confidence scheduling (dspark-async, and the synchronous
  dspark-greedy / dspark-global, which no engine runs: they are served by
  the same scheduler): vLLM `method: dspark` (vllm-project/vllm #46995, in
  vLLM 0.25) with `enable_adaptive_verification: true` (#47808, merged
  after v0.26.0: B sized ahead of the step from lagged confidences and a
  profiled step-cost table, then a global top-B over current prefix
  survivals, as dspark-async plans with its two-step lag). SGLang serves the DSpark drafter (`--speculative-algorithm
  DSPARK`, `--speculative-dspark-block-size`; sgl-project/sglang #30261,
  which followed #29538) and verifies its whole block unless its own
  confidence scheduler is configured, which these lines do not do.
- A per-batch-size length schedule (length-schedule): vLLM's
  `num_speculative_tokens_per_batch_size` ([first, last, k] inclusive
  batch-size ranges; #32374, vLLM 0.24) and TensorRT-LLM's
  `draft_len_schedule`; SGLang has none (its line serves the first length).
- Fixed lengths (mtp-1, static, none): every engine.
- threshold, goodput and oracle have no engine flag: served at a fixed
  length, said in a comment (the oracle is an upper bound, not a deployment).

A drafter checkpoint is the user's (`$DRAFT_MODEL`): specplan simulates
acceptance, not weights.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from specplan.policies.schedule import LengthSchedule
from specplan.simulator.scenario import Scenario

SCHEDULE_POLICY = LengthSchedule.name
VLLM_METHOD = {"mtp": "mtp", "eagle3": "eagle3", "dflash": "dflash", "dspark": "dspark"}
SGLANG_ALGORITHM = {"mtp": "NEXTN", "eagle3": "EAGLE3", "dflash": "DFLASH", "dspark": "DSPARK"}
CONFIDENCE_SCHEDULED = ("dspark-async", "dspark-greedy", "dspark-global")
FIXED_LENGTH = ("none", "mtp-1", "static")
NEEDS_DRAFT_MODEL = ("eagle3", "dflash", "dspark")
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    ep: int = 1
    dp: int = 1


def parallelism(text: str | None) -> Parallelism:
    """'TP1 EP8 DP8 (8 GPUs)' → Parallelism(1, 8, 8); missing → TP1 EP1 DP1."""
    found = {k: int(v) for k, v in re.findall(r"\b(TP|EP|DP)(\d+)\b", text or "")}
    return Parallelism(found.get("TP", 1), found.get("EP", 1), found.get("DP", 1))


def model_id(text: str | None) -> str | None:
    """The checkpoint id a provenance `model:` line starts with ('meta-llama/Meta-Llama-3.1-8B (32 layers…')."""
    first = (text or "").split(" ", 1)[0].strip()
    return first or None


@dataclass(frozen=True)
class LaunchConfig:
    """Everything a launch line needs, read from a resolved scenario and its decode profile's provenance."""

    model: str | None
    parallel: Parallelism
    max_batch_requests: int
    chunk_tokens: int | None
    prefix_cache: bool
    decode_replicas: int
    prefill_replicas: int
    prefill_parallel: Parallelism
    family: str
    length: int
    policy: str
    schedule: dict[int, int] | None

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas > 0

    @property
    def speculates(self) -> bool:
        return self.family != "none" and self.length > 0

    def vllm_args(self, role: str) -> list[str]:
        """`vllm serve` arguments for one replica of `role` ('aggregated', 'prefill' or 'decode')."""
        par = self.prefill_parallel if role == "prefill" else self.parallel
        args = ["vllm", "serve", self.model or "$MODEL", "--tensor-parallel-size", str(par.tp)]
        if par.dp > 1:
            args += ["--data-parallel-size", str(par.dp)]
        if par.ep > 1:
            args.append("--enable-expert-parallel")
        args += ["--max-num-seqs", str(self.max_batch_requests)]
        if self.chunk_tokens is not None and role == "aggregated":
            args += ["--max-num-batched-tokens", str(self.chunk_tokens)]
        args.append("--enable-prefix-caching" if self.prefix_cache else "--no-enable-prefix-caching")
        if role != "aggregated":
            args += ["--kv-transfer-config", json.dumps(NIXL)]
        if self.speculates and role != "prefill":
            args += ["--speculative-config", json.dumps(self.vllm_speculative_config())]
        return args

    def vllm_speculative_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"method": VLLM_METHOD[self.family]}
        if self.family in NEEDS_DRAFT_MODEL:
            config["model"] = "$DRAFT_MODEL"
        config["num_speculative_tokens"] = self.length
        if self.family == "dspark" and self.policy in CONFIDENCE_SCHEDULED:
            config["enable_adaptive_verification"] = True
        if self.schedule is not None:
            config["num_speculative_tokens"] = max(self.schedule.values())
            config["num_speculative_tokens_per_batch_size"] = batch_size_ranges(self.schedule,
                                                                                self.max_batch_requests)
        return config

    def sglang_args(self, role: str) -> list[str]:
        """`python -m sglang.launch_server` arguments for one replica of `role`."""
        par = self.prefill_parallel if role == "prefill" else self.parallel
        args = ["python", "-m", "sglang.launch_server", "--model-path", self.model or "$MODEL",
                "--tp-size", str(par.tp)]
        if par.dp > 1:
            args += ["--dp-size", str(par.dp), "--enable-dp-attention"]
        if par.ep > 1:
            args += ["--ep-size", str(par.ep)]
        args += ["--max-running-requests", str(self.max_batch_requests)]
        if self.chunk_tokens is not None and role == "aggregated":
            args += ["--chunked-prefill-size", str(self.chunk_tokens)]
        if not self.prefix_cache:
            args.append("--disable-radix-cache")
        if role != "aggregated":
            args += ["--disaggregation-mode", role]
        if self.speculates and role != "prefill":
            args += self.sglang_speculative_args()
        return args

    def sglang_speculative_args(self) -> list[str]:
        args = ["--speculative-algorithm", SGLANG_ALGORITHM[self.family]]
        if self.family in NEEDS_DRAFT_MODEL:
            args += ["--speculative-draft-model-path", "$DRAFT_MODEL"]
        if self.family == "dspark":  # SGLang derives the verify window (block + 1) from the block size
            return [*args, "--speculative-dspark-block-size", str(self.length)]
        if self.family in ("mtp", "eagle3"):  # a chain: one draft per step, topk 1, steps + 1 tokens verified
            args += ["--speculative-num-steps", str(self.length), "--speculative-eagle-topk", "1"]
        args += ["--speculative-num-draft-tokens", str(self.length + 1 if self.family in ("mtp", "eagle3")
                                                         else self.length)]
        return args

    def roles(self) -> list[tuple[str, int]]:
        """(role, replicas) of the deployment: one aggregated pool, or prefill then decode."""
        if self.disaggregated:
            return [("prefill", self.prefill_replicas), ("decode", self.decode_replicas)]
        return [("aggregated", self.decode_replicas)]

    def script(self, engine: str) -> str:
        """A shell script: one launch line per pool, each preceded by how many replicas to start."""
        build = self.vllm_args if engine == "vllm" else self.sglang_args
        lines = ["#!/bin/sh", f"# {engine} launch lines for the deployment specplan planned (one line per pool; "
                 "start that many replicas, one per line's GPUs).", *self.notes(engine)]
        if self.model is None:
            lines.append('MODEL="${MODEL:?set MODEL to the served checkpoint}"')
        if self.speculates and self.family in NEEDS_DRAFT_MODEL:
            lines.append('DRAFT_MODEL="${DRAFT_MODEL:?set DRAFT_MODEL to the drafter checkpoint}"')
        for role, count in self.roles():
            gpus = (self.prefill_parallel if role == "prefill" else self.parallel)
            lines.append(f"# {role}: {count} replica(s) x {gpus.tp * gpus.dp} GPU(s) (TP{gpus.tp} EP{gpus.ep} "
                         f"DP{gpus.dp})")
            lines.append(shell_line(build(role)))
        return "\n".join(lines) + "\n"

    def notes(self, engine: str) -> list[str]:
        """Comment lines: how the planned policy runs on `engine` (which version has its flag), or that it
        does not and what the line serves instead."""
        notes = [f"# {line}" for line in policy_notes(engine, self.policy, self.family, self.length)]
        if self.family == "mtp":
            notes.append("# MTP needs a checkpoint with MTP layers (vLLM method 'mtp', SGLang NEXTN); for a model "
                         "without them use an EAGLE-3 head of one layer (the drafter profile priced here).")
        return notes

    def trtllm(self) -> dict[str, Any] | None:
        """TensorRT-LLM's speculative_config for a `length-schedule` policy (None for any other policy)."""
        return None if self.schedule is None else trtllm_speculative_config(self.schedule)


def shell_line(args: list[str]) -> str:
    """Quote for sh, leaving $MODEL / $DRAFT_MODEL to expand (a JSON argument keeps its quotes)."""
    out = []
    for arg in args:
        if arg.startswith("$") and re.fullmatch(r"\$[A-Z_]+", arg):
            out.append(f'"{arg}"')
        elif "$DRAFT_MODEL" in arg:
            head, tail = arg.split("$DRAFT_MODEL", 1)
            out.append(shlex.quote(head) + '"$DRAFT_MODEL"' + shlex.quote(tail))
        else:
            out.append(shlex.quote(arg))
    return " ".join(out)


def policy_notes(engine: str, policy: str, family: str, length: int) -> list[str]:
    """How `engine` runs `policy` (the module docstring's table, as the lines a launch script carries)."""
    if family == "none" or policy in FIXED_LENGTH:
        return []
    if policy in CONFIDENCE_SCHEDULED:
        return dspark_notes(engine, policy, length)
    if policy == SCHEDULE_POLICY:
        if engine == "vllm":
            return ["the length schedule runs as num_speculative_tokens_per_batch_size (vLLM >= 0.24, PR #32374)."]
        return [f"SGLang has no per-batch-size length table: this serves the schedule's first length ({length}); "
                "the plan's figures assume the schedule (vLLM and TensorRT-LLM run it)."]
    what = "an upper bound, not a deployment" if policy == "oracle" else "no flag in vLLM or SGLang"
    return [f"policy {policy} has {what}: this serves a fixed {length} tokens; the plan's figures assume {policy}."]


def dspark_notes(engine: str, policy: str, length: int) -> list[str]:
    """DSpark's confidence scheduling on vLLM (adaptive verification) and on SGLang (its drafter only)."""
    plans = "" if policy == "dspark-async" else (f" (specplan planned {policy}; vLLM's scheduler plans as "
                                                  "dspark-async does)")
    if engine == "vllm":
        return ["DSpark: method 'dspark' since vLLM 0.25 (PR #46995); enable_adaptive_verification runs its "
                "confidence-scheduled verification" + plans + " (PR #47808, merged after v0.26.0: use a later "
                "release or a main build; it needs CUDA graphs, not --enforce-eager)."]
    return [f"DSpark: SGLang's DSPARK algorithm (sgl-project/sglang #30261) drafts blocks of {length} and verifies "
            "them whole unless its own confidence scheduler is configured, which this line does not do; "
            f"the plan's figures assume {policy}."]


def batch_size_ranges(schedule: dict[int, int], max_batch: int) -> list[list[int]]:
    """{batch-size upper bound: length} → vLLM's [first, last, length] inclusive ranges, speculation off
    (length 0) above the last bound up to the batch limit."""
    ranges, first = [], 1
    for bound in sorted(schedule):
        ranges.append([first, bound, schedule[bound]])
        first = bound + 1
    if first <= max_batch:
        ranges.append([first, max_batch, 0])
    return ranges


def trtllm_speculative_config(schedule: dict[int, int]) -> dict[str, Any]:
    """max_draft_len = the first (smallest batch bound's, largest) length; the schedule as given."""
    first = schedule[min(schedule)]
    if first == 0:
        return {"speculative_config": None}
    return {"speculative_config": {"max_draft_len": first, "draft_len_schedule": dict(schedule)}}


def verified_length(scenario: Scenario) -> int:
    """Draft tokens a step verifies: a fixed-length policy's `length`, else the drafter's block size."""
    if scenario.drafter.family == "none":
        return 0
    length = scenario.policy.params.get("length") if isinstance(scenario.policy.params, dict) else None
    return int(length) if isinstance(length, int | float) else int(scenario.drafter.block_size)


def launch_config(scenario: Scenario, provenance: dict[str, str],
                  prefill_provenance: dict[str, str] | None = None) -> LaunchConfig:
    """The launch facts of a resolved scenario (its decode profile's provenance gives model and parallelism)."""
    pool = scenario.cluster.prefill
    prefill = scenario.engine.prefill
    params = scenario.policy.params if isinstance(scenario.policy.params, dict) else {}
    schedule = ({int(k): int(v) for k, v in params["schedule"].items()}
                if scenario.policy.name == SCHEDULE_POLICY and "schedule" in params else None)
    return LaunchConfig(
        model=model_id(provenance.get("model")), parallel=parallelism(provenance.get("parallelism")),
        max_batch_requests=scenario.engine.max_batch_requests,
        chunk_tokens=getattr(prefill, "chunk_tokens", None) if prefill.KIND == "chunked" else None,
        prefix_cache=(scenario.engine.prefix_cache is not None) or (pool is not None and pool.prefix_cache is not None),
        decode_replicas=scenario.cluster.replicas, prefill_replicas=pool.replicas if pool is not None else 0,
        prefill_parallel=parallelism((prefill_provenance or provenance).get("parallelism")),
        family=scenario.drafter.family, length=verified_length(scenario), policy=scenario.policy.name,
        schedule=schedule)


def launch_files(launch: LaunchConfig) -> dict[str, str]:
    """File name → text: launch-vllm.sh, launch-sglang.sh, and trtllm.yaml for a length-schedule policy."""
    files = {"launch-vllm.sh": launch.script("vllm"), "launch-sglang.sh": launch.script("sglang")}
    trt = launch.trtllm()
    if trt is not None:
        files["trtllm.yaml"] = ("# TensorRT-LLM LLM API options (trtllm-serve --extra_llm_api_options FILE).\n"
                                "# draft_len_schedule: {batch-size upper bound: draft length}.\n"
                                + yaml.safe_dump(trt, sort_keys=False))
    return files
