"""vLLM's rows: its CUDA-graph capture rule, host cycle, V1 scheduler, benchmark client and launch line.

Sources, per habit (every row below shares them unless it says otherwise):

    graphs     vllm/config/compilation.py and vllm/config/vllm.py (`_set_cudagraph_sizes`): sizes count
               tokens in the forward: 1, 2, 4, multiples of 8 below 256, then multiples of 16 up to
               `max_cudagraph_capture_size`, whose default is min(max_num_seqs · (1 + k) · 2, 512); a
               given list sets the largest size itself; sizes above max_num_batched_tokens are dropped
    host       vllm-project/vllm PR #12755 (MTP-1 on DeepSeek-V3/R1: 1.63x at QPS 1 with accepted
               length 1.8165 → a speculating step costs 1.114 plain steps; 0.084 of a plain step is
               host work once the built-in's MTP forward is priced); DeepSeek-V4's own cycle,
               0.573 ms, from sgl-project/sglang issue #29960 (vLLM's cycle 11.184 ms = verify
               9.349 + drafts 0.646 + 0.616 + 0.573, V4-Flash TP2, c = 1)
    scheduler  vllm/v1/core/sched/scheduler.py: one token budget per step, decoding requests
               first, a request's scheduled tokens cut at the budget's edge (drafts past it
               dropped), prompt chunks in the same step (mixed); DP ranks chosen by the DP
               coordinator's least-loaded rule (4 x waiting + running); each DP rank is its own engine
               core (its own scheduler and budget) and the ranks step in lockstep, so a step with
               prompt chunks lasts its busiest rank (specplan.engines.dp_scheduler: VLLM_DP_SCHEDULER)
    client     vllm/benchmarks/serve.py (`calculate_metrics`): ITL one gap per streamed chunk,
               --metric-percentiles 99 by default, warm-ups (--num-warmups) at the benchmark's
               concurrency
    launch     `vllm serve` flags as its argument parser spells them (vllm/engine/arg_utils.py):
               --gpu-memory-utilization, --all2all-backend deepep_low_latency | deepep_high_throughput,
               --compilation-config {max_cudagraph_capture_size}, --kv-offloading-backend native with
               --kv-offloading-size (GiB, summed over TP ranks); --speculative-config JSON
               {method, model, num_speculative_tokens, enable_adaptive_verification,
               num_speculative_tokens_per_batch_size}
    execution  vllm/v1/cudagraph_dispatcher.py (FULL_AND_PIECEWISE): a uniform decode batch within the
               capture list replays a full graph, any other step a piecewise one (attention eager),
               a step past the largest size none; DP ranks take the min mode (dp_utils.py). The
               capture list with k drafts rounds to multiples of 1 + k (specplan.engines.vllm_capture)
    caps       specplan.engines.vllm_caps (max_num_seqs, max_num_batched_tokens, the graph's reach,
               gpu_memory_utilization)
    aic        NVIDIA AIConfigurator's database: --gpu-memory-utilization a share of all GPU memory
               (`of_total`), the built-ins read the vllm 0.24.0 tables, SGLang's are their twin

Rows: 0.24, the version NVIDIA AIConfigurator's vLLM tables were measured under (the
built-ins read them). The launch notes say which later version added a flag: the DSpark
drafter (`method: dspark`, 0.25, PR #46995) and its confidence-scheduled verification
(`enable_adaptive_verification`, PR #47808, merged after v0.26.0).
"""

from __future__ import annotations

import json
from typing import Any

from specplan.engines.dp_scheduler import VLLM_DP_SCHEDULER
from specplan.engines.eager import PUBLIC_EAGER_COST
from specplan.engines.launch import (
    CONFIDENCE_SCHEDULED,
    NEEDS_DRAFT_MODEL,
    Deployment,
    ScriptLaunch,
)
from specplan.engines.modes import AllToAllRule, TokenDispatch
from specplan.engines.traits import (
    AicTables,
    BenchClient,
    EngineTraits,
    GraphRule,
    HostCycle,
    Scheduler,
)
from specplan.engines.vllm_caps import VLLMCaps
from specplan.engines.vllm_capture import capture_sizes, default_max_capture

