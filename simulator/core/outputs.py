"""Every key specplan writes and every CSV column, with its unit and definition: the outputs registry.

    column = describe("summary.json", "ttft_p99_s")     # Output(name, unit, doc), None if unregistered
    for file in OUTPUT_FILES: file.name, file.written_by, file.doc, file.columns

One registry for the whole results contract (docs/reference/outputs.md): summary.json
(the rows of points.csv and of every plan probe are summaries too),
requests.csv, steps.csv and prefill_steps.csv of a run, a sweep's
points.csv, frontier.csv and comparisons.csv (and lanes.csv over agent
lanes), a plan's probes.csv, a
deployment search's plan.csv and the replication suite's replication.csv.
The summary's contract keys (`contract_keys`) are the ones docs/reference/outputs.md
promises. tests/test_outputs_registry.py runs every engine path and fails
on a key or column written here unregistered (or registered and never
written); docs/reference/outputs.md is generated from this module. An entry
whose name holds `<...>` is a pattern (its `pattern` regex), for columns
named after the keys of an SLA. `present` says in which runs a key is
written at all (`EVERY_RUN`, or the mode in `PRESENCE` that adds it); the
test holds each claim against every engine path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Output:
    """One key or column: its name (or `<pattern>`), unit and definition; `contract` for docs/reference/outputs.md's keys."""

    name: str
    unit: str
    doc: str
    contract: bool = False
    pattern: str | None = None
    present: str = "every run"

    def matches(self, key: str) -> bool:
        return re.fullmatch(self.pattern, key) is not None if self.pattern else key == self.name


@dataclass(frozen=True)
class OutputFile:
    """A file specplan writes: who writes it, what a row is, and its keys or columns."""

    name: str
    written_by: str
    doc: str
    columns: tuple[Output, ...]
    extends: str | None = None   # a file whose keys this one also holds (a point's row is a summary)

    def describe(self, key: str) -> Output | None:
        return next((c for c in self.columns if c.matches(key)), None)


def table(text: str, patterns: dict[str, str] | None = None) -> tuple[Output, ...]:
    """`name | unit | definition` lines (a `*` after the name marks a contract key) → Outputs."""
    rows = []
    for line in filter(str.strip, text.splitlines()):
        name, unit, doc = (part.strip() for part in line.split(" | ", 2))
        contract = name.endswith("*")
        name = name.rstrip("*")
        rows.append(Output(name, unit, doc, contract, (patterns or {}).get(name)))
    return tuple(rows)


