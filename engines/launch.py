"""A planned deployment as launch lines: the facts every engine's launcher reads, and the script around them.

`Deployment` holds what a launch line needs (model, parallelism, batch limit,
serving mode, prefix cache, speculation); specplan.simulator.study.launch
reads it from a resolved scenario and its profile's provenance. Each engine
module spells it with its own flags (`args(deployment, role)`), and
`launch_script` writes one line per pool: prefill then decode when
disaggregated, else one aggregated pool, each preceded by how many replicas
to start. A drafter checkpoint is the user's (`$DRAFT_MODEL`): specplan
simulates acceptance, not weights.

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

The planned policy, where an engine runs it (each script's notes say which
version has the flag):

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
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

NEEDS_DRAFT_MODEL = ("eagle3", "dflash", "dspark")       # families whose drafter is a checkpoint of its own
CONFIDENCE_SCHEDULED = ("dspark-async", "dspark-greedy", "dspark-global")
FIXED_LENGTH = ("none", "mtp-1", "static")
SCHEDULE_POLICY = "length-schedule"


@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    ep: int = 1
    dp: int = 1


def parallelism(text: str | None) -> Parallelism:
    """'TP1 EP8 DP8 (8 GPUs)' → Parallelism(1, 8, 8); missing → TP1 EP1 DP1."""
    found = {k: int(v) for k, v in re.findall(r"\b(TP|EP|DP)(\d+)\b", text or "")}
    return Parallelism(found.get("TP", 1), found.get("EP", 1), found.get("DP", 1))


@dataclass(frozen=True)
class HostTierLaunch:
    """The host KV tier the plan priced (`engine.prefix_cache.host`): its tokens over the GPU prefix cache's
    (`ratio`, per attention rank as per replica), its bytes per replica (`gib`: tokens x the layout's bytes per
    token) and the host link the plan assumed (`gbytes_per_s` per attention rank: hardware, no flag)."""

    ratio: float
    gib: float
    gbytes_per_s: float


@dataclass(frozen=True)
class AllToAllLaunch:
    """The MoE all-to-all the plan priced (`engine.all_to_all`): backend and DeepEP mode."""

    backend: str          # deepep | megamoe
    mode: str             # auto | normal | low_latency


@dataclass(frozen=True)
class Deployment:
    """Everything a launch line needs (read from a resolved scenario by specplan.simulator.study.launch).

    `engine`: the engine whose habits the plan priced (`engine.name` resolved: vllm, sglang, trtllm; none when
    it priced no engine's); `memory_fraction`: the share of GPU memory the plan gave weights and KV
    (summary's engine_mem_fraction_static); `graph_max`: the largest CUDA-graph size the plan captured per
    attention rank (requests under SGLang, tokens under vLLM; None: graphs not modelled)."""

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
    engine: str = "none"
    memory_fraction: float | None = None
    graph_max: int | None = None
    host_tier: HostTierLaunch | None = None
    all_to_all: AllToAllLaunch | None = None
    swa_full_tokens_ratio: float | None = None
    rank_requests: int | None = None   # one DP rank's request slots (vLLM max_num_seqs is per rank)
    rank_chunk_tokens: int | None = None   # one DP rank's prompt chunk (vLLM max_num_batched_tokens is per rank)

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas > 0

    @property
    def speculates(self) -> bool:
        return self.family != "none" and self.length > 0

    def roles(self) -> list[tuple[str, int]]:
        """(role, replicas) of the deployment: one aggregated pool, or prefill then decode."""
        if self.disaggregated:
            return [("prefill", self.prefill_replicas), ("decode", self.decode_replicas)]
        return [("aggregated", self.decode_replicas)]

    def parallel_of(self, role: str) -> Parallelism:
        return self.prefill_parallel if role == "prefill" else self.parallel


def launch_script(deployment: Deployment, label: str, args: Callable[[Deployment, str], list[str]],
                  notes: list[str]) -> str:
    """A shell script: one launch line per pool (`args(deployment, role)`), each preceded by how many replicas
    to start; `notes`: comment lines on how the engine runs the planned policy."""
    lines = ["#!/bin/sh", f"# {label} launch lines for the deployment specplan planned (one line per pool; "
             "start that many replicas, one per line's GPUs).", *(f"# {line}" for line in notes)]
    if deployment.model is None:
        lines.append('MODEL="${MODEL:?set MODEL to the served checkpoint}"')
    if deployment.speculates and deployment.family in NEEDS_DRAFT_MODEL:
        lines.append('DRAFT_MODEL="${DRAFT_MODEL:?set DRAFT_MODEL to the drafter checkpoint}"')
    for role, count in deployment.roles():
        par = deployment.parallel_of(role)
        lines.append(f"# {role}: {count} replica(s) x {par.tp * par.dp} GPU(s) (TP{par.tp} EP{par.ep} DP{par.dp})")
        lines.append(shell_line(args(deployment, role)))
    return "\n".join(lines) + "\n"


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


class ScriptLaunch:
    """An engine started by one launch line per pool (`args(deployment, role)`): its script `launch-<engine>.sh`
    and the notes on how it runs the planned policy. The engine says what it makes of the confidence-scheduled
    policies and of a length schedule (`confidence_note`, `schedule_note`) and what else of the plan its line
    cannot carry (`limits`: one line each); the rest reads the same for every engine that takes a script."""

    def __init__(self, engine: str, args: Callable[[Deployment, str], list[str]],
                 confidence_note: Callable[[Deployment], str], schedule_note: Callable[[Deployment], str],
                 limits: Callable[[Deployment], list[str]] = lambda deployment: []) -> None:
        self.engine, self.args = engine, args
        self.confidence_note, self.schedule_note, self.limits = confidence_note, schedule_note, limits

    def notes(self, deployment: Deployment) -> list[str]:
        return [*self.policy_notes(deployment), *self.limits(deployment), *priced_notes(deployment, self.engine)]

    def policy_notes(self, deployment: Deployment) -> list[str]:
        policy, family = deployment.policy, deployment.family
        notes: list[str] = []
        if family != "none" and policy in CONFIDENCE_SCHEDULED:
            notes.append(self.confidence_note(deployment))
        elif family != "none" and policy == SCHEDULE_POLICY:
            notes.append(self.schedule_note(deployment))
        else:
            notes += fixed_length_note(policy, family, deployment.length, "vLLM or SGLang")
        if family == "mtp":
            notes.append("MTP needs a checkpoint with MTP layers (vLLM method 'mtp', SGLang NEXTN); for a model "
                         "without them use an EAGLE-3 head of one layer (the drafter profile priced here).")
        return notes

    def script(self, deployment: Deployment) -> str:
        return launch_script(deployment, self.engine, self.args, self.notes(deployment))

    def files(self, deployment: Deployment) -> dict[str, str]:
        return {f"launch-{self.engine}.sh": self.script(deployment)}


def priced_notes(deployment: Deployment, engine: str) -> list[str]:
    """Where the plan priced another engine's habits (or none), one line saying so; the host link the plan
    assumed (no engine has a flag for it)."""
    notes = []
    if deployment.engine != engine:
        priced = "no engine's habits" if deployment.engine == "none" else f"{deployment.engine}'s habits"
        notes.append(f"the plan priced {priced}, not {engine}'s: these lines carry its limits, not its figures.")
    if deployment.host_tier is not None:
        notes.append(f"the host KV tier's link ({deployment.host_tier.gbytes_per_s:g} GB/s per attention rank) is "
                     "the machine's, which no flag sets; the plan assumed it.")
    return notes


def fixed_length_note(policy: str, family: str, length: int, engine_label: str) -> list[str]:
    """A policy no engine flag runs (threshold, goodput, oracle): served at a fixed length, said so."""
    if family == "none" or policy in FIXED_LENGTH:
        return []
    what = "an upper bound, not a deployment" if policy == "oracle" else f"no flag in {engine_label}"
    return [f"policy {policy} has {what}: this serves a fixed {length} tokens; the plan's figures assume {policy}."]