METHOD = {"mtp": "mtp", "eagle3": "eagle3", "dflash": "dflash", "dspark": "dspark"}
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def args(deployment: Deployment, role: str) -> list[str]:
    """`vllm serve` arguments for one replica of `role` ('aggregated', 'prefill' or 'decode'): parallelism, the
    all-to-all, the memory fraction, request slots, token budget, CUDA-graph reach, prefix caching and CPU KV
    offload, the KV connector and speculation, each as the plan priced it."""
    par = deployment.parallel_of(role)
    out = ["vllm", "serve", deployment.model or "$MODEL", "--tensor-parallel-size", str(par.tp)]
    if par.dp > 1:
        out += ["--data-parallel-size", str(par.dp)]
    if par.ep > 1:
        out.append("--enable-expert-parallel")
    a2a = deployment.all_to_all
    if a2a is not None and a2a.backend == "deepep":
        out += ["--all2all-backend", "deepep_high_throughput" if a2a.mode == "normal" else "deepep_low_latency"]
    if role != "prefill" and deployment.memory_fraction is not None:
        out += ["--gpu-memory-utilization", f"{deployment.memory_fraction:g}"]
    out += ["--max-num-seqs", str(deployment.rank_requests or deployment.max_batch_requests)]
    if deployment.chunk_tokens is not None and role == "aggregated":
        out += ["--max-num-batched-tokens", str(deployment.rank_chunk_tokens or deployment.chunk_tokens)]
    if role != "prefill" and deployment.graph_max is not None:
        out += ["--compilation-config", json.dumps({"max_cudagraph_capture_size": deployment.graph_max})]
    out.append("--enable-prefix-caching" if deployment.prefix_cache else "--no-enable-prefix-caching")
    if deployment.host_tier is not None and role == "aggregated":
        gib = deployment.host_tier.gib / par.dp
        out += ["--kv-offloading-backend", "native", "--kv-offloading-size", f"{gib:.4g}"]
    if role != "aggregated":
        out += ["--kv-transfer-config", json.dumps(NIXL)]
    if deployment.speculates and role != "prefill":
        out += ["--speculative-config", json.dumps(speculative_config(deployment))]
    return out


def speculative_config(deployment: Deployment) -> dict[str, Any]:
    config: dict[str, Any] = {"method": METHOD[deployment.family]}
    if deployment.family in NEEDS_DRAFT_MODEL:
        config["model"] = "$DRAFT_MODEL"
    config["num_speculative_tokens"] = deployment.length
    if deployment.family == "dspark" and deployment.policy in CONFIDENCE_SCHEDULED:
        config["enable_adaptive_verification"] = True
    if deployment.schedule is not None:
        config["num_speculative_tokens"] = max(deployment.schedule.values())
        config["num_speculative_tokens_per_batch_size"] = batch_size_ranges(deployment.schedule,
                                                                            deployment.max_batch_requests)
    return config


def batch_size_ranges(schedule: dict[int, int], max_batch: int) -> list[list[int]]:
    """{batch-size upper bound: length} → vLLM's [first, last, length] inclusive ranges, speculation off
    (length 0) above the last bound up to the batch limit (`num_speculative_tokens_per_batch_size`)."""
    ranges, first = [], 1
    for bound in sorted(schedule):
        ranges.append([first, bound, schedule[bound]])
        first = bound + 1
    if first <= max_batch:
        ranges.append([first, max_batch, 0])
    return ranges


def confidence_note(deployment: Deployment) -> str:
    policy = deployment.policy
    plans = "" if policy == "dspark-async" else (f" (specplan planned {policy}; vLLM's scheduler plans as "
                                                  "dspark-async does)")
    return ("DSpark: method 'dspark' since vLLM 0.25 (PR #46995); enable_adaptive_verification runs its "
            "confidence-scheduled verification" + plans + " (PR #47808, merged after v0.26.0: use a "
            "later release or a main build; it needs CUDA graphs, not --enforce-eager).")