SUMMARY = table("""
policy* | — | the policy's name (policy.name)
policy_label | — | the policy's label in tables: its name, marked (lossy) or (oracle) where it is one
lossless | — | false for a policy that leaks future tokens into admission (dspark-global)
oracle | — | true for the oracle, which sees which drafts will be accepted (an upper bound)
scheduling_overhead | — | who pays engine.scheduling_overhead_ms: none (lengths fixed before drafting), per-step (synchronous decisions), hidden (decided ahead)
throughput_tokens_per_s* | tokens/s | output tokens emitted in the measurement window (warmup_s, end] over its length, whole cluster
throughput_tokens_per_s_per_gpu* | tokens/s/GPU | throughput_tokens_per_s over every GPU of the cluster (prefill pool included)
tokens_generated* | tokens | output tokens emitted in the measurement window
tps_user_mean* | tokens/s | mean over completed requests that arrived after warmup of (output_tokens − 1) / (finish − first token)
tps_user_p10* | tokens/s | 10th percentile of the same per-request tokens/s/user (the slowest 10% of users)
tps_user_p50* | tokens/s | median per-request tokens/s/user
tps_user_p90* | tokens/s | 90th percentile per-request tokens/s/user
tpot_mean_ms | ms | mean time per output token over completed requests that arrived after warmup: (finish − first token) / (output_tokens − 1), as vllm bench serve's TPOT; 1000 / the request's tokens/s/user
tpot_p50_ms | ms | median per-request TPOT
tpot_p90_ms | ms | 90th percentile per-request TPOT (the slowest 10% of users; an SLA bound: tpot_p90_ms<=25)
tpot_p99_ms | ms | 99th percentile per-request TPOT
ttft_p50_s* | s | median time to first token of requests that arrived after warmup: arrival → the decode step that emits it (or the prefill stage's end with engine.prefill.first_token: prefill); requests.csv's ttft_* columns give its parts
ttft_p90_s | s | 90th percentile time to first token
ttft_p99_s* | s | 99th percentile time to first token
requests_completed_in_window | requests | completed requests that arrived after warmup (what the tokens/s/user statistics read)
itl_mean_ms | ms | mean inter-token latency: a request's gaps between successive emissions (first token, then each step that gave it tokens), pooled over measured completed requests; NaN unless ITL is logged (run, plan probes, simulate(itl=True))
itl_p50_ms | ms | median inter-token latency (as itl_mean_ms)
itl_p90_ms | ms | 90th percentile inter-token latency
itl_p99_ms | ms | 99th percentile inter-token latency
requests_arrived* | requests | requests that arrived during the run (= completed + running + rejected)
requests_completed* | requests | requests that finished during the run
requests_running | requests | requests still queued, prefilling, in transfer or decoding at the end
requests_rejected | requests | requests refused with a reason (requests.csv reject_reason)
requests_rejected_kv_capacity | requests | rejected because prompt + output + block fits no KV cache they may use (the whole cache, or one attention rank's)
mean_accepted_per_step* | tokens | τ pooled over proposals: Σ (accepted drafts + 1) over decoding request-steps / request-steps (bonus token included)
mean_verify_tokens_per_request_step* | tokens | 1 + ℓ: verified tokens (anchor and drafts, prompt chunks excluded) per decoding request-step
mean_batch_requests* | requests | running requests per replica, time-weighted over the window
mean_decode_requests | requests | decoding requests per engine step in the window
request_steps_deferred | request-steps | decoding request-steps the token budget left for the next step
draft_tokens_truncated | tokens | drafts the token budget cut at its edge (engine.budget: truncate)
deferred_share | share | request_steps_deferred / (decoding request-steps + request_steps_deferred)
mean_step_ms | ms | mean engine step time in the window (drafting + verify + host and scheduling)
draft_share_of_step | share | drafting time / step time, over the window
verify_share_of_step | share | verify-forward time / step time
attention_share_of_step | share | verify time spent on KV context (step_ms(B, C) − step_ms(B, 0)) / step time; NaN for a profile without a context axis
overhead_share_of_step | share | host and scheduling time / step time
engine_steps | steps | engine steps over the whole run, every replica
preemptions | preemptions | requests preempted (and recomputed) when decoding outgrew the KV cache
replicas | replicas | decode replicas of the cluster
gpus | GPUs | every GPU of the cluster (decode, and a prefill pool's)
kv_capacity_tokens | tokens | the KV capacity one replica ran with (engine.kv_capacity_tokens, resolved)
kv_capacity_source | — | where it came from: profile memory model (at the engine's memory fraction, engine_mem_fraction_static: the default where the scenario gives none) or scenario
window_s | s | length of the measurement window (end − warmup_s)
simulated_s* | s | simulated time at the end of the run
wall_s* | s | wall-clock seconds the simulation took
gpus_prefill | GPUs | a prefill pool's GPUs
gpus_decode | GPUs | the decode replicas' GPUs
gpus_total | GPUs | gpus_prefill + gpus_decode (= gpus)
requests_in_prefill | requests | with a prefill pool: requests waiting for or in a prefill step at the end
requests_in_transfer | requests | with a prefill pool: requests whose KV was on its way to decode at the end
requests_at_decode | requests | with a prefill pool: requests queued or decoding at a decode replica at the end
prefill_replicas | replicas | a prefill pool's replicas
prefill_steps | steps | prefill steps over the run
mean_prefill_step_ms | ms | mean prefill step time in the window
mean_prefill_batch_tokens | tokens | mean new prompt tokens per prefill step in the window
prefill_busy_share | share | prefill busy time / window / prefill replicas
mean_kv_transfer_ms | ms | mean over every KV transfer that arrived (a preempted request's second included) of prefill end → KV at decode, link queueing included
kv_bytes_per_token | bytes | KV bytes one token moves over the link
prefix_cache_hit_rate | share | prompt tokens the prefix cache let prefill skip / prompt tokens looked up
prefix_cache_block_hit_rate | share | cached blocks found / blocks looked up
prefill_tokens_saved | tokens | prompt tokens the prefix cache let prefill skip
prefill_tokens_looked_up | tokens | prompt tokens looked up in the prefix cache
prefix_cache_capacity_blocks | blocks | blocks one prefix cache holds (a replica's: one attention rank's)
prefix_cache_gpu_hit_rate | share | engine.prefix_cache: prompt tokens found in the GPU tier (the request's attention rank) / prompt tokens looked up
prefix_cache_host_hit_rate | share | prompt tokens found in the host tier after the GPU hits, loaded back / prompt tokens looked up (gpu + host = prefix_cache_hit_rate)
prefix_cache_window_recomputed_tokens | tokens | DeepSeek-V4 layout: cached tokens computed again because the sliding-window tail at the hit's end was not kept
kv_host_loaded_bytes | bytes | KV bytes loaded from the host tier back to the GPUs (tokens × the layout's bytes per token)
kv_host_written_bytes | bytes | KV bytes written to the host tier (write-through: blocks it lacked when their prompt completed)
kv_host_load_s | s | Σ over host loads of their link time (queueing on the rank's link included)
kv_host_stall_s | s | Σ of what steps waited for the host loads of the prompts whose first chunk they computed (in steps.csv's overhead_ms)
session_lanes | lanes | session lanes (workload.arrivals.lanes)
session_window_start_s | s | when every lane's warm-up was done (the barrier): the measured window starts here (+ horizon.warmup_s)
sessions_started | sessions | session plays started on the lanes (warm-up plays and recycled ones)
sessions_completed | sessions | plays that ran whole inside the window: from turn 0, started after the barrier, tree done by the end (what the session_* figures read)
session_wall_mean_s | s | a completed session's wall time, first send to its whole tree done, mean
session_wall_p50_s | s | median completed-session wall time
session_wall_p90_s | s | 90th percentile completed-session wall time
session_output_tokens_per_s_mean | tokens/s | a completed session's output tokens over its wall time, mean
session_output_tokens_per_s_p50 | tokens/s | median of the same
session_turns_mean | requests | requests (main-agent and subagent turns) of a completed session, mean
trace_bad_lines | lines | malformed trace lines skipped (workload.arrivals.skip_bad_lines)
trace_failed_requests | requests | trace requests with no output tokens, skipped
trace_ran_out_s | s | a replayed trace: when its window ran out before the horizon, where the measurement window ends (the run goes on to the horizon so its requests finish); null when the trace lasted the horizon
engine_prefill_steps | steps | steps in which some rank ran a prefill batch (engine.prefill.schedule: separate), every replica, whole run; written with DP attention or a separate schedule
engine_prefill_step_share | share | time of those steps / all engine step time, whole run
decode_request_steps_held | request-steps | decoding request-steps that waited for their rank's prefill batch
decode_held_request_s | request-s | Σ over held request-steps of the step's time: decode time lost to prefill batches
dp_busiest_over_mean_tokens | ratio | DP attention: mean over steps of the busiest rank's tokens over the ranks' mean (1 = even)
dp_imbalance_share_of_step | share | DP attention: what the busiest rank's own part adds over the ranks' mean, as a share of step time (0 for a profile that cannot tell its ranks apart)
mode_step_share.graph | share | steps in the window that replayed a CUDA graph (steps.csv mode: graph) / steps in the window
mode_step_share.piecewise | share | steps that ran a piecewise graph, attention eager (vLLM) / steps in the window
mode_step_share.eager | share | steps that ran without a graph: every kernel launched by the host / steps in the window
mode_step_share.unmodelled | share | steps whose mode was not modelled (no engine.cuda_graph capture list) / steps in the window
mode_time_share.graph | share | step time of graph steps / step time in the window
mode_time_share.piecewise | share | step time of piecewise steps / step time in the window
mode_time_share.eager | share | step time of eager steps / step time in the window
mode_time_share.unmodelled | share | step time of steps whose mode was not modelled / step time in the window
mode_reason_step_share.<reason> | share | steps in the window that ran their mode for this reason (steps.csv mode_reason: rank_prefilling, above_capture, ...) / steps in the window; one key per reason that occurred
mode_reason_time_share.<reason> | share | their step time / step time in the window; one key per reason that occurred
all_to_all_step_share.<mode> | share | steps whose MoE all-to-all ran in this mode (low_latency, normal, megamoe) / steps in the window; one key per mode that ran (engine.all_to_all)
engine_cap_binding | — | the engine's own admission cap that stops the run's demand (engine_cap_demand_per_rank above its requests per rank): max_running_requests, max_num_seqs, swa_pool, kv_pool, deepep_tokens_per_rank, ...; none when every cap admits it; written where the engine's row has caps and the profile names its model and GPUs
engine_cap_tightest | — | the engine's admission cap with the fewest requests per rank (specplan.engines.caps)
engine_cap_tightest_requests_per_rank | requests | the most requests per attention rank that cap admits
engine_cap_demand_per_rank | requests | requests outstanding at a decode replica (arrival, or KV arrival behind a prefill pool, to last token), mean over the window, per replica and attention rank
engine_graph_cap_requests_per_rank | requests | the engine's graph cap (SGLang cuda_graph_max_bs, vLLM max_cudagraph_capture_size) as requests per rank: past it a decode step runs eager
engine_mem_fraction_static | share | the share of GPU memory the engine gives weights and KV (SGLang mem_fraction_static by its reserve rule, vLLM gpu_memory_utilization)
split_replicas | replicas | a split run (--split-replicas): the replicas simulated as independent processes
replicas_simulated | replicas | a sampled fleet: the replicas simulated for the whole (cluster totals scaled by replicas / this)
calibration | — | the calibration `specplan run` applied: the file of --calibration FILE (written by `specplan fit`), else the shipped table's row ("the shipped calibration table vN: LABEL"), or none where no row matches
calibration_deployment | — | the deployment that calibration was fitted for: engine and version, GPU, model, layout (a table row: engine, version, layout and model)
calibration_transfer | — | the facts the calibration was carried across (fitted for -> used on): by --calibration-transfer, or a table row's GPU and model; none when it matched
notes | — | what loading the scenario took from its profile or kept against it, one line each (Scenario.notes: engine.dp_attention from a DP built-in's header, a memory model that leaves no pool at the engine's fraction, a stated engine.kv_capacity_tokens above the engine's pool; the traits row an engine.version takes where it has none of its own, an engine.name over another engine's measured kernels, a stated longest prompt whose last chunk reads a prefill profile past its pairs axis); an empty list when none; run and check print them, plan and sweep print each once
draft_record | — | what the drafts did, from every 8th step with drafts: per domain and position the request-steps that reached and accepted a draft, and the reliability bins of the confidences a policy saw (the report's acceptance and calibration figures read it); null without speculation
""", {"mode_reason_step_share.<reason>": r"mode_reason_step_share\.[a-z0-9_]+",
      "mode_reason_time_share.<reason>": r"mode_reason_time_share\.[a-z0-9_]+",
      "all_to_all_step_share.<mode>": r"all_to_all_step_share\.(low_latency|normal|megamoe)"})

