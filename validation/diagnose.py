"""Where a fidelity miss comes from: the engine's measured step parts against their prices.

The simulator prices one step as

    drafter.F(R·γ)  +  target(B, Σ KV tokens)  +  host a + b·requests

`step_time_check(steps, target_csv, drafter_csv, host)` takes the steps a
real run recorded (validation.engine: measured draft_ms, verify_ms, host
time as overhead_ms, and the KV context of each step) and prices each step
with the same three terms. Each part's `ratio` is Σ measured / Σ priced over
the run; `verify_ratio_with_prefill` and `_decode_only` split the verify
forward by whether a prompt chunk shared it (prefill interference). A ratio
far from 1 names the term the simulator gets wrong; queueing and acceptance
are then what is left to explain the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hwprofiles import load_profile
from simulator.drafters.latency_models import forward_ms


def ratio(measured: np.ndarray, priced: np.ndarray) -> float:
    total = float(np.sum(priced))
    return float(np.sum(measured)) / total if total > 0 else float("nan")


def step_time_check(steps: Any, target_csv: Path, drafter_csv: Path, host: tuple[float, float],
                    block_size: int | None = None) -> dict[str, Any]:
    """Measured vs priced totals of each step part over one run (see the module docstring)."""
    if len(steps) == 0:
        return {"steps": 0}
    target = load_profile(str(target_csv))
    drafter = load_profile(str(drafter_csv))
    gamma = block_size if block_size is not None else _block_from(drafter)
    tokens = steps["verify_tokens"].to_numpy()
    context = steps["context_tokens"].to_numpy() if "context_tokens" in steps else None
    verify_priced = np.asarray(target.step_ms(tokens, context), dtype=float)
    drafting = steps["drafting_requests"].to_numpy()
    draft_priced = np.array([forward_ms(drafter, int(r) * gamma) if r else 0.0 for r in drafting])
    host_priced = host[0] + host[1] * steps["batch_requests"].to_numpy(float)
    verify = steps["verify_ms"].to_numpy(float)
    prefill = steps["prefill_tokens"].to_numpy() > 0
    measured_total = verify + steps["draft_ms"].to_numpy(float) + steps["overhead_ms"].to_numpy(float)
    return {
        "steps": len(steps),
        "steps_with_prefill": int(prefill.sum()),
        "verify_ratio": ratio(verify, verify_priced),
        "verify_ratio_with_prefill": ratio(verify[prefill], verify_priced[prefill]),
        "verify_ratio_decode_only": ratio(verify[~prefill], verify_priced[~prefill]),
        "draft_ratio": ratio(steps["draft_ms"].to_numpy(float), draft_priced),
        "host_ratio": ratio(steps["overhead_ms"].to_numpy(float), host_priced),
        "step_ratio": ratio(measured_total, verify_priced + draft_priced + host_priced),
        "mean_measured_ms": {"verify": float(verify.mean()), "draft": float(steps["draft_ms"].mean()),
                             "host": float(steps["overhead_ms"].mean())},
    }


def _block_from(drafter: Any) -> int:
    """γ of a harness drafter profile: its smallest token count (one request's block)."""
    return int(drafter.tokens[0])
