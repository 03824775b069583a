"""SGLang's rows: its CUDA-graph capture rule, host cycle, scheduler, benchmark client and launch line.

Sources, per habit (every row below shares them unless it says otherwise):

    graphs     sglang/srt/model_executor/cuda_graph_runner.py (`get_batch_sizes_to_capture`): sizes
               count requests (batch size): with speculative decoding 1..8, 10..32 by 2, 40..160
               by 16 (without: 1, 2, 4, 8, 16..160 by 8), plus 168..256 by 8 on GPUs over 80 GB,
               capped at `cuda_graph_max_bs` (default: by GPU memory and TP, specplan.engines.sglang_caps);
               when that list runs past a rank's request slots (the req_to_token pool), the slot
               count and the one below it are captured too, and nothing past the slots
               (`get_batch_sizes_to_capture`: `req_to_token_pool.size - 1` and `.size`)
    host       sgl-project/sglang PR #3582 (MTP-1 on DeepSeek-V3/R1: 1.76x at an accepted length
               of ~1.9 → a speculating step costs 1.080 plain steps; 0.049 of a plain step is host
               work once the built-in's MTP forward is priced); DeepSeek-V4's own cycle, 1.089 ms,
               from sgl-project/sglang issue #29960 (SGLang's cycle 13.720 ms = verify 11.204 +
               drafts 0.691 + 0.736 + 1.089, V4-Flash TP2, c = 1)
    scheduler  sglang/srt/managers/scheduler.py (`get_next_batch_to_run`: "Run prefill first if
               possible"): without --enable-mixed-chunk a prefill (extend) batch runs whenever
               prompts wait and decode waits for it (separate); whole requests that do not fit
               the budget wait (defer); DP ranks by --load-balance-method, round_robin by default
    client     python/sglang/bench_serving.py (`calculate_metrics`, `adjust_itl`): each chunk's gap
               divided by its tokens, repeated once per token; ITL p95 and p99, max ITL and the
               achieved concurrency; --warmup-requests all at once, output capped at 32 tokens
    launch     `python -m sglang.launch_server` flags as its argument parser spells them (server_args.py:
               --mem-fraction-static, --cuda-graph-max-bs, --moe-a2a-backend, --deepep-mode,
               --swa-full-tokens-ratio, --enable-hierarchical-cache, --hicache-ratio (host pool over the
               device pool, per rank), --hicache-write-policy write_through, as the plan's tier writes)
    execution  scheduler_components/dp_attn.py: each DP rank votes whether it can replay its decode
               graph and the votes are min-reduced, so a rank with an extend (prefill) batch sends
               every rank eager; a decode step replays the graph of the busiest rank's batch; DeepSeek-V4
               prefill is eager (server_args' breakable-graph rules, PR #25195: "host-side gaps")
    all-to-all DeepEPMode.resolve: auto is normal when any rank extends, low-latency otherwise
    caps       specplan.engines.sglang_caps (max_running_requests, SWA pool, cuda_graph_max_bs, DeepEP
               and MegaMoE tokens per rank, mem_fraction_static)
    DP ranks   specplan.engines.dp_scheduler: the prefill delayer (off unless --enable-prefill-delayer),
               DPBudget's refresh interval, decode beside another rank's extend, mixed chunk
    kv offload HiCache's host pool: --hicache-ratio × the device pool, 2 by default (docs.sglang.io,
               HiCache best practices; --hicache-size in GB overrides it)
    aic        NVIDIA AIConfigurator's database: --mem-fraction-static a share of all GPU memory
               (`of_total`), the built-ins read the sglang 0.5.14 tables, vLLM's are their twin

Rows: 0.5.12.post1 (the SGLang cookbook's first DeepSeek-V4 benchmark card, commit 7c9bb316),
0.5.14 (the version NVIDIA AIConfigurator's SGLang tables were measured under, which the
built-ins read) and 0.5.15 (sgl-project/sglang PR #31363's cache-cold re-measurement of the
cookbook's cells). No habit modelled here is known to differ between them; each row names
the runs it stands for.
"""

from __future__ import annotations

from dataclasses import replace