BENCH_COMMON = """
completed | requests | measured requests that completed
duration_s | s | last completion − the benchmark's start (the tools' benchmark_duration)
total_input_tokens | tokens | Σ prompt tokens of the measured requests
total_output_tokens | tokens | Σ output tokens of the measured requests
request_throughput_req_s | requests/s | completed / duration_s
output_throughput_tok_s | tokens/s | total_output_tokens / duration_s
total_token_throughput_tok_s | tokens/s | (total_input_tokens + total_output_tokens) / duration_s
output_throughput_tok_s_per_gpu | tokens/s/GPU | output_throughput_tok_s over every GPU of the cluster
total_token_throughput_tok_s_per_gpu | tokens/s/GPU | total_token_throughput_tok_s over every GPU
mean_ttft_ms | ms | mean of first chunk − send
median_ttft_ms | ms | median of first chunk − send
p99_ttft_ms | ms | 99th percentile of first chunk − send
mean_tpot_ms | ms | mean of (latency − TTFT) / (output tokens − 1), requests with > 1 token
median_tpot_ms | ms | median TPOT
p99_tpot_ms | ms | 99th percentile TPOT
max_concurrency | requests | the client's --max-concurrency
warmup_requests | requests | warm-up requests run before the benchmark's clock started
"""
VLLM_BENCH = """
mean_itl_ms | ms | vLLM's ITL: one entry per streamed chunk after the first, the gap since the previous chunk (a speculative step is one chunk: ≈ τ × TPOT); mean
median_itl_ms | ms | median of vLLM's ITL
p99_itl_ms | ms | 99th percentile of vLLM's ITL
mean_e2el_ms | ms | mean end-to-end latency (last chunk − send)
median_e2el_ms | ms | median end-to-end latency
p99_e2el_ms | ms | 99th percentile end-to-end latency
"""
SGLANG_BENCH = """
mean_itl_ms | ms | SGLang's ITL: each chunk's gap divided by its new tokens, repeated per token (adjust_itl: averages like TPOT); mean
median_itl_ms | ms | median of SGLang's ITL
p95_itl_ms | ms | 95th percentile of SGLang's ITL
p99_itl_ms | ms | 99th percentile of SGLang's ITL
max_itl_ms | ms | largest of SGLang's ITL
mean_e2e_latency_ms | ms | mean end-to-end latency (last chunk − send)
median_e2e_latency_ms | ms | median end-to-end latency
p99_e2e_latency_ms | ms | 99th percentile end-to-end latency
concurrency | requests | Σ latency / duration_s, as SGLang prints it
"""


