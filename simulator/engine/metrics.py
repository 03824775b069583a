"""Records → the summary dict of the results contract (DESIGN.md §3).

The measurement window is (warmup_s, end of run]. Throughput counts tokens
emitted inside the window (decode steps ending in it, plus first tokens from
disaggregated prefill); per-request statistics use requests that arrived
after warmup and completed; per-step statistics use steps ending in the
window. Counts of requests (arrived, completed, running, rejected) cover the
whole run, so that they add up (conservation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from policies.registry import policy_class

SUMMARY_KEYS = (
    "policy", "throughput_tokens_per_s", "throughput_tokens_per_s_per_gpu", "tps_user_mean",
    "tps_user_p10", "tps_user_p50", "tps_user_p90", "ttft_p50_s", "ttft_p99_s", "requests_arrived",
    "requests_completed", "tokens_generated", "mean_accepted_per_step",
    "mean_verify_tokens_per_request_step", "mean_batch_requests", "simulated_s", "wall_s",
)


def percentile(values: pd.Series | np.ndarray, q: float) -> float:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.percentile(v, q)) if v.size else math.nan


def ratio(num: float, den: float) -> float:
    return float(num / den) if den else math.nan


def summarize(scenario: Any, requests: pd.DataFrame, steps: pd.DataFrame, end_s: float,
              wall_s: float, sim: Any = None) -> dict[str, Any]:
    warm = scenario.horizon.warmup_s
    window_s = max(end_s - warm, 1e-12)
    gpus = scenario.cluster.replicas * scenario.hardware.gpus_per_replica
    in_window = steps[steps["end_s"] > warm]
    prefill_first = 0
    if scenario.engine.prefill.KIND == "disaggregated":
        prefill_first = int(((requests["first_token_s"] > warm) & (requests["first_token_s"] <= end_s)).sum())
    tokens = int(in_window["emitted_tokens"].sum()) + prefill_first
    measured = requests[requests["arrival_s"] >= warm]
    completed = measured[measured["status"] == "completed"]
    tps = completed["tps_user"]
    decode_steps = float(in_window["decode_requests"].sum())
    step_s = (in_window["draft_ms"] + in_window["verify_ms"] + in_window["overhead_ms"]) / 1000.0
    cls = policy_class(scenario.policy.name)
    status = requests["status"]
    summary = {
        "policy": scenario.policy.name,
        "policy_label": cls.label(),
        "lossless": cls.lossless,
        "oracle": cls.oracle,
        "throughput_tokens_per_s": tokens / window_s,
        "throughput_tokens_per_s_per_gpu": tokens / window_s / gpus,
        "tps_user_mean": float(tps.mean()) if tps.notna().any() else math.nan,
        "tps_user_p10": percentile(tps, 10),
        "tps_user_p50": percentile(tps, 50),
        "tps_user_p90": percentile(tps, 90),
        "ttft_p50_s": percentile(measured["ttft_s"], 50),
        "ttft_p99_s": percentile(measured["ttft_s"], 99),
        "requests_arrived": len(requests),
        "requests_completed": int((status == "completed").sum()),
        "requests_running": int(status.isin(["queued", "prefill", "running"]).sum()),
        "requests_rejected": int((status == "rejected").sum()),
        "requests_completed_in_window": len(completed),
        "tokens_generated": tokens,
        "mean_accepted_per_step": ratio(in_window["accepted_tokens"].sum() + decode_steps, decode_steps),
        "mean_verify_tokens_per_request_step": ratio(
            (in_window["verify_tokens"] - in_window["prefill_tokens"]).sum(), decode_steps),
        "mean_batch_requests": float((in_window["batch_requests"] * step_s).sum()) / window_s
        / scenario.cluster.replicas,
        "mean_step_ms": ratio(float(step_s.sum()) * 1000.0, len(in_window)),
        "draft_share_of_step": ratio(float(in_window["draft_ms"].sum()), float(step_s.sum()) * 1000.0),
        "engine_steps": len(steps),
        "preemptions": int(requests["preemptions"].sum()),
        "replicas": scenario.cluster.replicas,
        "gpus": gpus,
        "window_s": window_s,
        "simulated_s": float(end_s),
        "wall_s": float(wall_s),
    }
    if sim is not None:
        summary.update(sim.budget.summary_counts())
    return summary
