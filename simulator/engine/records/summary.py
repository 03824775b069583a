"""Records → the summary dict of the results contract (docs/reference/outputs.md).

The measurement window is (warmup_s, end of run], or (warmup_s, the trace's
end] when a trace ran out before the horizon (`window_end_s`: its idle tail
would dilute throughput; the run goes on so its requests finish). Throughput
counts tokens emitted inside the window (decode steps ending in it, plus
first tokens the fixed-rate prefill stage emits with `first_token: prefill`);
per-request statistics use requests that arrived after warmup and completed;
per-step statistics use steps ending in the window. Counts of requests
(arrived, completed, running, rejected) cover the whole run, so that they
add up (conservation).

`mean_accepted_per_step` is τ pooled over proposals, as published figures
are (docs/model/drafters.md): Σ (accepted + 1) over request-steps / request-steps.

Inter-token latency (ITL) is read from the per-step emissions (the
`ChunkLog`): a request's inter-token latencies are its step gaps, the time
from its first token to the end of the next decode step that gave it
tokens, then from each such step to the next (a step that emits accepted + 1
tokens is one gap, as a streaming client sees it and as `vllm bench serve`
counts ITL; a decode step that emits the first token opens the stream: no
gap). `itl_*_ms` pool the gaps of every measured completed request (arrived
after warmup) and take numpy's mean and linear percentiles.

How the steps ran (`mode_fields`, specplan.simulator.engine.step_modes): the share
of the window's steps, and of its step time, per mode (`mode_step_share.graph`,
`.piecewise`, `.eager`, `.unmodelled`), per reason (`mode_reason_step_share.<reason>`,
for each reason that occurred) and per all-to-all mode where one ran
(`all_to_all_step_share.<mode>`).

The engine's own caps (`cap_fields`, specplan.engines.caps), where the serving
engine's row has them and the profile names its model and GPUs: the
admission cap that binds the run's demand (`engine_cap_binding`: the tightest
cap when fewer requests per rank than the run's mean outstanding requests per
rank, else none), the tightest cap and its requests per rank, the graph cap
and the engine's memory fraction.

`notes`: what loading the scenario took from its profile or kept against it
(`Scenario.notes`: DP ranks from a header, a memory model that leaves no
pool at the engine's fraction, a stated KV pool above the engine's), one
line each, so a stored run says what `run` printed.

`summarize` assembles the parts; each part takes only what it needs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specplan.engines.caps import CapFacts, Caps
from specplan.engines.modes import MODES
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import serving_engine
from specplan.hwprofiles.profile import StepProfile
from specplan.policies.registry import policy_class
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.core.request_log import REJECT_REASONS
from specplan.simulator.engine.records.step_log import ChunkLog
from specplan.simulator.scenario import Scenario
from specplan.simulator.scenario.memory import engine_kv_pool


@dataclass(frozen=True)
class Window:
    """The measurement window (warmup_s, end_s]."""

    warmup_s: float
    end_s: float

    @property
    def seconds(self) -> float:
        return max(self.end_s - self.warmup_s, 1e-12)


def percentile(values: pd.Series | np.ndarray, q: float) -> float:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.percentile(v, q)) if v.size else math.nan


def ratio(num: float, den: float) -> float:
    return float(num / den) if den else math.nan


def summarize(scenario: Scenario, requests: pd.DataFrame, steps: pd.DataFrame, end_s: float, wall_s: float,
              profile: StepProfile | None = None, extra_counts: dict[str, int] | None = None,
              chunks: ChunkLog | None = None, window_end_s: float | None = None) -> dict[str, Any]:
    """The whole summary of a run ending at `end_s`, measured to `window_end_s` (default: the end); `profile`
    (optional) splits attention out of the verify time, `chunks` (the per-step emissions) gives the
    inter-token latencies (NaN without)."""
    window = Window(scenario.horizon.warmup_s, end_s if window_end_s is None else window_end_s)
    ends = steps["end_s"]
    in_window = steps[(ends > window.warmup_s) & (ends <= window.end_s)]
    replicas = scenario.cluster.replicas
    gpus_decode = replicas * scenario.hardware.gpus_per_replica
    pool = scenario.cluster.prefill
    gpus = gpus_decode + (pool.gpus if pool is not None else 0)
    summary = {
        **policy_fields(scenario.policy.name),
        **throughput_fields(requests, in_window, window, gpus, scenario.engine.prefill.stage_first_token),
        **user_fields(requests, window),
        **itl_fields(requests, window, chunks),
        **request_counts(requests),
        **step_fields(in_window, window, replicas, profile),
        **mode_fields(in_window),
        "engine_steps": len(steps),
        "preemptions": int(requests["preemptions"].sum()),
        "replicas": replicas,
        "gpus": gpus,
        **kv_fields(scenario, profile),
        **engine_cap_fields(scenario, profile, requests, window),
        "window_s": window.seconds,
        "simulated_s": float(end_s),
        "wall_s": float(wall_s),
        "notes": list(scenario.notes),
    }
    if pool is not None:
        summary.update(gpus_prefill=pool.gpus, gpus_decode=gpus_decode, gpus_total=gpus)
        summary.update(pool_counts(requests))
    summary.update(extra_counts or {})
    return summary


def kv_fields(scenario: Scenario, profile: StepProfile | None) -> dict[str, Any]:
    """The KV capacity one replica ran with, and where it came from: the profile's memory model at the engine's
    memory fraction (the default where the scenario gives none) or the scenario."""
    kv_tokens = scenario.engine.kv_capacity_tokens
    profile = profile or load_profile(scenario.hardware.profile)
    block = scenario.drafter.block_size if scenario.drafter.speculates else 0
    serving = serving_engine(scenario.engine.name, scenario.engine.version, profile)
    pool = engine_kv_pool(scenario.engine, serving, profile, block)
    source = "profile memory model" if pool is not None and kv_tokens == pool else "scenario"
    return {"kv_capacity_tokens": kv_tokens, "kv_capacity_source": source}


def pool_counts(requests: pd.DataFrame) -> dict[str, int]:
    """Where the requests of a prefill-pool run are: every arrived one is in exactly one place."""
    status = requests["status"]
    return {"requests_in_prefill": int((status == "prefill").sum()),
            "requests_in_transfer": int((status == "transfer").sum()),
            "requests_at_decode": int(status.isin(["queued", "running"]).sum())}


def policy_fields(name: str) -> dict[str, Any]:
    cls = policy_class(name)
    return {"policy": name, "policy_label": cls.label(), "lossless": cls.lossless, "oracle": cls.oracle,
            "scheduling_overhead": cls.scheduling_overhead()}


def throughput_fields(requests: pd.DataFrame, in_window: pd.DataFrame, window: Window, gpus: int,
                      stage_first_token: bool) -> dict[str, Any]:
    """Tokens emitted in the window: by the engine's steps, and first tokens the prefill stage emitted
    (`engine.prefill.first_token: prefill`; otherwise a decode step emits them)."""
    prefill_first = 0
    if stage_first_token:
        first = requests["first_token_s"]
        prefill_first = int(((first > window.warmup_s) & (first <= window.end_s)).sum())
    tokens = int(in_window["emitted_tokens"].sum()) + prefill_first
    return {"throughput_tokens_per_s": tokens / window.seconds,
            "throughput_tokens_per_s_per_gpu": tokens / window.seconds / gpus,
            "tokens_generated": tokens}


def user_fields(requests: pd.DataFrame, window: Window) -> dict[str, Any]:
    """Tokens/s/user, TPOT (its inverse, per request) and TTFT of requests that arrived after warmup (completed
    ones for tps and TPOT)."""
    measured = requests[requests["arrival_s"] >= window.warmup_s]
    completed = measured[measured["status"] == "completed"]
    tps = completed["tps_user"]
    tpot_ms = 1000.0 / tps[tps > 0]  # a request's time per output token, (finish − first token) / (output − 1)
    return {
        "tps_user_mean": float(tps.mean()) if tps.notna().any() else math.nan,
        "tps_user_p10": percentile(tps, 10),
        "tps_user_p50": percentile(tps, 50),
        "tps_user_p90": percentile(tps, 90),
        "tpot_mean_ms": float(tpot_ms.mean()) if tpot_ms.size else math.nan,
        "tpot_p50_ms": percentile(tpot_ms, 50),
        "tpot_p90_ms": percentile(tpot_ms, 90),
        "tpot_p99_ms": percentile(tpot_ms, 99),
        "ttft_p50_s": percentile(measured["ttft_s"], 50),
        "ttft_p90_s": percentile(measured["ttft_s"], 90),
        "ttft_p99_s": percentile(measured["ttft_s"], 99),
        "requests_completed_in_window": len(completed),
    }


def itl_fields(requests: pd.DataFrame, window: Window, chunks: ChunkLog | None) -> dict[str, float]:
    """Mean and p50/p90/p99 of the step gaps of completed requests that arrived after warmup (ms)."""
    gaps = np.zeros(0)
    if chunks is not None:
        measured = requests[(requests["arrival_s"] >= window.warmup_s) & (requests["status"] == "completed")]
        gaps = step_gaps(measured, chunks)
    if not gaps.size:
        return {"itl_mean_ms": math.nan, "itl_p50_ms": math.nan, "itl_p90_ms": math.nan, "itl_p99_ms": math.nan}
    p50, p90, p99 = np.percentile(gaps, [50, 90, 99]) * 1e3  # one partition for the three
    return {"itl_mean_ms": float(gaps.mean()) * 1e3, "itl_p50_ms": float(p50), "itl_p90_ms": float(p90),
            "itl_p99_ms": float(p99)}


def step_gaps(measured: pd.DataFrame, chunks: ChunkLog) -> np.ndarray:
    """Every gap between a measured request's successive emissions (its first token, then each step):
    each chunk's time minus the request's previous emission (`ChunkLog` tracks it; the first token's
    time for its first chunk). The chunk of the step that emitted the first token (a decode step after
    disaggregated prefill) is that token's own: no gap."""
    times, rids, previous = chunks.emissions()
    if not len(measured) or not rids.size:
        return np.zeros(0)
    ids = measured["request_id"].to_numpy(dtype=np.int64)
    first_token = np.full(int(max(ids.max(), rids.max())) + 1, np.nan)
    first_token[ids] = measured["first_token_s"].to_numpy(dtype=float)
    start = first_token[rids]
    keep = times > start  # False for requests not measured (NaN) and for the first token's own chunk
    since = np.where(np.isnan(previous), start, previous)
    return times[keep] - since[keep]