def bench_keys(prefix: str, text: str, client: str) -> tuple[Output, ...]:
    """A benchmark client's metrics under its tool's prefix (workload.arrivals.kind: bench_client)."""
    when = f"with a benchmark client (workload.arrivals.kind: bench_client, client: {client})"
    return tuple(Output(f"{prefix}.{o.name}", o.unit, o.doc, present=when) for o in table(BENCH_COMMON + text))


EVERY_RUN = "every run"
POOL = "with a prefill pool (cluster.prefill)"
CAPS = ("with a serving engine's caps (its traits-table row has caps and the profile names its model and "
        "GPUs: the measured DeepSeek-V4 built-ins)")
EACH_SEEN = "one key for each reason or all-to-all mode the window's steps recorded"
CALIBRATED = ("a run of `specplan run` without --uncalibrated (a calibration file or the shipped table's row, or none; "
              "written by the command, not by simulate())")
PRESENCE: dict[str, tuple[str, ...]] = {  # the mode that writes a key → the keys it adds (the rest: every run)
    POOL: ("gpus_prefill", "gpus_decode", "gpus_total", "requests_in_prefill", "requests_in_transfer",
           "requests_at_decode", "prefill_replicas", "prefill_steps", "mean_prefill_step_ms",
           "mean_prefill_batch_tokens", "prefill_busy_share", "mean_kv_transfer_ms", "kv_bytes_per_token"),
    "with a prefix cache (engine.prefix_cache, or the prefill pool's)": (
        "prefix_cache_hit_rate", "prefix_cache_block_hit_rate", "prefill_tokens_saved", "prefill_tokens_looked_up",
        "prefix_cache_capacity_blocks"),
    "with trace arrivals (workload.arrivals.kind: trace)": ("trace_bad_lines", "trace_failed_requests",
                                                           "trace_ran_out_s"),
    "with a replica's KV tiers (engine.prefix_cache)": (
        "prefix_cache_gpu_hit_rate", "prefix_cache_host_hit_rate", "prefix_cache_window_recomputed_tokens",
        "kv_host_loaded_bytes", "kv_host_written_bytes", "kv_host_load_s", "kv_host_stall_s"),
    "with session lanes (workload.arrivals.kind: sessions)": (
        "session_lanes", "session_window_start_s", "sessions_started", "sessions_completed", "session_wall_mean_s",
        "session_wall_p50_s", "session_wall_p90_s", "session_output_tokens_per_s_mean",
        "session_output_tokens_per_s_p50", "session_turns_mean"),
    "with DP attention (engine.dp_attention) or engine.prefill.schedule: separate": (
        "engine_prefill_steps", "engine_prefill_step_share", "decode_request_steps_held", "decode_held_request_s"),
    "with DP attention over more than one rank (engine.dp_attention)": ("dp_busiest_over_mean_tokens",
                                                                        "dp_imbalance_share_of_step"),
    "a split or sampled run (--split-replicas; a plan probe over more than --replica-sample replicas)": (
        "split_replicas",),
    "a sampled fleet (a plan probe over more than --replica-sample replicas)": ("replicas_simulated",),
    CALIBRATED: ("calibration", "calibration_deployment", "calibration_transfer"),
    CAPS: ("engine_cap_binding", "engine_cap_tightest", "engine_cap_tightest_requests_per_rank",
           "engine_cap_demand_per_rank", "engine_graph_cap_requests_per_rank", "engine_mem_fraction_static"),
    EACH_SEEN: ("mode_reason_step_share.<reason>", "mode_reason_time_share.<reason>",
                "all_to_all_step_share.<mode>"),
}


def with_presence(rows: tuple[Output, ...], presence: dict[str, tuple[str, ...]]) -> tuple[Output, ...]:
    """Each row with the mode that writes it (`EVERY_RUN` unless `presence` names it)."""
    mode = {name: when for when, names in presence.items() for name in names}
    return tuple(replace(o, present=mode.get(o.name, EVERY_RUN)) for o in rows)


SUMMARY = with_presence(SUMMARY, PRESENCE)


