"""Drafting speed: microseconds per engine step for one full draw of a batch, by the engine's own code.

One draw is what the decode core does per step for a policy that reads the
drafts: acceptance logits x (R × γ, request and token spread:
`DraftReader.draw_logits`), the accepted prefixes (logistic draws below x)
and the STS-calibrated model head's confidences (`Drafter.confidences`).
A fixed-length policy's draw (`FixedLengths.draw`: uniform draws below the
noise-averaged acceptance) is timed beside it. Standard case:
R = 256 requests, γ = 7, DSpark on qwen3-8b, the default head
(overconfidence 1.5, noise 0.4, STS) and the default spread (request 0.7,
token 2.0). One core. Prints the median over `--repeats` runs of
`--steps` draws each.

    .venv/bin/python benchmarks/draft_speed.py [--requests 256] [--block 7] [--steps 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from reference import bracketed

from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.batch import Rows
from specplan.simulator.engine.core.decode import DecodeCore
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.intake import register
from specplan.simulator.engine.records.step_log import StepLog
from specplan.simulator.engine.speculator import DraftReader, FixedLengths
from specplan.simulator.scenario import Scenario, scenario_from_mapping


def standard_scenario(requests: int, block: int, policy: str) -> Scenario:
    return scenario_from_mapping({
        "name": "bench-draft", "seed": 1, "horizon": {"duration_s": 1},
        "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.02}},
        "engine": {"max_batch_requests": requests, "kv_capacity_tokens": 10**9},
        "drafter": {"family": "dspark", "block_size": block,
                    "acceptance": {"preset": "qwen3-8b", "domains": {"math": 0.3, "code": 0.3, "chat": 0.4}},
                    "confidence": {"kind": "model", "calibration": "sts"}},
        "policy": {"name": policy},
        "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 1000}},
    }, Path.cwd())


def full_core(scenario: Scenario) -> DecodeCore:
    """A decode core with `max_batch_requests` running requests admitted."""
    parts = assemble(scenario)
    drafter, config = parts.drafter, parts.config
    log = RequestLog()
    core = parts.core(log, StepLog())
    domains = np.random.default_rng(2).integers(0, len(drafter.acceptance.domains), config.engine.max_batch_requests)
    offsets = drafter.acceptance.request_offsets(domains.size, np.random.default_rng(3))
    for domain, offset in zip(domains.tolist(), offsets.tolist(), strict=True):
        rid = register(log, 0.0, 100, 1000, domain, offset)
        log.first_token(rid, 0.0, counted=True)
        core.enqueue(rid)
    core.admit(0.0)
    return core


def time_reading_draws(core: DecodeCore, steps: int) -> float:
    reader, batch = core.rules.speculator, core.state.batch
    assert isinstance(reader, DraftReader)
    rows = Rows.every(batch.n)
    start = time.perf_counter()
    for _ in range(steps):
        x, _prefix = reader.draw_logits(batch, rows)
        reader.confidence.observe(x, reader.rng_c)
    return (time.perf_counter() - start) / steps * 1e6


def time_fixed_draws(core: DecodeCore, steps: int) -> float:
    fixed, batch = core.rules.speculator, core.state.batch
    assert isinstance(fixed, FixedLengths)
    rows = Rows.every(batch.n)
    start = time.perf_counter()
    for _ in range(steps):
        fixed.draw(batch, rows, fixed.block_size)
    return (time.perf_counter() - start) / steps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--block", type=int, default=7)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    reading = full_core(standard_scenario(args.requests, args.block, "dspark-async"))
    fixed = full_core(standard_scenario(args.requests, args.block, "static"))
    for label, core, timer in (("x, outcomes and confidences (policies that read drafts)", reading,
                                time_reading_draws),
                               ("outcomes only (fixed-length policies)", fixed, time_fixed_draws)):
        timer(core, 50)  # warm-up
        bracketed_runs = [bracketed(lambda c=core, t=timer: t(c, args.steps)) for _ in range(args.repeats)]
        runs = [us for us, _ in bracketed_runs]
        us = statistics.median(runs)
        steps = statistics.median(us * reference / 1e6 for us, reference in bracketed_runs)
        reference = statistics.median(reference for _, reference in bracketed_runs)
        print(f"{label}: R={args.requests}, γ={args.block}: {us:.1f} µs/step "
              f"(median of {args.repeats} × {args.steps} steps; min {min(runs):.1f}, max {max(runs):.1f}; "
              f"{steps:.2f} reference steps; reference {reference:,.0f} steps/s)")


if __name__ == "__main__":
    main()
