"""Per-position conditional acceptance p_{r,k}: curves per domain, spread in logit space.

For a request of domain d at draft position k (1-based), the target accepts
the draft with probability

    p_{r,k} = σ(logit(p̄_{d,k}) + δ_{d,k} + z_r + ε_{r,t,k}),
    z_r ~ N(0, request_sigma²) once per request, ε ~ N(0, token_sigma²) per step,

where p̄ is the domain's curve (explicit `per_position` or a named preset)
and δ are offsets that keep the mean accepted length of the curve whatever
the sigmas (solved in `calibrate_offsets`). One call draws the whole
batch's R × γ probabilities.
"""

from __future__ import annotations

import numpy as np

from simulator.core.errors import SpecplanError
from simulator.drafters.curves import expected_tau, logit, sigmoid
from simulator.drafters.heterogeneity import solve_offsets
from simulator.drafters.presets import preset_curves
from simulator.drafters.spec import DrafterSpec


class AcceptanceModel:
    """Draws R × γ acceptance probabilities for a batch, one call per engine step.

    `domains` are the domains of the request mix (share > 0), `mix` their
    shares, `curves[d]` the per-position curve p̄ of domain d (length γ).
    """

    def __init__(
        self,
        curves: dict[str, np.ndarray],
        mix: dict[str, float],
        block_size: int,
        request_sigma: float = 0.0,
        token_sigma: float = 0.0,
    ) -> None:
        self.domains = tuple(d for d, share in mix.items() if share > 0)
        self.mix = np.array([mix[d] for d in self.domains], dtype=float)
        self.mix /= self.mix.sum()
        self.block_size = block_size
        self.request_sigma = request_sigma
        self.token_sigma = token_sigma
        self.curves = {d: np.asarray(curves[d], dtype=float)[:block_size] for d in self.domains}
        base = np.stack([self.curves[d] for d in self.domains])
        self.base_p = base
        self.base_logit = logit(np.clip(base, 0.0, 1.0)) + self.offsets()

    @property
    def heterogeneous(self) -> bool:
        return self.request_sigma > 0 or self.token_sigma > 0

    def offsets(self) -> np.ndarray:
        """Logit offsets δ (D, γ) that keep each domain's mean τ under the sigmas."""
        return solve_offsets(self.base_p, self.request_sigma, self.token_sigma)

    def domain_index(self, names: list[str]) -> np.ndarray:
        lookup = {d: i for i, d in enumerate(self.domains)}
        return np.array([lookup[n] for n in names], dtype=np.int64)

    def request_offsets(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Per-request logit offsets z_r (zeros when request_sigma is 0)."""
        if self.request_sigma == 0:
            return np.zeros(n)
        return rng.normal(0.0, self.request_sigma, n)

    def sample(self, domain_idx: np.ndarray, request_offset: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """True conditional acceptance probabilities (R, γ) for one step of the batch."""
        if not self.heterogeneous:
            return self.base_p[domain_idx]
        x = self.base_logit[domain_idx] + request_offset[:, None]
        if self.token_sigma > 0:
            x = x + rng.normal(0.0, self.token_sigma, x.shape)
        return sigmoid(x)

    def mean_tau(self, length: int | None = None) -> dict[str, float]:
        """Expected τ per domain of the (unspread) curves verified to `length`."""
        return {d: expected_tau(self.curves[d], length) for d in self.domains}


def acceptance_model(spec: DrafterSpec) -> AcceptanceModel:
    """The acceptance model a drafter spec names (explicit curves or a preset)."""
    acc = spec.acceptance
    if acc.per_position is not None:
        curves = {d: np.asarray(c, dtype=float) for d, c in acc.per_position.items()}
    else:
        if acc.preset is None:
            raise SpecplanError("drafter.acceptance: give a 'preset' or 'per_position' curves")
        curves = preset_curves(acc.preset, spec.family, spec.block_size)
    return AcceptanceModel(curves, acc.domains, spec.block_size, acc.request_sigma, acc.token_sigma)