REQUESTS = table("""
request_id | — | the request's number, in arrival order
arrival_s | s | when it arrived (sent)
prompt_tokens | tokens | its prompt length
output_tokens | tokens | its output length (what it asks to generate)
domain | — | its acceptance domain (math, code, chat)
replica | — | the decode replica it ran on (-1: none)
admitted_s | s | when a decode replica admitted it into its batch
first_token_s | s | when its first output token was emitted
finish_s | s | when its last token was emitted
generated_tokens | tokens | output tokens it received
steps | steps | decode steps it took part in
accepted_tokens | tokens | drafts of it accepted
verified_tokens | tokens | drafts of it verified (Σ ℓ)
preemptions | preemptions | times it was preempted and recomputed
status | — | where it ended: completed, running, queued, prefill, transfer or rejected
acceptance_offset | logit | its request-level acceptance offset (drafter.acceptance.request_sigma)
reject_reason | — | why it was rejected (kv_capacity: ...), empty otherwise
ttft_s | s | first_token_s − arrival_s
tps_user | tokens/s | (output_tokens − 1) / (finish_s − first_token_s)
prefill_replica | — | with a prefill pool: the prefill replica that computed its prompt (-1: none)
prefill_start_s | s | when its prefill started (first pass): the fixed-rate stage or a pool replica took it; chunked prefill: the engine admitted it; NaN until then
prefill_end_s | s | when its prompt's KV was computed (first pass; chunked: the step that computed its last chunk ended)
kv_ready_s | s | when its KV was at the decode side (a pool: after the link; fixed rate and chunked: = prefill_end_s)
ttft_queue_s | s | TTFT's first part: arrival → prefill_start_s (each part is cut at first_token_s; the five add up to ttft_s)
ttft_prefill_s | s | prefill_start_s → prefill_end_s
ttft_transfer_s | s | prefill_end_s → kv_ready_s (0 but behind a prefill pool)
ttft_decode_wait_s | s | kv_ready_s → a decode slot holds it with its KV (max(admitted_s, kv_ready_s))
ttft_first_step_s | s | → first_token_s: the decode step that emitted its first token (with any step the token budget deferred it)
cached_prompt_tokens | tokens | with a prefill pool: prompt tokens its prefill skipped thanks to the prefix cache
""")

STEPS = table("""
end_s | s | when the step ended
replica | — | the decode replica
batch_requests | requests | running rows (decoding, prefilling, deferred)
decode_requests | requests | rows that decoded this step
drafting_requests | requests | rows that drafted this step
verify_tokens | tokens | B: tokens in the verify forward (prompt chunks included)
prefill_tokens | tokens | prompt-chunk tokens in the forward
emitted_tokens | tokens | output tokens the step emitted
accepted_tokens | tokens | drafts accepted (bonus tokens not included)
deferred_requests | requests | decoding rows the token budget left for the next step
truncated_drafts | tokens | drafts the token budget cut at its edge
context_tokens | tokens | KV context the step was priced at (0: the profile has no context axis)
draft_ms | ms | drafting time
verify_ms | ms | verify-forward time in the step's mode (CUDA-graph padding, an eager step's launches or surcharge, DeepEP normal mode included)
overhead_ms | ms | host time and the scheduling overhead the policy pays
mode | — | how the engine ran the step: graph (a CUDA graph replayed), piecewise (vLLM: attention eager, the rest replayed), eager (every kernel launched by the host), unmodelled (no engine.cuda_graph capture list)
mode_reason | — | why (specplan.engines.REASONS): decode_graph, rank_prefilling (a rank prefilled, so every rank ran eager), v4_prefill_eager, prefill_eager, above_capture, graphs_off, deepep_normal, mixed_piecewise, ragged_piecewise, normal_piecewise, slots_piecewise, no_piecewise, no_graph_model
all_to_all | — | the MoE all-to-all's mode in the step: none, low_latency, normal (DeepEP), megamoe (engine.all_to_all)
""")

PREFILL_STEPS = table("""
end_s | s | when the prefill step ended
prefill_replica | — | the prefill replica
requests | requests | prompts (or prompt chunks) in the step
prompt_tokens | tokens | new prompt tokens computed
pairs | tokens² | attention pairs priced: Σ n(n + 2p) over its prompts (n new tokens over p cached)
step_ms | ms | the step's time from the prefill profile
""")

POINT_EXTRA = table("""
label | — | the sweep variant's label
load_kind | — | the load axis: users, rate_per_s, rate_scale or lanes
load | users, requests/s, factor or lanes | the load on that axis
seed | — | the point's seed
key | — | the point's key: sha256 of its resolved scenario, the bytes of every file it reads and specplan's code
""")

FRONTIER = table("""
label | — | the variant
kind | — | vertex (a simulated point on the Pareto frontier) or interpolated (between two vertices)
load | users, requests/s, factor or lanes | a vertex's load (NaN between vertices)
tps_user | tokens/s | the SLA statistic of tokens/s/user (sla.statistic), mean over seeds
throughput_per_gpu | tokens/s/GPU | throughput_tokens_per_s_per_gpu, mean over seeds
seeds | — | seeds averaged at a vertex (0 between vertices)
""")

COMPARISONS = table("""
sla_tps_user | tokens/s | the SLA level (sla.tps_user)
statistic | — | which tokens/s/user statistic it bounds
label | — | the variant
baseline | — | the first variant, the gains are against it
throughput_per_gpu | tokens/s/GPU | the variant's throughput per GPU at the level, read on its frontier
gain_vs_baseline | share | throughput_per_gpu / the baseline's − 1
matched_throughput_per_gpu | tokens/s/GPU | the baseline's throughput at the level (where the variants are compared at matched throughput)
tps_user_at_matched | tokens/s | the variant's tokens/s/user at that matched throughput
tps_user_gain_vs_baseline | share | tps_user_at_matched / the baseline's level − 1
throughput_edge | — | "max load N" when the reading is the largest simulated load's (a lower bound), "min load N" at the smallest, empty otherwise
tps_user_edge | — | the same for the matched tokens/s/user reading
thin | — | "load L: N requests" when the throughput reading rests on a point where a seed completed fewer than 30 requests in the window (the plan's rule), empty otherwise
tps_user_thin | — | the same for the matched tokens/s/user reading (or the baseline's throughput it is matched at)
""")

