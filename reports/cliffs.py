"""A sweep's hardware profiles → dense step-time curves with their cliffs, for the profile figure.

A cliff is a jump of the step time from one token count to the next larger
than `CLIFF_FRACTION` of the step: CUDA-graph padding to a captured batch
size, GEMM tile or wave quantisation. Profiles interpolate linearly between
measured points and are never smoothed, so cliffs show as they were measured.
The curve spans the token counts the sweep's engines can reach
(`max_step_tokens`, else max batch × (1 + block)), capped at the last measured point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.profile import CLIFF_FRACTION, StepProfile, find_cliffs
from specplan.simulator.study.points import SweepDesign

__all__ = ["CLIFF_FRACTION", "ProfileCurve", "find_cliffs", "profile_curves", "reach_tokens"]


@dataclass(frozen=True)
class ProfileCurve:
    """One profile at every token count 1..upper: step times, measured points, cliffs."""

    name: str
    labels: str
    profile: StepProfile
    tokens: np.ndarray
    step_ms: np.ndarray
    measured_tokens: np.ndarray
    measured_ms: np.ndarray
    cliffs: np.ndarray
    cliff_ms: np.ndarray


def reach_tokens(scenario: Any) -> int:
    engine = scenario.engine
    if engine.max_step_tokens:
        return int(engine.max_step_tokens)
    return int(engine.max_batch_requests * (1 + max(scenario.drafter.block_size, 0)))


def profile_curves(design: SweepDesign) -> list[ProfileCurve]:
    """One curve per distinct `hardware.profile` among the sweep's labels."""
    groups: list[tuple[Any, list[str], int]] = []
    for label, scenario in design.variant_scenarios.items():
        spec = scenario.hardware.profile
        match = next((g for g in groups if g[0] == spec), None)
        if match is None:
            groups.append((spec, [label], reach_tokens(scenario)))
        else:
            match[1].append(label)
            groups[groups.index(match)] = (spec, match[1], max(match[2], reach_tokens(scenario)))
    return [dense_curve(load_profile(spec), labels, reach) for spec, labels, reach in groups]


def dense_curve(profile: StepProfile, labels: list[str], reach: int) -> ProfileCurve:
    upper = max(1, min(reach, profile.max_tokens))
    tokens = np.arange(1, upper + 1)
    step_ms = np.asarray(profile.step_ms(tokens), dtype=float)
    measured = profile.tokens[profile.tokens <= upper]
    cliffs = find_cliffs(tokens, step_ms)
    shown = ", ".join(labels) if len(labels) <= 3 else f"{len(labels)} variants"
    return ProfileCurve(profile.name, shown, profile, tokens, step_ms, measured,
                        np.asarray(profile.step_ms(measured), dtype=float), tokens[cliffs], step_ms[cliffs])
