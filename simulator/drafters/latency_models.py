"""Drafting latency per engine step by drafter family: `ms(drafting_requests, block_size)`.

A family fixes how many drafter forwards one step takes and over how many
tokens (R drafting requests, block γ); a cost curve prices one forward:

    mtp      k = γ sequential MTP modules, each a forward over R tokens:  γ · F(R)
    eagle3   γ sequential passes of the drafter over R tokens:           γ · F(R)   (linear in γ)
    dflash   one parallel forward over the whole block, R·γ tokens:      F(R·γ)     (flat in γ while
             R·γ stays in the memory-bound part of the curve)
    dspark   the DFlash backbone plus a tiny sequential head per position:
             F(R·γ) + γ · H(R)

F comes from the target's profile scaled by the drafter's share of it
(`kind: layers`: drafter_layers / target_layers + lm_head_fraction) or
from a drafter profile measured by the harness (`kind: profile`). H, the
Markov head `W1[x_{k−1}] W2` (rank 256) applied to R tokens, is
`markov_head_fraction` of a target step at R tokens; at the default 0.005
it adds 0.2–1.3% of a round at R = 128 for γ = 4..16 on an H200-like
roofline, as DSpark reports. Beyond a profile's last measured point a
forward is priced proportionally to its tokens (the profile's own
extrapolation rule when it declares one), never below it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hwprofiles import load_profile
from simulator.core.errors import SpecplanError
from simulator.drafters.spec import DrafterSpec, LayersLatency, ProfileLatency

SEQUENTIAL_FAMILIES = ("mtp", "eagle3")


def forward_ms(profile: Any, tokens: int) -> float:
    """Step time of `profile` at `tokens`, proportional beyond its last point."""
    last = profile.max_tokens
    if tokens <= last or profile.extrapolation != "none":
        return float(profile.step_ms(tokens))
    return float(profile.step_ms(last)) * tokens / last


class FamilyDraftLatency:
    """Drafting ms for a family from a forward cost F(tokens) and a head cost H(R) per position."""

    def __init__(self, family: str, forward: Callable[[int], float], head: Callable[[int], float]) -> None:
        self.family = family
        self.forward = forward
        self.head = head
        self.cache: dict[tuple[int, int], float] = {}

    def ms(self, drafting_requests: int, block_size: int) -> float:
        if drafting_requests <= 0 or block_size <= 0:
            return 0.0
        key = (drafting_requests, block_size)
        if key not in self.cache:
            self.cache[key] = self.compute(drafting_requests, block_size)
        return self.cache[key]

    def compute(self, r: int, gamma: int) -> float:
        if self.family in SEQUENTIAL_FAMILIES:
            return gamma * self.forward(r)
        backbone = self.forward(r * gamma)
        if self.family == "dspark":
            return backbone + gamma * self.head(r)
        return backbone


def latency_model(spec: DrafterSpec, profile: Any) -> FamilyDraftLatency:
    """The drafting-latency model a drafter spec names, priced on the target `profile`."""
    lat = spec.latency
    if isinstance(lat, LayersLatency):
        share = lat.drafter_layers / lat.target_layers + lat.lm_head_fraction

        def forward(tokens: int) -> float:
            return share * forward_ms(profile, tokens)
    elif isinstance(lat, ProfileLatency):
        drafter_profile = load_profile(lat.path)

        def forward(tokens: int) -> float:
            return forward_ms(drafter_profile, tokens)
    else:
        raise SpecplanError(f"drafter.latency: no latency model for kind '{getattr(lat, 'KIND', lat)}'")

    def head(requests: int) -> float:
        return lat.markov_head_fraction * forward_ms(profile, requests)

    return FamilyDraftLatency(spec.family, forward, head)