LANES = table("""
lanes | lanes | the lanes value (sweep.load.lanes)
label | — | the variant
baseline | — | the first variant, the gains are against it
seeds | — | seeds the variant ran at these lanes
throughput_per_gpu | tokens/s/GPU | throughput_tokens_per_s_per_gpu, mean over seeds
throughput_per_gpu_ci95 | tokens/s/GPU | its Student-t 95% half-width over seeds
throughput_gain | share | throughput per GPU ÷ the baseline's − 1 at the same lanes and seed (the same sessions), mean over seeds
throughput_gain_ci95 | share | its Student-t 95% half-width over seeds (NaN for one seed)
session_output_tokens_per_s | tokens/s | session_output_tokens_per_s_mean (a session's output tokens over its wall time), mean over seeds
session_output_tokens_per_s_ci95 | tokens/s | its Student-t 95% half-width over seeds
session_rate_gain | share | the same ratio − 1 for a session's output tokens per second, paired by seed, mean over seeds
session_rate_gain_ci95 | share | its Student-t 95% half-width over seeds
session_wall_p50_s | s | session_wall_p50_s, mean over seeds
ttft_p99_s | s | ttft_p99_s, mean over seeds
tps_user_p50 | tokens/s | tps_user_p50, mean over seeds
mean_accepted_per_step | tokens | τ (mean_accepted_per_step, the bonus token included), mean over seeds
sessions_completed | sessions | the fewest sessions a seed played whole inside its window (what the session figures rest on)
""")

PROBE_RECORD = table("""
keep_up_verdict | — | the keep-up judge's verdict on the run: keeps up, falls behind, or too short to judge
keep_up_growth | requests | growth of outstanding requests (arrived, not finished) over the window's second half
keep_up_completed | requests | requests completed in that half
keep_up_service_p90_s | s | 90th percentile time a request spent in an engine (the ramp-up the judge waits for is twice it)
keep_up_needed_duration_s | s | the horizon that would settle an undecided verdict
keep_up_reason | — | why the verdict is not "keeps up", in words (empty otherwise)
keep_up_queued_share | share | the least share of the window any engine had requests waiting for it (empty when some engine had too few such steps to read its capacity)
keep_up_capacity_tokens_per_s | tokens/s | output tokens/s the engines emitted while requests waited for them, summed over engines: their capacity at the run's mix
keep_up_offered_tokens_per_s | tokens/s | output tokens/s the arrivals offer: the mean arrival rate × the mean output (each less its first token), or the arrivals' own over the run
keep_up_served_share | share | keep_up_capacity_tokens_per_s ÷ keep_up_offered_tokens_per_s: below 1 beyond its interval, the cluster falls behind
keep_up_served_share_ci95 | share | the served share's 95% half-width (batch means of the capacity, the offer's sampling error)
ttft_unqueued_p50_s | s | TTFT p50 of the measured requests without their wait before prefill starts (ttft_queue_s): what a TTFT bound would read if a prefill pool's queue were empty
ttft_unqueued_p90_s | s | the same at p90
ttft_unqueued_p99_s | s | the same at p99
key | — | the run's point key
seed | — | the run's seed
""")

SLA_KEY = r"(ttft|itl|tpot|tps_user|session_wall|session_output_tokens_per_s)_[a-z0-9]+(_s|_ms)?"  # a bound's key
PROBES = table("""
label | — | the variant
replicas | replicas | decode replicas of the probe
replicas_simulated | replicas | replicas simulated (fewer when the probe was sampled)
gpus | GPUs | every GPU of the probed cluster
gpus_decode | GPUs | the probe's decode GPUs
gpus_prefill | GPUs | the probe's prefill GPUs (0 without a prefill pool)
prefill_pool | — | held fixed (the scenario's cluster.prefill) or grows with the decode replicas (a search's prefill_per_decode); empty without a pool
prefill_busy_share | share | the run's prefill_busy_share (empty without a pool)
prefix_cache_hit_rate | share | the run's prefix_cache_hit_rate (empty without a prefix cache)
seed | — | the run's seed
tps_user | tokens/s | the run's tokens/s/user statistic (--statistic)
throughput_tokens_per_s_per_gpu | tokens/s/GPU | the run's throughput per GPU
ttft_p99_s | s | the run's TTFT p99
requests_completed | requests | requests the run completed
requests_rejected | requests | requests the run rejected with a reason (answered at arrival for the keep-up judge)
keep_up_verdict | — | keeps up, falls behind, or undecided (the keep-up judge)
keep_up_growth | requests | growth of outstanding requests over the window's second half
keep_up_served_share | share | the run's served share (its capacity while requests waited ÷ the offered output tokens/s)
keep_up_served_share_ci95 | share | its 95% half-width
meets_sla | — | whether the probe (mean over seeds) met every bound and kept up
chosen | — | whether this size is the variant's answer
key | — | the run's point key
session_lanes | lanes | on agent sessions: the lanes played (the demand)
sessions_completed | sessions | on agent sessions: sessions the run played whole inside its window
session_wall_p50_s | s | on agent sessions: the run's median session wall time
session_wall_p90_s | s | on agent sessions: the run's 90th percentile session wall time
session_output_tokens_per_s_mean | tokens/s | on agent sessions: a session's output tokens per second of wall time, the run's mean
<sla key> | the key's unit | the run's value of each statistic the SLA names that the columns above do not hold (tpot_p50_ms, ttft_p90_s, ...)
""", {"<sla key>": SLA_KEY})

