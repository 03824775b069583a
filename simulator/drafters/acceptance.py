"""Per-position conditional acceptance p_{r,k}: curves per domain, spread in logit space.

For a request of domain d at draft position k (1-based), the target accepts
the draft with probability

    p_{r,k} = σ(x_{r,t,k}),   x_{r,t,k} = logit(p̄_{d,k}) + δ_{d,k} + z_r + ε_{r,t,k},
    z_r ~ N(0, request_sigma²) once per request, ε ~ N(0, token_sigma²) per step,

where p̄ is the domain's curve (explicit `per_position` or a named preset)
and δ are offsets that keep the curve's figures *pooled over proposals*
whatever the sigmas (`heterogeneity.solve_offsets`). The engine works in
logit space: a request's row `logit(p̄_d) + δ_d + z_r` is fixed at
admission (`row_logits`), each step adds the token noise (`step_logits`),
and a draft is accepted when a standard logistic draw falls below x, which
is the event U < σ(x) for a uniform U without computing σ. When nothing
reads the token noise but the outcome (fixed-length policies read no
confidences), a request's per-position acceptance is simply
`E_ε σ(row + ε)` (`row_probabilities`, fixed at admission): the same
outcome distribution, drawn as U < p without the noise.
"""

from __future__ import annotations

import numpy as np

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.drafters.curves import sigmoid
from specplan.simulator.drafters.heterogeneity import gauss_normal as token_nodes
from specplan.simulator.drafters.heterogeneity import (
    logit_or_edge,
    request_tau,
    smoothed_sigmoid,
    solve_offsets,
)
from specplan.simulator.drafters.presets import preset_curves
from specplan.simulator.drafters.spec import DrafterSpec


class AcceptanceModel:
    """Acceptance logits for a batch; one draw of token noise per engine step.

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
        self.base_p = np.stack([self.curves[d] for d in self.domains])
        self.offsets = solve_offsets(self.base_p, request_sigma, token_sigma)
        self.base_logit = logit_or_edge(self.base_p) + self.offsets
        self.token_nodes = token_nodes(token_sigma)
        self.smoothed = smoothed_table(*self.token_nodes) if token_sigma > 0 else None

    @property
    def heterogeneous(self) -> bool:
        return self.request_sigma > 0 or self.token_sigma > 0

    def request_offsets(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Per-request logit offsets z_r (zeros when request_sigma is 0)."""
        if self.request_sigma == 0:
            return np.zeros(n)
        return rng.normal(0.0, self.request_sigma, n)

    def row_logits(self, domain_idx: np.ndarray, request_offset: np.ndarray) -> np.ndarray:
        """(n, γ) logits of each request before token noise: logit p̄ + δ + z_r."""
        return self.base_logit[domain_idx] + request_offset[:, None]

    def row_probabilities(self, domain_idx: np.ndarray, request_offset: np.ndarray) -> np.ndarray:
        """(n, γ) per-position acceptance of each request with the token noise averaged out."""
        x = self.row_logits(domain_idx, request_offset)
        if self.smoothed is None:
            return sigmoid(x)
        return np.interp(x, SMOOTHED_GRID, self.smoothed)

    def step_logits(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(R, γ) acceptance logits x of one step: the rows plus this step's token noise."""
        if self.token_sigma == 0:
            return rows
        return rows + rng.normal(0.0, self.token_sigma, rows.shape)

    def sample(self, domain_idx: np.ndarray, request_offset: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """True conditional acceptance probabilities p (R, γ) of one step (p = σ(x))."""
        return sigmoid(self.step_logits(self.row_logits(domain_idx, request_offset), rng))

    def proposal_weights(self, domain_idx: np.ndarray, request_offset: np.ndarray) -> np.ndarray:
        """1 / τ(z) per request: how often a request proposes per output token (full blocks)."""
        e, we = self.token_nodes
        out = np.empty(len(domain_idx))
        for d in np.unique(domain_idx):
            rows = domain_idx == d
            out[rows] = 1.0 / request_tau(self.base_p[d], self.offsets[d], request_offset[rows], e, we)
        return out



SMOOTHED_GRID = np.linspace(-60.0, 60.0, 24_001)  # E_ε σ(x + ε) tabulated every 0.005 in x (error < 1e-6)


def smoothed_table(nodes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """E_ε σ(x + ε) on SMOOTHED_GRID, for `np.interp` at admission (one call per request)."""
    return smoothed_sigmoid(SMOOTHED_GRID, nodes, weights)


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