def schedule_note(deployment: Deployment) -> str:
    return "the length schedule runs as num_speculative_tokens_per_batch_size (vLLM >= 0.24, PR #32374)."


def limits(deployment: Deployment) -> list[str]:
    """What of the plan this line cannot carry (one line each)."""
    notes = []
    a2a = deployment.all_to_all
    if a2a is not None and a2a.backend == "megamoe":
        notes.append("vLLM has no MegaMoE all-to-all: this line runs its default all-to-all; the plan's figures "
                     "assume MegaMoE.")
    if a2a is not None and a2a.backend == "deepep" and a2a.mode == "auto":
        notes.append("vLLM runs one DeepEP mode per deployment (no auto): this line names low_latency; the plan "
                     "priced SGLang's per-step auto.")
    if deployment.host_tier is not None and deployment.parallel.dp > 1:
        notes.append("--kv-offloading-size is each data-parallel engine's share of the replica's host tier "
                     "(summed over its TP ranks).")
    return notes


# `vllm serve` lines, with notes on how vLLM runs the planned policy
LAUNCH = ScriptLaunch("vllm", args, confidence_note, schedule_note, limits)


V0_24 = EngineTraits(
    name="vllm", version="0.24", label="vLLM 0.24",
    graphs=GraphRule(axis="tokens", default_sizes=capture_sizes,
                     default_top=lambda max_seqs, block, given: default_max_capture(max_seqs, block, given),
                     limit="max_step_tokens", source="vllm/config/vllm.py _set_cudagraph_sizes"),
    host=HostCycle(spec_step_fraction=0.084, spec_cycle_ms=0.573, cycle_model="DeepSeek-V4",
                   fraction_source="vllm-project/vllm PR #12755", cycle_source="sgl-project/sglang issue #29960"),
    scheduler=Scheduler(budget="truncate", prefill_schedule="mixed", dp_balance="least_loaded",
                        sources={"budget": "vllm/v1/core/sched/scheduler.py", "dp_balance": "vLLM's DP coordinator"}),
    client=BenchClient(prefix="vllm_bench_serve", itl_per_token=False, itl_percentiles=(99,), latency_name="e2el",
                       extras=False, warmup_at_once=False, warmup_output_cap=None,
                       source="vllm/benchmarks/serve.py calculate_metrics"),
    launch=LAUNCH,
    execution=TokenDispatch(
        source="vllm/v1/cudagraph_dispatcher.py dispatch (NONE past max_cudagraph_capture_size, FULL for a uniform "
               "decode batch, PIECEWISE otherwise); vllm/v1/worker/dp_utils.py coordinate_batch_across_dp (the "
               "min mode over DP ranks, tokens padded to the largest); DeepSeek-V4 is not torch-compiled: its "
               "piecewise graph is the breakable one, and without it every prefill-containing step runs eager "
               "(vllm-project/vllm #54677)",
        compiled_models=("dense", "moe")),
    all_to_all=AllToAllRule(auto_per_step=False,
                            source="one all-to-all backend per deployment (--all2all-backend deepep_low_latency or "
                                   "deepep_high_throughput); high-throughput under DP splits the graph at the MoE "
                                   "(vllm/config/compilation.py set_splitting_ops_for_v1)"),
    eager=PUBLIC_EAGER_COST,
    caps=VLLMCaps(),
    dp_scheduler=VLLM_DP_SCHEDULER,
    aic=AicTables(memory_fraction="of_total", version="0.24.0", twin="sglang",
                  source="--gpu-memory-utilization is a share of all GPU memory; the database's vllm 0.24.0 tables "
                         "(the built-ins'); SGLang 0.5.14's tables of the same GPU hold the twin kernels"),
)

ROWS = (V0_24,)