from specplan.engines.dp_scheduler import SGLANG_DP_SCHEDULER
from specplan.engines.eager import PUBLIC_EAGER_COST
from specplan.engines.launch import NEEDS_DRAFT_MODEL, Deployment, ScriptLaunch
from specplan.engines.modes import AllToAllRule, RankVote
from specplan.engines.sglang_caps import SGLangCaps
from specplan.engines.traits import (
    AicTables,
    BenchClient,
    EngineTraits,
    GraphRule,
    HostCycle,
    KvOffload,
    Scheduler,
)

ALGORITHM = {"mtp": "NEXTN", "eagle3": "EAGLE3", "dflash": "DFLASH", "dspark": "DSPARK"}
WARMUP_OUTPUT_TOKENS = 32   # bench_serving: output_len=min(test_request.output_len, 32)


def capture_sizes(top: int, speculative: bool) -> list[int]:
    """SGLang's default capture batch sizes (a GPU over 80 GB, no DP) up to `top` requests."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 161, 16)]
    else:
        sizes = [1, 2, 4, 8, *range(16, 161, 8)]
    sizes += list(range(168, 257, 8))
    return [s for s in sorted(set(sizes)) if s <= top]


def with_slots(sizes: list[int], slots: int) -> list[int]:
    """The capture list a rank of `slots` request slots runs: past the slots, slots − 1 and slots are captured
    instead (sglang get_batch_sizes_to_capture)."""
    if sizes and max(sizes) > slots:
        sizes = [*sizes, slots - 1, slots]
    return sorted({s for s in sizes if 1 <= s <= slots})


def args(deployment: Deployment, role: str) -> list[str]:
    """`python -m sglang.launch_server` arguments for one replica of `role`: parallelism, the all-to-all, the
    memory fraction, request slots, chunk, CUDA-graph batch, SWA pool, radix cache and HiCache, disaggregation
    and speculation, each as the plan priced it (the prefill pool's line carries no decode-engine settings)."""
    par = deployment.parallel_of(role)
    out = ["python", "-m", "sglang.launch_server", "--model-path", deployment.model or "$MODEL",
           "--tp-size", str(par.tp)]
    if par.dp > 1:
        out += ["--dp-size", str(par.dp), "--enable-dp-attention"]
    if par.ep > 1:
        out += ["--ep-size", str(par.ep)]
    a2a = deployment.all_to_all
    if a2a is not None:
        out += ["--moe-a2a-backend", a2a.backend]
        if a2a.mode != "auto":
            out += ["--deepep-mode", a2a.mode]
    if role != "prefill":
        out += decode_engine_args(deployment)
    if deployment.chunk_tokens is not None and role == "aggregated":
        out += ["--chunked-prefill-size", str(deployment.chunk_tokens)]
    if not deployment.prefix_cache:
        out.append("--disable-radix-cache")
    if deployment.host_tier is not None and role == "aggregated":
        out += ["--enable-hierarchical-cache", "--hicache-ratio", f"{deployment.host_tier.ratio:.4g}",
                "--hicache-write-policy", "write_through"]
    if role != "aggregated":
        out += ["--disaggregation-mode", role]
    if deployment.speculates and role != "prefill":
        out += speculative_args(deployment)
    return out


def decode_engine_args(deployment: Deployment) -> list[str]:
    """The decode engine's memory fraction, request slots, CUDA-graph batch and SWA pool ratio as priced."""
    out = [] if deployment.memory_fraction is None else ["--mem-fraction-static", f"{deployment.memory_fraction:g}"]
    out += ["--max-running-requests", str(deployment.max_batch_requests)]
    if deployment.graph_max is not None:
        out += ["--cuda-graph-max-bs", str(deployment.graph_max)]
    if deployment.swa_full_tokens_ratio is not None:
        out += ["--swa-full-tokens-ratio", f"{deployment.swa_full_tokens_ratio:g}"]
    return out


def speculative_args(deployment: Deployment) -> list[str]:
    family, length = deployment.family, deployment.length
    out = ["--speculative-algorithm", ALGORITHM[family]]
    if family in NEEDS_DRAFT_MODEL:
        out += ["--speculative-draft-model-path", "$DRAFT_MODEL"]
    if family == "dspark":  # SGLang derives the verify window (block + 1) from the block size
        return [*out, "--speculative-dspark-block-size", str(length)]
    if family in ("mtp", "eagle3"):  # a chain: one draft per step, topk 1, steps + 1 tokens verified
        out += ["--speculative-num-steps", str(length), "--speculative-eagle-topk", "1"]
    out += ["--speculative-num-draft-tokens", str(length + 1 if family in ("mtp", "eagle3") else length)]
    return out


def confidence_note(deployment: Deployment) -> str:
    return (f"SGLang cannot run {deployment.policy} (confidence-scheduled verification): this line serves the "
            f"DSpark drafter (sgl-project/sglang #30261) verifying its whole block of {deployment.length} every "
            f"step, the policy static with length {deployment.length}; the plan's figures assume "
            f"{deployment.policy} (vLLM runs it: method dspark, enable_adaptive_verification).")


def schedule_note(deployment: Deployment) -> str:
    return (f"SGLang has no per-batch-size length table: this serves the schedule's first length "
            f"({deployment.length}); the plan's figures assume the schedule (vLLM and TensorRT-LLM run it).")


# `python -m sglang.launch_server` lines, with notes on how SGLang runs the planned policy
LAUNCH = ScriptLaunch("sglang", args, confidence_note, schedule_note)


V0_5_14 = EngineTraits(
    name="sglang", version="0.5.14", label="SGLang 0.5.14",
    graphs=GraphRule(axis="requests", default_sizes=capture_sizes,
                     default_top=lambda max_running, block, given: max_running, limit="max_batch_requests",
                     source="sglang/srt/model_executor/cuda_graph_runner.py get_batch_sizes_to_capture",
                     past_slots=with_slots,
                     slots_source="sglang cuda_graph_runner.get_batch_sizes_to_capture: when the list's largest "
                                  "size exceeds req_to_token_pool.size, size - 1 and size are captured and larger "
                                  "sizes dropped"),
    host=HostCycle(spec_step_fraction=0.049, spec_cycle_ms=1.089, cycle_model="DeepSeek-V4",
                   fraction_source="sgl-project/sglang PR #3582", cycle_source="sgl-project/sglang issue #29960"),
    scheduler=Scheduler(budget="defer", prefill_schedule="separate", dp_balance="round_robin",
                        sources={"prefill_schedule": "sglang/srt/managers/scheduler.py get_next_batch_to_run",
                                 "dp_balance": "--load-balance-method (default round_robin)"}),
    client=BenchClient(prefix="sglang_bench_serving", itl_per_token=True, itl_percentiles=(95, 99),
                       latency_name="e2e_latency", extras=True, warmup_at_once=True,
                       warmup_output_cap=WARMUP_OUTPUT_TOKENS,
                       source="python/sglang/bench_serving.py calculate_metrics"),
    launch=LAUNCH,
    execution=RankVote(
        source="sglang scheduler_components/dp_attn.py (prepare_mlp_sync_batch: can_run_decode_cuda_graph "
               "min-reduced, is_extend_in_batch max-reduced over the DP ranks); cuda_graph_runner can_run "
               "(max over ranks of tokens // tokens per request <= cuda_graph_max_bs); DeepSeek-V4 prefill eager: "
               "server_args' breakable-graph rules (a DeepSeek-V4 memory guard) and sgl-project/sglang PR #25195",
        eager_prefill_models=("deepseek-v4",)),
    all_to_all=AllToAllRule(auto_per_step=True,
                            source="sglang layers/moe/utils.py DeepEPMode.resolve (auto: normal for an extend, "
                                   "low_latency for decode); --deepep-mode normal turns decode graphs off"),
    eager=PUBLIC_EAGER_COST,
    caps=SGLangCaps(),
    kv_offload=KvOffload(host_ratio=2.0, source="--hicache-ratio, default 2 (host pool over the device pool; "
                         "docs.sglang.io HiCache best practices)"),
    dp_scheduler=SGLANG_DP_SCHEDULER,
    aic=AicTables(memory_fraction="of_total", version="0.5.14", twin="vllm",
                  source="--mem-fraction-static is a share of all GPU memory; the database's sglang 0.5.14 tables "
                         "(the built-ins'); vLLM 0.24.0's tables of the same GPU hold the twin kernels"),
)
V0_5_12 = replace(V0_5_14, version="0.5.12.post1", label="SGLang 0.5.12.post1")
V0_5_15 = replace(V0_5_14, version="0.5.15", label="SGLang 0.5.15")

ROWS = (V0_5_12, V0_5_14, V0_5_15)
