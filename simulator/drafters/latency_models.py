"""Drafting latency per engine step by drafter family: `ms(drafting_requests, block_size, context)`.

A family fixes how many drafter forwards one step takes and over how many
tokens (R drafting requests, block γ); a cost curve prices one forward:

    mtp      k = γ sequential MTP modules; module i reads the hidden state and
             the token of position i − 1 for each request, R tokens:    γ · F(R)
    eagle3   γ sequential passes of the drafter, each over one new token
             per request (its own last draft), R tokens:               γ · F(R)     (linear in γ)
    dflash   one parallel forward over the block: the anchor (the last
             verified token) plus γ mask positions per request,
             R·(γ + 1) tokens:                                          F(R·(γ+1))   (flat in γ while
             R·(γ+1) stays in the memory-bound part of the curve)
    dspark   the DFlash backbone plus a tiny sequential head per position:
             F(R·(γ+1)) + γ · H(R)

Requests may draft different widths (an asynchronous policy that knows
before drafting how many positions each can be verified): the parallel
backbone then runs over Σ_r (w_r + 1) positions and the sequential parts
(MTP modules, Eagle3 passes, DSpark's head) take max_r w_r passes over the
drafting requests. The token counts are the forward's query positions as the drafters are
built: MTP modules and Eagle3 run one position per request per pass (a
real Eagle3 also re-reads the previous step's accepted tokens in its first
pass, about τ − 1 more per request, not priced here); DFlash and DSpark
condition their block on the anchor token and fill γ masks in one pass.

F comes from the target's profile scaled by the drafter's share of it
(`kind: layers`: drafter_layers / target_layers + lm_head_fraction) or
from a drafter profile (`kind: profile`: measured by the harness, or a
built-in composed from AIConfigurator's kernel database), at the drafting
requests' KV context when the curve has a context axis (drafter layers
attend to the context as the target's do). H, the
Markov head `W1[x_{k−1}] W2` (rank 256) applied to R tokens, is
`markov_head_fraction` of a target step at R tokens; at the default 0.005
it adds 0.2–1.3% of a round at R = 128 for γ = 4..16 on an H200-like
roofline, as DSpark reports. Beyond a profile's last measured point a
forward is priced proportionally to its tokens (the profile's own
extrapolation rule when it declares one), never below it.
"""

from __future__ import annotations

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.dense import DenseCurve
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.spec import DrafterSpec, LayersLatency, ProfileLatency

SEQUENTIAL_FAMILIES = ("mtp", "eagle3")
DENSE_TOKENS = 16384  # forwards up to this many tokens are looked up, beyond it interpolated


class Forward:
    """One drafter forward's ms at (tokens, KV context): a profile, scaled by `share`.

    Beyond the profile's last measured point a forward is priced
    proportionally to its tokens (its own extrapolation rule when it declares one).
    """

    def __init__(self, profile: StepProfile, share: float = 1.0) -> None:
        self.profile, self.share = profile, share
        self.curve = DenseCurve(profile, max(profile.max_tokens, DENSE_TOKENS), beyond="proportional")
        self.uses_context = profile.context_tokens is not None

    def __call__(self, tokens: int, context_tokens: float = 0.0) -> float:
        if tokens <= self.curve.max_tokens:
            return self.share * self.curve.ms(tokens, context_tokens)
        last = self.profile.max_tokens
        scale = tokens / last if self.profile.extrapolation == "none" else 1.0
        at = last if self.profile.extrapolation == "none" else tokens
        return self.share * scale * float(self.profile.step_ms(at, context_tokens if self.uses_context else None))


class FamilyDraftLatency:
    """Drafting ms for a family from a forward cost F(tokens, context) and a head cost H(R) per position.

    `context_tokens` is the drafting requests' KV context (their drafter
    layers attend to it as the target's do); without a context axis the
    result depends on (R, γ) only and is memoised.
    """

    def __init__(self, family: str, forward: Forward, head: Forward) -> None:
        self.family = family
        self.forward = forward
        self.head = head
        self.uses_context = forward.uses_context
        self.uses_positions = True  # fewer drafted positions, a cheaper forward
        self.cache: dict[tuple[int, int], float] = {}

    def ms(self, drafting_requests: int, block_size: int, context_tokens: float = 0.0,
           positions: int | None = None) -> float:
        if drafting_requests <= 0 or block_size <= 0:
            return 0.0
        if positions is not None and positions != drafting_requests * block_size:
            return self.compute(drafting_requests, block_size, context_tokens, positions)
        if self.uses_context:
            return self.compute(drafting_requests, block_size, context_tokens)
        key = (drafting_requests, block_size)
        if key not in self.cache:
            self.cache[key] = self.compute(drafting_requests, block_size, 0.0)
        return self.cache[key]

    def compute(self, r: int, block_size: int, context_tokens: float, positions: int | None = None) -> float:
        """block_size: the widest request's drafts; `positions`: all requests' drafts (default r · block_size)."""
        if self.family in SEQUENTIAL_FAMILIES:
            return block_size * self.forward(r, context_tokens)
        drafted = r * block_size if positions is None else positions
        backbone = self.forward(drafted + r, context_tokens)
        if self.family == "dspark":
            return backbone + block_size * self.head(r)
        return backbone


def latency_model(spec: DrafterSpec, profile: StepProfile) -> FamilyDraftLatency:
    """The drafting-latency model a drafter spec names, priced on the target `profile`."""
    lat = spec.latency
    if isinstance(lat, LayersLatency):
        forward = Forward(profile, lat.drafter_layers / lat.target_layers + lat.lm_head_fraction)
    elif isinstance(lat, ProfileLatency):
        forward = Forward(load_profile(lat.path))
    else:
        raise SpecplanError(f"drafter.latency: no latency model for kind '{getattr(lat, 'KIND', lat)}'")
    return FamilyDraftLatency(spec.family, forward, Forward(profile, lat.markov_head_fraction))
