"""A tuned length schedule → the files engines and scenarios read: the export of `specplan tune`.

    files = write_schedule_files(tuned, out_dir)
    schedule.yaml   the specplan `policy:` block (merge it into a scenario)
    trtllm.yaml     TensorRT-LLM's speculative_config (max_draft_len, draft_len_schedule)
    vllm.json       vLLM's --speculative-config keys that run it (num_speculative_tokens_per_batch_size,
                    vLLM >= 0.24; add your method and model)
    schedule.json   the draft length at every batch size 1..max_batch_requests
    tune.json       every bucket's candidates and the verification, as data (`tune_record`)

The search and its verification are `specplan.simulator.study.tune`; this
module only turns its result into files.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import yaml

from specplan.engines import trtllm, vllm
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.study.tune import TunedSchedule, schedule_policy


def policy_block(tuned: TunedSchedule) -> dict[str, Any]:
    """The scenario fragment that runs the schedule (`--merge schedule.yaml`)."""
    return {"policy": schedule_policy(tuned.schedule)}


def trtllm_block(tuned: TunedSchedule) -> dict[str, Any]:
    """TensorRT-LLM's speculative_config fragment: max_draft_len = the first (largest) length."""
    return trtllm.speculative_config(tuned.schedule)


def vllm_block(tuned: TunedSchedule) -> dict[str, Any]:
    """vLLM's speculative-config keys for the schedule: the largest length, and [first, last, length] ranges."""
    return {"num_speculative_tokens": max(tuned.schedule.values()),
            "num_speculative_tokens_per_batch_size": vllm.batch_size_ranges(
                tuned.schedule, tuned.base.engine.max_batch_requests)}


def bucket_records(tuned: TunedSchedule) -> list[dict[str, Any]]:
    return [{"batch_sizes": [c.low + 1, c.high], "read_at_batch": c.batch, "length": c.length,
             "tied": list(c.tied), "capped_from": c.capped_from,
             "candidates": {str(n): dataclasses.asdict(f) for n, f in c.figures.items()}} for c in tuned.buckets]


def tune_record(tuned: TunedSchedule) -> dict[str, Any]:
    """Everything the tune decided and measured, as plain JSON data (tune.json, `--json`)."""
    return clean({
        "scenario": tuned.base.name, "source": tuned.source, "drafter": tuned.base.drafter.family,
        "block_size": tuned.block_size, "objective": tuned.objective.describe(),
        "statistic": tuned.objective.statistic, "sla_tps_user": tuned.objective.sla_tps,
        "lengths": list(tuned.lengths), "schedule": {str(k): v for k, v in tuned.schedule.items()},
        "interval": tuned.interval, "warning": tuned.warning or None,
        "buckets": bucket_records(tuned), "comparison": tuned.comparison.to_dict(orient="records"),
        "points": {"search": len(tuned.search.points), "verification": len(tuned.verification.points),
                   "simulated": tuned.search.computed + tuned.verification.computed},
    })


TRTLLM_HEADER = (
    "# TensorRT-LLM LLM API options (trtllm-serve --extra_llm_api_options FILE, or LLM(speculative_config=...)).\n"
    "# draft_len_schedule: {batch-size upper bound: draft length}; batch sizes above the last key run with\n"
    "# draft length 0 (speculation off). TensorRT-LLM requires max_draft_len to equal the smallest key's\n"
    "# length and every length to be <= it. Keep your own decoding_type and speculative_model.\n")


def notes(tuned: TunedSchedule) -> str:
    """Comment lines every export carries: the warning, and the buckets the first bucket's length capped."""
    capped = [f"{c.sizes} at {c.length} (uncapped {c.capped_from})" for c in tuned.buckets if c.capped_from is not None]
    lines = [f"# WARNING: {tuned.warning}."] if tuned.warning else []
    if capped:
        lines.append("# Capped by the first bucket's length (TensorRT-LLM: max_draft_len is the first bucket's): "
                     "batch " + ", ".join(capped) + ".")
    return "".join(line + "\n" for line in lines)


def write_schedule_files(tuned: TunedSchedule, out: str | Path) -> dict[str, Path]:
    """schedule.yaml (specplan policy), trtllm.yaml, vllm.json, schedule.json (batch size → length), tune.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / name for name in ("schedule.yaml", "trtllm.yaml", "vllm.json", "schedule.json", "tune.json")}
    head = f"# Tuned by `specplan tune` for {tuned.base.name}: {tuned.objective.describe()}.\n" + notes(tuned)
    files["schedule.yaml"].write_text(head + yaml.safe_dump(policy_block(tuned), sort_keys=False))
    files["trtllm.yaml"].write_text(head + TRTLLM_HEADER + yaml.safe_dump(trtllm_block(tuned), sort_keys=False))
    files["vllm.json"].write_text(json.dumps(vllm_block(tuned), indent=1) + "\n")
    table = {"scenario": tuned.base.name, "block_size": tuned.block_size,
             "convention": "draft length for a step with exactly this many decoding requests",
             "batch_size_to_length": {str(k): v for k, v in tuned.per_batch().items()},
             **({"warning": tuned.warning} if tuned.warning else {})}
    files["schedule.json"].write_text(json.dumps(table, indent=1) + "\n")
    files["tune.json"].write_text(json.dumps(tune_record(tuned), indent=1) + "\n")
    return files