def request_counts(requests: pd.DataFrame) -> dict[str, int]:
    """Requests by where they ended; the rejected ones also by reason (requests_rejected_<reason>)."""
    status = requests["status"]
    reasons = requests.loc[status == "rejected", "reject_reason"]
    return {"requests_arrived": len(requests),
            "requests_completed": int((status == "completed").sum()),
            "requests_running": int(status.isin(["queued", "prefill", "transfer", "running"]).sum()),
            "requests_rejected": int((status == "rejected").sum()),
            **{f"requests_rejected_{reason}": int(reasons.str.startswith(f"{reason}:").sum())
               for reason in REJECT_REASONS}}


def step_fields(in_window: pd.DataFrame, window: Window, replicas: int,
                profile: StepProfile | None) -> dict[str, Any]:
    """Per request-step figures (pooled τ, 1 + ℓ, deferrals) and where the step time went."""
    decode_steps = float(in_window["decode_requests"].sum())
    deferred = int(in_window["deferred_requests"].sum())
    step_ms = in_window["draft_ms"] + in_window["verify_ms"] + in_window["overhead_ms"]
    total_ms = float(step_ms.sum())
    attention_ms = attention_time(in_window, profile)
    return {
        "mean_accepted_per_step": ratio(in_window["accepted_tokens"].sum() + decode_steps, decode_steps),
        "mean_verify_tokens_per_request_step": ratio(
            (in_window["verify_tokens"] - in_window["prefill_tokens"]).sum(), decode_steps),
        "mean_batch_requests": float((in_window["batch_requests"] * step_ms).sum()) / 1000.0 / window.seconds
        / replicas,
        "mean_decode_requests": ratio(decode_steps, len(in_window)),
        "request_steps_deferred": deferred,
        "draft_tokens_truncated": int(in_window["truncated_drafts"].sum()),
        "deferred_share": ratio(deferred, decode_steps + deferred),
        "mean_step_ms": ratio(total_ms, len(in_window)),
        "draft_share_of_step": ratio(float(in_window["draft_ms"].sum()), total_ms),
        "verify_share_of_step": ratio(float(in_window["verify_ms"].sum()), total_ms),
        "attention_share_of_step": ratio(attention_ms, total_ms),
        "overhead_share_of_step": ratio(float(in_window["overhead_ms"].sum()), total_ms),
    }