PLAN = table("""
rank | — | the deployment's rank: SLA met first, cheapest $/hour first, then $ per million tokens
label | — | hardware / serving mode / variant
hardware | — | the hardware option's label
profile | — | its decode profile
mode | — | aggregated or disaggregated
prefill_per_decode | ratio | disaggregated: prefill replicas per decode replica
variant | — | the drafter / policy variant
block_size | tokens | the block size tried (search.block_sizes)
meets_sla | — | whether some size up to --max-replicas met the SLA
unmet | — | why not, when not met: the replica cap, a saturated prefill pool held fixed, or SLA statistics that stopped moving (the search stopped early)
decode_replicas | replicas | the answer: fewest decode replicas meeting the SLA
prefill_replicas | replicas | prefill replicas at the answer
gpus | GPUs | every GPU at the answer
gpus_decode | GPUs | decode GPUs at the answer
gpus_prefill | GPUs | prefill GPUs at the answer
prefill_pool | — | grows with the decode replicas (disaggregated) or empty without a pool
prefill_busy_share | share | the prefill pool's busy share at the answer, mean over seeds
prefix_cache_hit_rate | share | the prefix cache's hit rate at the answer, mean over seeds
gpu_hour_usd | USD/GPU-hour | the option's price
usd_per_hour | USD/hour | gpus × gpu_hour_usd
output_tokens_per_s | tokens/s | simulated output tokens per second at the answer
usd_per_million_tokens | USD per 10⁶ tokens | usd_per_hour / (output_tokens_per_s × 3600 / 10⁶)
largest_probed_replicas | replicas | the largest size simulated
one_fewer_replicas | replicas | the size below the answer, confirmed failing
one_fewer_keep_up | — | its keep-up verdict
sure | — | false when a bound lies inside its 95% interval at the answer or one fewer
probes | — | sizes simulated
engine_cap_binding | — | the serving engine's own cap that binds at the answer (summary.json engine_cap_binding, most seeds'), none when every cap admits the demand; empty where the engine's row has no caps
session_lanes | lanes | on agent sessions: the lanes planned (the demand)
sessions_completed | sessions | on agent sessions: sessions played whole inside the window at the answer, mean over seeds
session_wall_p50_s | s | on agent sessions: median session wall time at the answer, mean over seeds
session_wall_p90_s | s | on agent sessions: 90th percentile session wall time at the answer, mean over seeds
session_output_tokens_per_s_mean | tokens/s | on agent sessions: a session's output tokens per second of wall time at the answer, mean over seeds
<sla key> | the key's unit | mean over seeds of each SLA key at the answer
<sla key>_ci95 | the key's unit | half-width of its 95% interval over seeds
""", {"<sla key>": SLA_KEY,
      "<sla key>_ci95": r"(ttft|itl|tpot|tps_user|session_wall|session_output_tokens_per_s)_[a-z0-9_]+_ci95"})

REPLICATION = table("""
source | — | the case folder under benchmarks/published
reference | — | the public source (repository and PR or issue)
group | — | engine/GPU/layout group (layout: tp or dp-attention; the grid's tasks run per group)
level | — | serving (a benchmark client's run, simulated) or step (a static batch, priced by the step model alone)
model | — | the model the case ran, as step and serving cases are matched on it (e.g. deepseek-v4-flash)
kind | — | the kind of cell: a cookbook recipe's strategy (low-latency, balanced, high-throughput), PR case, or step case
gpu | — | the GPU the figure was measured on
gpu_count | GPUs | how many of them the deployment ran on (step and serving cases are matched on it too)
moe_path | — | the MoE kernel path the case's built-ins price: megamoe (SGLang's fused DeepGEMM MegaMoE) or default (the engine's default MoE path); step and serving cases are matched on it too
workload | — | the benchmarked workload
arm | — | the compared arm (a speed-up is an arm ratio, dspark/none)
metric | — | what was published (throughput, TPOT, TTFT, speed-up, sign), with its statistic (mean_, median_)
statistic | — | the statistic over requests the metric compares (mean or P50; - for a figure over the run)
length_rule | — | the lengths the benchmark client drew (uniform or fixed, source.yaml's length_rule; - where none)
concurrency | requests | the client's concurrency (a step case's batch size)
published | the unit column's | the published figure
unit | — | its unit as published
line | — | the published.csv line
basis | — | how the case runs (e.g. nearest database version)
status | — | ran, or why not (a case is never dropped silently)
predicted_value | the unit column's | predicted with nothing fitted
predicted_error | share | predicted / published − 1
eager_step_share | share | steps of the predicted run's first arm that ran eager (summary.json mode_step_share.eager); empty where no mode is modelled
eager_time_share | share | their share of the run's step time (mode_time_share.eager)
main_mode_reason | — | the reason most of its steps left the decode graph for, with its share of steps ("rank_prefilling 9%"; "decode_graph" when every step replayed one)
al_minus_10_value | the unit column's | predicted with the assumed acceptance length −10%
al_minus_10_change | share | al_minus_10_value / predicted_value − 1
al_plus_10_value | the unit column's | predicted with the assumed acceptance length +10%
al_plus_10_change | share | al_plus_10_value / predicted_value − 1
calibrated_value | the unit column's | predicted with the host time and step scale fitted on every figure of its engine version, layout and model (the calibration table's row)
calibrated_error | share | calibrated_value / published − 1
transferred_value | the unit column's | predicted with the fit on the other GPUs of its engine version, layout and model (leave one GPU out; empty where it has no other GPU)
transferred_error | share | transferred_value / published − 1
transferred_layout_value | the unit column's | predicted with the fit on the other layout of its engine version (leave one layout out; empty where there is none)
transferred_layout_error | share | transferred_layout_value / published − 1
responsible | — | with `replicate --attribute`, for a serving figure off by more than 30% (predicted): the mode, cap or rule whose one ablation brings |error| down most, by 5 points at least, else "step price" (attribution.py); empty otherwise
responsible_reason | — | what that ablation changed and the error before and after, or (step price) the run's records: the main reason steps left the decode graph, the binding cap, the closest ablation
""")

