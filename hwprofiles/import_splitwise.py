"""Importer for splitwise-sim's `perf_model.csv`: measured decode step time vs batch size.

splitwise-sim (Mutinifni/splitwise-sim at 8f99e7d, MIT) recorded, per model,
hardware and tensor-parallel degree, end-to-end runs with columns
`model,hardware,prompt_size,batch_size,token_size,...,prompt_time,token_time,
e2e_time,tensor_parallel`; `token_time` is the mean time (ms) of one decode
iteration of the whole batch. In a decode step every request contributes one
token, so the step-time curve is `token_time` against `batch_size` tokens.
Repeated runs are reduced to their median (p10/p90 kept as spread).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.profile import StepProfile

SOURCE = "Mutinifni/splitwise-sim at 8f99e7d (MIT license, Copyright (c) 2024 Pratyush Patel)"


def read_splitwise(path: str | Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read splitwise perf model ({exc.strerror})") from None
    need = {"model", "hardware", "prompt_size", "batch_size", "token_size", "token_time", "tensor_parallel"}
    if not rows or not need <= set(rows[0]):
        raise ProfileError(f"{path}: not a splitwise perf_model.csv (needs columns {', '.join(sorted(need))})")
    return rows


def splitwise_profile(
    path: str | Path, model: str, hardware: str, tensor_parallel: int,
    prompt_size: int = 512, token_size: int = 128, name: str | None = None,
) -> StepProfile:
    """Decode step time vs batch size for one (model, hardware, TP, prompt, output) setting."""
    rows = [r for r in read_splitwise(path)
            if r["model"] == model and r["hardware"] == hardware
            and int(r["tensor_parallel"]) == tensor_parallel
            and int(r["prompt_size"]) == prompt_size and int(r["token_size"]) == token_size]
    if not rows:
        raise ProfileError(
            f"{path}: no rows for {model} on {hardware} at TP {tensor_parallel}, "
            f"prompt {prompt_size}, output {token_size}"
        )
    batch = np.array([int(r["batch_size"]) for r in rows])
    times = np.array([float(r["token_time"]) for r in rows])
    tokens = np.unique(batch)
    groups = [times[batch == b] for b in tokens]
    return StepProfile(
        name=name or f"splitwise-{hardware}-{model}-tp{tensor_parallel}",
        tokens=tokens,
        step_ms_table=np.array([np.median(g) for g in groups]),
        provenance={
            "device": f"{hardware} x {tensor_parallel} (tensor parallel {tensor_parallel})",
            "model": model,
            "dtype": "16-bit (as served in splitwise-sim's measurements)",
            "source": f"{SOURCE}, file perf_model.csv; imported by hwprofiles/import_splitwise.py",
            "license": "MIT (splitwise-sim); derived table, not the raw runs",
            "derivation": (
                f"decode iteration time token_time vs batch_size (one token per request), runs with "
                f"prompt {prompt_size} and {token_size} output tokens"
            ),
            "context_per_request": f"{prompt_size} to {prompt_size + token_size} tokens during decode",
            "capture_mode": "as served by the measured engine (end-to-end decode iterations)",
            "repeats": " ".join(str(len(g)) for g in groups),
            "statistic": "median over repeated runs; p10_ms/p90_ms over the same runs",
        },
        extra={"columns": {"p10_ms": np.array([np.percentile(g, 10) for g in groups]),
                           "p90_ms": np.array([np.percentile(g, 90) for g in groups])}},
    )