def mode_fields(in_window: pd.DataFrame) -> dict[str, float]:
    """The share of the window's steps and of its step time per mode, per reason that occurred, and per
    all-to-all mode that ran (module docstring)."""
    steps = len(in_window)
    step_ms = (in_window["draft_ms"] + in_window["verify_ms"] + in_window["overhead_ms"]).to_numpy()
    total_ms = float(step_ms.sum())
    out: dict[str, float] = {}
    for column, prefix, always in (("mode", "mode", MODES), ("mode_reason", "mode_reason", ()),
                                   ("all_to_all", "all_to_all", ())):
        values = in_window[column].to_numpy()
        seen = [v for v in dict.fromkeys(values) if column != "all_to_all" or v != "none"]
        for value in (*always, *sorted(set(seen) - set(always))):
            hit = values == value
            out[f"{prefix}_step_share.{value}"] = ratio(float(hit.sum()), steps)
            if column != "all_to_all":
                out[f"{prefix}_time_share.{value}"] = ratio(float(step_ms[hit].sum()), total_ms)
    return out


def engine_cap_fields(scenario: Scenario, profile: StepProfile | None, requests: pd.DataFrame,
                      window: Window) -> dict[str, Any]:
    """`cap_fields` for the engine the scenario runs (its settings resolved as its cores were: EngineConfig)."""
    profile = profile or load_profile(scenario.hardware.profile)
    block = scenario.drafter.block_size if scenario.drafter.speculates else 0
    config = EngineConfig.from_scenario(scenario, profile, block)
    return cap_fields(config.cap_facts, config.serving.caps, requests, window, scenario.cluster.replicas,
                      scenario.cluster.prefill is not None)


