"""A profile's step split by who runs it: the MoE block every attention rank meets, and each rank's own part.

Under data-parallel attention each rank runs its own requests' attention,
norms, mixing, router, shared expert and LM head on its own tokens, and the
ranks meet in the MoE's all-to-all (dispatch, routed experts, combine), which
runs over the step's tokens from every rank: SGLang synchronises the ranks'
forwards through it (prepare_mlp_sync_batch: a rank with nothing to run runs
an idle batch), so the step lasts as long as its busiest rank. A profile of
a data-parallel topology is measured with the step's B and C split evenly
over its ranks (the importer's layout), so

    step(B, C) = shared(B) + own(B, C)
    shared(B)  = Σ the parts table's MoE parts (dispatch, routed_experts, combine,
                 moe_block) − the overlap the shared expert hides under them
    own(B, C)  = step(B, C) − shared(B): a rank holding b tokens over c of KV costs own(ranks·b, ranks·c)

and a step whose ranks hold b_r tokens over c_r of KV costs
shared(Σ b_r) + max_r own(ranks·b_r, ranks·c_r) (specplan.simulator.engine.price.forwards).
A prefill profile of the same topology splits the same way (its parts table
holds its MoE parts). Only a profile with a parts table holding an MoE part
can be split (`divides`; the measured MoE built-ins have one): any other
(dense models, CSV, inline, roofline) is all `own` with no shared part, which
is exact on one rank and, on several, prices a rank as if every rank held
what it holds. Approximated: the overlap stays with the MoE block at the
step's tokens; the all-to-all costs its total tokens, not its busiest
sender's.
"""

from __future__ import annotations

import numpy as np

from specplan.hwprofiles.dense import DenseCurve
from specplan.hwprofiles.profile import StepProfile

SHARED_PARTS = ("dispatch_ms", "routed_experts_ms", "combine_ms", "moe_block_ms")
HIDDEN = "overlap_hidden_ms"
OWN_FLOOR_MS = 1e-6  # a rank's own part is positive (a profile's step times are)


class RankSplit:
    """Dense tables of shared(B) and own(B, C) (see the module docstring), to `max_tokens`."""

    def __init__(self, profile: StepProfile, max_tokens: int) -> None:
        parts = profile.extra.get("parts") or {}
        self.divides = any(name in parts for name in SHARED_PARTS)
        shared = sum((parts[name] for name in SHARED_PARTS if name in parts), np.zeros(profile.tokens.size))
        shared = np.maximum(shared - parts.get(HIDDEN, 0.0), 0.0) if self.divides else shared
        own = np.maximum(np.atleast_2d(profile.step_ms_table) - shared[None, :], OWN_FLOOR_MS)
        self.shared = DenseCurve(part_profile(profile, "shared", np.maximum(shared, OWN_FLOOR_MS), None),
                                 max_tokens, beyond="proportional")
        if not self.divides:
            self.shared.rows[:] = 0.0
        table = own if profile.context_tokens is not None else own[0]
        self.own = DenseCurve(part_profile(profile, "own", table, profile.context_tokens), max_tokens,
                              beyond="proportional")
        self.max_tokens = max_tokens

    def shared_at(self, tokens: np.ndarray) -> np.ndarray:
        return self.shared.rows[0][np.minimum(tokens, self.max_tokens)]

    def own_at(self, tokens: np.ndarray, context: float) -> np.ndarray:
        """own(B, C) at each B of `tokens` (an integer array) and one context C."""
        low, high, weight = self.own.around(context)
        index = np.minimum(tokens, self.max_tokens)
        return low[index] if weight == 0.0 else low[index] * (1.0 - weight) + high[index] * weight

    def own_at_each(self, tokens: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """own(B, C) for each row of `tokens` (ranks, B) at its rank's context C (`contexts`, one per row): `own_at`
        row by row, in one lookup."""
        low, high, weight = self.own.around_each(contexts)
        index = np.minimum(tokens, self.max_tokens)
        rows = self.own.rows
        below = rows[low[:, None], index]
        weight = weight[:, None]
        return np.where(weight == 0.0, below, below * (1.0 - weight) + rows[high[:, None], index] * weight)


def part_profile(profile: StepProfile, what: str, table: np.ndarray, context: np.ndarray | None) -> StepProfile:
    return StepProfile(name=f"{profile.name} ({what})", tokens=profile.tokens, step_ms_table=table,
                       provenance={"source": f"{what} part of {profile.name}",
                                   **({"phase": "prefill"} if profile.provenance.get("phase") == "prefill" else {})},
                       context_tokens=context,
                       extrapolation=profile.extrapolation)