VERSION_SPREAD = table("""
source | — | the case folder under benchmarks/published
workload | — | the benchmarked workload
arm | — | the compared arm
concurrency | requests | the client's concurrency
quantity | — | TTFT, TPOT, ITL or output throughput (whatever the statistic)
stale_version | — | the engine version of the older run (source.yaml's spread)
stale_statistic | — | its statistic over requests (mean, P50; - for a figure over the run)
stale | the unit column's | the older run's figure (spread.csv)
newest_version | — | the engine version of the newest run (source.yaml's engine)
newest_statistic | — | its statistic
newest | the unit column's | the newest run's figure (published.csv)
unit | — | the unit of both, as the newest is published
ratio | ratio | newest / stale
note | — | how the two were made comparable, where they had to be (a total compared as output)
""")

CALIBRATION_RECORD = table("""
calibration | — | the calibration applied: the file of --calibration FILE (written by `specplan fit`), or the shipped table's row
calibration_deployment | — | the deployment it was fitted for: engine and version, GPU, model, layout (a table row: engine, version, layout and model)
calibration_transfer | — | the facts carried across by --calibration-transfer (fitted for -> used on), none when it matched
overrides | — | the scenario overrides it set, after the command line's own (engine.host_overhead_ms, a scaled hardware.profile, ...)
not_applied | — | the terms it holds that no scenario key prices (ttft_per_request_ms; dp_sync_ms off DP attention; extend_op_us where the engine prices no step by its kernel launches)
terms | — | every term of the file: value, interval and source
""")

FIT_RUNS = table("""
run | — | the run's file (and its line or concurrency for a file of several)
client | — | the tool that wrote it: sglang_bench_serving, vllm_bench_serve, aiperf, genai_perf, sglang_log
concurrency | requests | its max concurrency (the bench client's semaphore)
metric | — | the figure compared: output_throughput (tok/s), mean_tpot_ms, mean_ttft_ms
published | (metric's) | the run's own figure
fitted | (metric's) | the simulator's figure at the fitted terms
residual | ratio | fitted / published - 1
loo_predicted | (metric's) | the figure with the terms fitted on every other run (leave one run out)
loo_error | ratio | loo_predicted / published - 1: how far the fit carries to a run it did not see
""")

OUTPUT_FILES: tuple[OutputFile, ...] = (
    OutputFile("summary.json", "specplan run; simulate(); every sweep point and plan probe",
               "the run's figures (one JSON object)",
               SUMMARY + bench_keys("vllm_bench_serve", VLLM_BENCH, "vllm")
               + bench_keys("sglang_bench_serving", SGLANG_BENCH, "sglang")),
    OutputFile("requests.csv", "specplan run", "one row per arrived request",
               with_presence(REQUESTS, {POOL: ("prefill_replica", "cached_prompt_tokens")})),
    OutputFile("steps.csv", "specplan run", "one row per engine step", STEPS),
    OutputFile("prefill_steps.csv", "specplan run with cluster.prefill", "one row per prefill step", PREFILL_STEPS),
    OutputFile("points.csv", "specplan sweep / demo", "one row per variant × load × seed: every summary.json "
               "key but draft_record and notes, and these", POINT_EXTRA, extends="summary.json"),
    OutputFile("frontier.csv", "specplan sweep / demo", "each variant's Pareto frontier of throughput per GPU "
               "against tokens/s/user", FRONTIER),
    OutputFile("comparisons.csv", "specplan sweep / demo", "one row per SLA level × variant", COMPARISONS),
    OutputFile("lanes.csv", "specplan sweep over sweep.load.lanes (agent sessions)", "one row per lanes value × "
               "variant: its figures and its gains over the first variant at equal lanes, paired by seed", LANES),
    OutputFile("probes.csv", "specplan plan --out", "one row per variant × cluster size × seed", PROBES),
    OutputFile("probes/KEY.json", "specplan plan --out", "one plan probe run: its summary (every summary.json key "
               "and these), keep-up verdict and resolved scenario", PROBE_RECORD, extends="summary.json"),
    OutputFile("plan.csv", "specplan plan --out on a search: block", "one row per deployment, met or not", PLAN),
    OutputFile("replication.csv", "specplan replicate", "one row per published figure", REPLICATION),
    OutputFile("calibration.json", "specplan sweep / plan / tune --calibration FILE", "the calibration the "
               "command applied (one JSON object)", CALIBRATION_RECORD),
    OutputFile("fit_runs.csv", "specplan fit", "one row per run and figure: published, fitted, residual and the "
               "leave-one-run-out error", FIT_RUNS),
    OutputFile("version_spread.csv", "specplan replicate", "one row per figure published by an older and the "
               "newest run of the same cell (in no error statistic)", VERSION_SPREAD),
)


def output_file(name: str) -> OutputFile:
    return next(f for f in OUTPUT_FILES if f.name == name)


def describe(file: str, key: str) -> Output | None:
    """The registered key or column `key` of `file` (or of the file it extends: a point's row is a summary)."""
    entry = output_file(file)
    found = entry.describe(key)
    if found is None and entry.extends is not None:
        found = describe(entry.extends, key)
    return found


def contract_keys() -> tuple[str, ...]:
    """The summary keys docs/reference/outputs.md promises (every run writes them)."""
    return tuple(o.name for o in SUMMARY if o.contract)