def cap_fields(facts: CapFacts | None, caps: Caps | None, requests: pd.DataFrame, window: Window,
               replicas: int, pool: bool) -> dict[str, Any]:
    """The engine's own caps against the run's demand (module docstring); {} where they are not known.

    Demand: requests outstanding at a decode replica (from arrival, or from their KV's arrival behind a
    prefill pool, to their last token or the window's end), mean over the window, per replica and rank."""
    if facts is None or caps is None:
        return {}
    kept = requests[requests["status"] != "rejected"]
    sizes = (kept["prompt_tokens"] + kept["output_tokens"]).to_numpy(dtype=float)
    report = caps.report(dataclasses.replace(facts, request_tokens=math.ceil(sizes.mean()) if sizes.size else None))
    start = kept["kv_ready_s" if pool else "arrival_s"].to_numpy(dtype=float)
    end = np.nan_to_num(kept["finish_s"].to_numpy(dtype=float), nan=window.end_s)
    held = np.clip(np.minimum(end, window.end_s) - np.maximum(np.nan_to_num(start, nan=window.end_s),
                                                                window.warmup_s), 0.0, None)
    demand = float(held.sum()) / window.seconds / replicas / facts.dp
    tightest, graph = report.tightest, report.graph_cap
    binding = report.binding(math.ceil(demand))
    return {"engine_cap_binding": "none" if binding is None else binding.name,
            "engine_cap_tightest": None if tightest is None else tightest.name,
            "engine_cap_tightest_requests_per_rank": None if tightest is None else tightest.requests_per_rank,
            "engine_cap_demand_per_rank": demand,
            "engine_graph_cap_requests_per_rank": None if graph is None else graph.requests_per_rank,
            "engine_mem_fraction_static": caps.mem_fraction_static(facts)}


def attention_time(steps: pd.DataFrame, profile: StepProfile | None) -> float:
    """ms of the verify forwards spent on KV context: step_ms(B, context) − step_ms(B, 0), summed.

    NaN without a profile that has a context axis (the split is then unknown). A step beyond the
    profile's last point (a separate prefill batch of more tokens) reads its last point.
    """
    if profile is None or profile.context_tokens is None or steps.empty:
        return math.nan
    tokens = np.maximum(steps["verify_tokens"].to_numpy(), 1)
    if profile.extrapolation == "none":
        tokens = np.minimum(tokens, profile.max_tokens)
    with_context = profile.step_ms(tokens, steps["context_tokens"].to_numpy())
    without = profile.step_ms(tokens, np.zeros(tokens.size))
    return float((with_context - without).sum())
