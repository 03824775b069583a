"""Token-level losslessness audit: does a policy change the output distribution?

Speculative decoding with rejection sampling is lossless only if the
decision to verify draft x_k does not depend on x_k itself (docs/model/policies.md).
The audit checks that end to end for any registered policy, through the
same protocol the engine uses (`drafting_mask`, `decide` on a `StepView`,
`observe`):

- a small vocabulary with explicit Markov target and draft distributions
  (`target[u]`, `draft[u]`: next-token distributions after token u; the
  last row is the start of a sequence);
- a confidence head that depends on the drafted previous token
  (`confidence[u]` for the draft that follows u): the Markov feature that
  lets future drafts leak into admission;
- real speculative sampling: draft γ tokens, let the policy pick ℓ, accept
  x_k with probability min(1, p_t/p_d), resample the first rejection from
  the residual max(0, p_t − p_d), add a bonus token when all ℓ pass;
- `batch_requests` sequences run per step (continuous batching: a finished
  sequence is replaced by a fresh one), each until `output_tokens` tokens;
- a chi-square test of the observed sequences against the target's joint
  distribution, rejected when p < `alpha`.

A test that does not reject has not shown that a policy is lossless: it
found no change that its trials can see. The result says how large a change
they can see: with N trials, df = outputs − 1 and noncentrality λ(df, α,
power) (the χ² test's power is P(χ²_df(λ) > χ²_df,1−α)), every alternative
of Cohen's w ≥ √(λ/N) is rejected with at least that power, and since
w² = Σ d²/p ≥ (Σ|d|)² (Cauchy-Schwarz), every change of total variation
TV = Σ|d|/2 ≥ √(λ/N)/2 is. `trials_needed` inverts it: the trials that
find a stated TV with a stated power. The verdict is read against the
policy's own claim (`Policy.lossless`), so a lossy policy that few trials
fail to reject is never called lossless.

Case `appendix-a` is the DSpark paper's counterexample: the synchronous
global search turns the target (0.7, 0.3) into about (0.85, 0.15); greedy
early stop and the asynchronous policy keep (0.7, 0.3).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

from specplan.policies.base import OracleView, Policy, SpsTable, StepOutcome, StepView
from specplan.policies.errors import PolicyKeyError
from specplan.policies.registry import policy_class
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.streams import stream
from specplan.simulator.scenario import PolicySpec
from specplan.simulator.scenario.policy import check_verify_lengths, policy_params


@dataclass(frozen=True, eq=False)
class AuditCase:
    """A token-level speculative decoding set-up. Rows index the previous token (last: start)."""

    name: str
    vocab: tuple[str, ...]
    target: np.ndarray
    draft: np.ndarray
    confidence: np.ndarray
    block_size: int
    steps_per_s: np.ndarray
    batch_requests: int
    output_tokens: int

    @property
    def start(self) -> int:
        return len(self.vocab)

    def categories(self) -> list[str]:
        """Every output sequence of `output_tokens` tokens, in lexicographic order."""
        return ["".join(seq) for seq in itertools.product(self.vocab, repeat=self.output_tokens)]

    def target_joint(self) -> np.ndarray:
        """Probability of every output sequence, in `categories()` order."""
        seqs = np.array(list(itertools.product(range(len(self.vocab)), repeat=self.output_tokens)))
        prev = np.column_stack((np.full(len(seqs), self.start), seqs[:, :-1]))
        return self.target[prev, seqs].prod(axis=1)


def appendix_a() -> AuditCase:
    """DSpark Appendix A: γ = 2, a_1 = 0.8, c_2 = 0.9 after A and 0 after B, SPS 1.0 / 0.5 / 0.45."""
    target = np.array([[0.7, 0.3]] * 3)
    draft = np.array([[0.5, 0.5]] * 3)
    confidence = np.array([0.9, 0.0, 0.8])  # after A, after B, at the start
    return AuditCase("appendix-a", ("A", "B"), target, draft, confidence, 2,
                     np.array([1.0, 1.0, 0.5, 0.45]), batch_requests=1, output_tokens=1)


def markov() -> AuditCase:
    """Four tokens, two sequences per step, a step-time cliff right after the anchor tokens.

    The target prefers a and c after every token (a little less after b and
    d); the drafter proposes uniformly; a draft that follows a or c gets
    confidence 0.95, one that follows b or d gets 0, the first draft 0.6.
    Verifying anything doubles the step time, so it pays only when the
    batch's total survival is high, which a synchronous global search
    judges with confidences that depend on the drafts it is deciding on.
    """
    target = np.array([[0.55, 0.10, 0.25, 0.10], [0.45, 0.15, 0.25, 0.15],
                       [0.55, 0.10, 0.25, 0.10], [0.45, 0.15, 0.25, 0.15], [0.55, 0.10, 0.25, 0.10]])
    draft = np.full((5, 4), 0.25)
    confidence = np.array([0.95, 0.0, 0.95, 0.0, 0.6])
    tokens = np.arange(2 * (3 + 1) + 1)
    step_ms = np.where(tokens <= 2, 8.0, 16.0) + 0.01 * tokens
    return AuditCase("markov", ("a", "b", "c", "d"), target, draft, confidence, 3,
                     1000.0 / step_ms, batch_requests=2, output_tokens=2)


CASES = {"appendix-a": appendix_a, "markov": markov}


DEFAULT_POWER = 0.8
DEFAULT_DETECT_TV = 0.05


def noncentrality(df: int, alpha: float, power: float) -> float:
    """λ at which the chi-square test (df, alpha) rejects with probability `power`."""
    critical = stats.chi2.ppf(1.0 - alpha, df)
    return float(optimize.brentq(lambda lam: stats.ncx2.sf(critical, df, lam) - power, 1e-9, 1e6))


def detectable_total_variation(trials: int, df: int, alpha: float, power: float) -> float:
    """The smallest total-variation change every alternative of which `trials` outputs reject with `power`."""
    return math.sqrt(noncentrality(df, alpha, power) / trials) / 2.0


def trials_needed(total_variation: float, df: int, alpha: float, power: float) -> int:
    """The fewest trials that reject every change of `total_variation` or more with `power`."""
    return math.ceil(noncentrality(df, alpha, power) / (2.0 * total_variation) ** 2)


@dataclass(frozen=True)
class AuditResult:
    """The test's outcome, what its trials could detect, and whether it agrees with the policy's own claim."""

    policy: str
    label: str
    case: str
    categories: list[str]
    target: list[float]
    observed: list[float]
    trials: int
    chi_square: float
    p_value: float
    alpha: float
    power: float
    claims_lossless: bool

    @property
    def rejected(self) -> bool:
        """The output distribution differs from the target's (p < alpha)."""
        return self.p_value < self.alpha

    @property
    def consistent(self) -> bool:
        """A lossless policy not rejected, or a lossy one rejected; the rest need more trials or a look."""
        return self.rejected != self.claims_lossless

    @property
    def detectable_tv(self) -> float:
        return detectable_total_variation(self.trials, len(self.categories) - 1, self.alpha, self.power)

    @property
    def observed_tv(self) -> float:
        return 0.5 * float(np.abs(np.subtract(self.observed, self.target)).sum())

    def plain(self) -> dict:
        return {"policy": self.policy, "label": self.label, "case": self.case,
                "categories": self.categories, "target": self.target, "observed": self.observed,
                "trials": self.trials, "chi_square": self.chi_square, "p_value": self.p_value,
                "alpha": self.alpha, "power": self.power, "rejected": self.rejected,
                "verdict": "rejected" if self.rejected else "not rejected",
                "observed_total_variation": self.observed_tv,
                "detectable_total_variation": self.detectable_tv,
                "policy_claims_lossless": self.claims_lossless, "consistent_with_claim": self.consistent}


