"""Where a fidelity miss comes from: the engine's measured step parts against their prices.

The simulator prices one step as

    drafter.F(R·(γ+1))  +  target(B, KV context)  +  host a + b·requests

(the context as `engine.attention` counts it; the host term is
`engine.host_overhead_ms` and `_per_request_ms`, calibrated by
`specplan.validation.fidelity` on the host time a separate run measured).
`step_time_check(steps, target_csv, drafter_csv, host, block_size)` takes
the steps a real run recorded (specplan.validation.engine: measured draft_ms,
verify_ms, host time as overhead_ms, and the KV context of each step) and
prices each step with the same three terms. Each `ratio` is Σ measured /
Σ priced over the run: `verify_ratio` and `draft_ratio` compare the forwards
inside the serving loop with the harness's back-to-back timing (split by
whether a prompt chunk shared the forward: prefill interference),
`unpriced_ratio` the rest of the step (measured − priced forwards) against
the host term, `step_ratio` the whole step. A ratio far from 1
names the term the simulator gets wrong; queueing and acceptance are then
what is left to explain the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.simulator.drafters.latency_models import Forward


def ratio(measured: np.ndarray, priced: np.ndarray) -> float:
    total = float(np.sum(priced))
    return float(np.sum(measured)) / total if total > 0 else float("nan")


def priced_parts(steps: Any, target_csv: Path, drafter_csv: Path, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(verify, draft) ms per step as the simulator prices them from the two profiles."""
    target = load_profile(str(target_csv))
    drafter = Forward(load_profile(str(drafter_csv)))
    tokens = steps["verify_tokens"].to_numpy()
    context = steps["context_tokens"].to_numpy() if "context_tokens" in steps else None
    verify = np.asarray(target.step_ms(tokens, context), dtype=float)
    drafting = steps["drafting_requests"].to_numpy()
    draft = np.array([drafter(int(r) * (block_size + 1)) if r else 0.0 for r in drafting])
    return verify, draft


def measured_total_ms(steps: Any) -> np.ndarray:
    return (steps["verify_ms"] + steps["draft_ms"] + steps["overhead_ms"]).to_numpy(float)


def step_time_check(steps: Any, target_csv: Path, drafter_csv: Path, host: tuple[float, float],
                    block_size: int) -> dict[str, Any]:
    """Measured vs priced totals of each step part over one run (see the module docstring)."""
    if len(steps) == 0:
        return {"steps": 0}
    verify_priced, draft_priced = priced_parts(steps, target_csv, drafter_csv, block_size)
    unpriced_priced = host[0] + host[1] * steps["batch_requests"].to_numpy(float)
    verify = steps["verify_ms"].to_numpy(float)
    draft = steps["draft_ms"].to_numpy(float)
    prefill = steps["prefill_tokens"].to_numpy() > 0
    total = measured_total_ms(steps)
    return {
        "steps": len(steps),
        "steps_with_prefill": int(prefill.sum()),
        "verify_ratio": ratio(verify, verify_priced),
        "verify_ratio_with_prefill": ratio(verify[prefill], verify_priced[prefill]),
        "verify_ratio_decode_only": ratio(verify[~prefill], verify_priced[~prefill]),
        "draft_ratio": ratio(draft, draft_priced),
        "unpriced_ratio": ratio(total - verify_priced - draft_priced, unpriced_priced),
        "step_ratio": ratio(total, verify_priced + draft_priced + unpriced_priced),
        "mean_measured_ms": {"verify": float(verify.mean()), "draft": float(draft.mean()),
                             "host": float(steps["overhead_ms"].mean()), "step": float(total.mean())},
        "mean_priced_ms": {"verify": float(verify_priced.mean()), "draft": float(draft_priced.mean()),
                           "unpriced": float(unpriced_priced.mean())},
    }
