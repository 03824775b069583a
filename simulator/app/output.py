"""Writing results: JSON without NaN, the terminal summary table, the results folder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from specplan.simulator.core.jsonsafe import dumps
from specplan.simulator.drafters.vllm_metrics import exposition_text
from specplan.simulator.scenario import write_resolved


def write_run(result: Any, out_dir: Path) -> None:
    """summary.json, requests.csv, steps.csv (prefill_steps.csv with a prefill pool), scenario.resolved.yaml
    and metrics.prom in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(dumps(result.summary))
    result.requests.to_csv(out_dir / "requests.csv", index=False, float_format="%.9g")
    result.steps.to_csv(out_dir / "steps.csv", index=False, float_format="%.9g")
    if getattr(result, "prefill_steps", None) is not None:   # a prefill pool's steps
        result.prefill_steps.to_csv(out_dir / "prefill_steps.csv", index=False, float_format="%.9g")
    write_resolved(result.scenario, out_dir / "scenario.resolved.yaml")
    write_metrics(result, out_dir)


def write_metrics(result: Any, out_dir: Path) -> None:
    """metrics.prom: vLLM's speculative-decoding counters as a vLLM server would show them after
    this run (the whole run, every replica summed as engine "0"); none when nothing speculates,
    as a vLLM server without a speculative config exports none."""
    scenario = result.scenario
    if not scenario.drafter.speculates:
        return
    spec = result.spec
    comment = (f"specplan: simulated run of scenario {scenario.name} (seed {scenario.seed}, policy "
               f"{scenario.policy.name}, {result.summary['simulated_s']:g} simulated s, "
               f"{scenario.cluster.replicas} replica(s) summed as engine 0)")
    text = exposition_text(scenario.name, spec.drafts, spec.draft_tokens, spec.accepted_per_position.tolist(),
                           comment=comment)
    (out_dir / "metrics.prom").write_text(text)


ROWS = (
    ("policy", "policy_label", "{}"),
    ("throughput", "throughput_tokens_per_s", "{:,.0f} tok/s"),
    ("throughput / GPU", "throughput_tokens_per_s_per_gpu", "{:,.0f} tok/s"),
    ("tokens/s/user p10 / p50 / p90", ("tps_user_p10", "tps_user_p50", "tps_user_p90"), "{:.1f}"),
    ("TTFT p50 / p99", ("ttft_p50_s", "ttft_p99_s"), "{:.3f} s"),
    ("requests arrived / completed / running / rejected",
     ("requests_arrived", "requests_completed", "requests_running", "requests_rejected"), "{}"),
    ("tokens per request-step (τ)", "mean_accepted_per_step", "{:.3f}"),
    ("verify tokens per request-step (1+ℓ)", "mean_verify_tokens_per_request_step", "{:.3f}"),
    ("mean running requests / replica", "mean_batch_requests", "{:.1f}"),
    ("simulated / wall", ("simulated_s", "wall_s"), "{:.1f} s"),
)


def fmt(template: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return template.format(value)


def summary_table(summary: dict[str, Any], title: str = "") -> str:
    lines = [title] if title else []
    for label, keys, template in ROWS:
        names = keys if isinstance(keys, tuple) else (keys,)
        text = " / ".join(fmt(template, summary.get(k)) for k in names)
        lines.append(f"  {label:<50} {text}")
    return "\n".join(lines)