def sample_rows(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One categorical draw per row of `probs` from uniforms `u` (inverse CDF)."""
    cdf = np.cumsum(probs, axis=1)
    return np.minimum((u[:, None] > cdf).sum(axis=1), probs.shape[1] - 1)


class Sequences:
    """The running sequences of the audit: id, last token, tokens emitted, code of the output so far."""

    def __init__(self, case: AuditCase) -> None:
        r = case.batch_requests
        self.case = case
        self.ids = np.arange(r)
        self.next_id = r
        self.last = np.full(r, case.start)
        self.emitted = np.zeros(r, dtype=np.int64)
        self.code = np.zeros(r, dtype=np.int64)

    def append(self, tokens: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Append up to counts[r] tokens of each row; return the codes of sequences just completed."""
        case, vocab = self.case, len(self.case.vocab)
        for k in range(tokens.shape[1]):
            take = (k < counts) & (self.emitted < case.output_tokens)
            self.code[take] = self.code[take] * vocab + tokens[take, k]
            self.emitted[take] += 1
            self.last[take] = tokens[take, k]
        done = self.emitted >= case.output_tokens
        finished = self.code[done].copy()
        self.restart(done)
        return finished

    def restart(self, done: np.ndarray) -> None:
        n = int(done.sum())
        self.ids[done] = np.arange(self.next_id, self.next_id + n)
        self.next_id += n
        self.last[done] = self.case.start
        self.emitted[done] = 0
        self.code[done] = 0


def draft_block(case: AuditCase, last: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drafts x (R, γ), the tokens before each draft (R, γ) and the confidences c (R, γ)."""
    r, block_size = last.size, case.block_size
    x = np.empty((r, block_size), dtype=np.int64)
    before = np.empty((r, block_size), dtype=np.int64)
    prev = last
    for k in range(block_size):
        before[:, k] = prev
        x[:, k] = sample_rows(case.draft[prev], rng.random(r))
        prev = x[:, k]
    return x, before, case.confidence[before]


def verify(case: AuditCase, x: np.ndarray, before: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Rejection-sampling outcome of every draft: the accepted-prefix length per row."""
    ratio = case.target[before, x] / case.draft[before, x]
    ok = rng.random(x.shape) < np.minimum(1.0, ratio)
    return np.where(ok.all(axis=1), x.shape[1], ok.argmin(axis=1))


def final_token(case: AuditCase, x: np.ndarray, before: np.ndarray, last: np.ndarray,
                accepted: np.ndarray, lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The target's own token after the accepted drafts: residual resample or bonus."""
    rows = np.arange(x.shape[0])
    at = np.minimum(accepted, x.shape[1] - 1)
    prev = np.where(accepted > 0, x[rows, np.maximum(accepted - 1, 0)], last)
    rejected = accepted < lengths
    residual = np.maximum(case.target[before[rows, at]] - case.draft[before[rows, at]], 0.0)
    mass = residual.sum(axis=1, keepdims=True)
    residual = np.where(mass > 0, residual / np.where(mass > 0, mass, 1.0), case.target[prev])
    probs = np.where(rejected[:, None], residual, case.target[prev])
    return sample_rows(probs, rng.random((x.shape[0],)))


def audit_step(policy: Policy, case: AuditCase, seqs: Sequences, step: int, rng: np.random.Generator) -> np.ndarray:
    """One engine step over the running sequences; returns the codes of completed sequences."""
    mask = policy.drafting_mask(seqs.ids.copy())
    drafted = np.ones(seqs.ids.size, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    x, before, c = draft_block(case, seqs.last, rng)
    prefix = verify(case, x, before, rng)
    c = np.where(drafted[:, None], c, 0.0)
    prefix = np.where(drafted, prefix, 0)
    decision = policy.decide(make_view(policy, case, seqs, step, c, drafted, prefix))
    lengths = np.where(drafted, decision.per_request(seqs.ids.size), 0)
    accepted = np.minimum(prefix, lengths)
    tokens = np.column_stack((x, np.zeros(x.shape[0], dtype=np.int64)))
    rows = np.arange(x.shape[0])
    tokens[rows, accepted] = final_token(case, x, before, seqs.last, accepted, lengths, rng)
    policy.observe(StepOutcome(seqs.ids.copy(), lengths, accepted, float(step)))
    return seqs.append(tokens, accepted + 1)


def make_view(policy: Policy, case: AuditCase, seqs: Sequences, step: int, c: np.ndarray,
              drafted: np.ndarray, prefix: np.ndarray) -> StepView:
    fields: dict[str, Any] = dict(confidences=c, request_ids=seqs.ids.copy(), price=SpsTable(case.steps_per_s),
                  max_step_tokens=case.steps_per_s.size - 1, reserved_tokens=0,
                  max_batch_requests=case.batch_requests, block_size=case.block_size,
                  step_index=step, now_s=float(step), drafted=drafted,
                  drafting=int(np.count_nonzero(drafted)))
    if policy.oracle:
        return OracleView(**fields, accepted_prefix=prefix)
    return StepView(**fields)


def run_audit(policy: Policy, case: AuditCase, trials: int, seed: int = 0, alpha: float = 1e-3,
              power: float = DEFAULT_POWER) -> AuditResult:
    """Decode `trials` sequences with `policy` and test their distribution against the target."""
    if trials < 1:
        raise SpecplanError(f"--trials must be at least 1, got {trials}")
    if seed < 0:
        raise SpecplanError(f"--seed must be a whole number >= 0, got {seed}")
    rng = stream(seed, f"audit-{case.name}")
    seqs = Sequences(case)
    counts = np.zeros(len(case.vocab) ** case.output_tokens, dtype=np.int64)
    done, step = 0, 0
    while done < trials:
        finished = audit_step(policy, case, seqs, step, rng)[: trials - done]
        counts += np.bincount(finished, minlength=counts.size)
        done += finished.size
        step += 1
    return summarise(type(policy), case, counts, alpha, power)


def summarise(cls: type[Policy], case: AuditCase, counts: np.ndarray, alpha: float, power: float) -> AuditResult:
    target = case.target_joint()
    n = int(counts.sum())
    chi2, p_value = stats.chisquare(counts, n * target)
    return AuditResult(cls.name, cls.label(), case.name, case.categories(),
                       [float(v) for v in target], [float(v) for v in counts / n], n,
                       float(chi2), float(p_value), alpha, power, cls.lossless)


def audit_policy(name: str, params: dict | None = None, case: str = "appendix-a", trials: int = 20000,
                 seed: int = 0, alpha: float = 1e-3, power: float | None = None,
                 detect_tv: float = DEFAULT_DETECT_TV) -> AuditResult:
    """Audit a registered policy by name (the Python face of `specplan audit`).

    With `power` stated, `trials` too few to find a change of `detect_tv` in
    total variation with that power is refused before anything runs; without
    it the result says what its trials find at the default power (0.8).
    """
    if case not in CASES:
        raise SpecplanError(f"unknown audit case '{case}' (valid: {', '.join(CASES)})")
    the_case = CASES[case]()
    if power is not None:
        check_power(the_case, trials, alpha, power, detect_tv)
    try:
        cls = policy_class(name, "policy")
        values = policy_params(PolicySpec(name, dict(params or {})))
        check_verify_lengths(values, the_case.block_size, "--param")
    except (PolicyKeyError, ScenarioError) as exc:
        raise SpecplanError(str(exc)) from None
    return run_audit(cls(values, the_case.block_size), the_case, trials, seed, alpha,
                     DEFAULT_POWER if power is None else power)


def check_power(case: AuditCase, trials: int, alpha: float, power: float, detect_tv: float) -> None:
    """Refuse a trial count that cannot find a change of `detect_tv` with `power` (one line, the count needed)."""
    if not 0 < power < 1:
        raise SpecplanError(f"--power must be between 0 and 1, got {power}")
    if not 0 < detect_tv <= 1:
        raise SpecplanError(f"--detect must be a total variation in (0, 1], got {detect_tv}")
    needed = trials_needed(detect_tv, len(case.vocab) ** case.output_tokens - 1, alpha, power)
    if trials < needed:
        raise SpecplanError(f"--trials {trials} cannot find a change of {detect_tv:g} in total variation with power "
                            f"{power:g} at alpha {alpha:g} (case {case.name}): that needs at least {needed:,} "
                            "trials; raise --trials or --detect")
