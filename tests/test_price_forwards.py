"""The step price's three forwards against the quotes they replaced, and a term added once paid on all three.

Issue 46 put the step's price in one package: a forward per engine (token-dense,
request-padded, per rank) and one tuple of terms added after whichever ran.
`tests/data/price-quotes-8041aa3.json` holds the quotes of `tests/price_grid.py`'s
cases as commit 8041aa3 (before the package) priced them, each at a grid of B:
every quote must read the same, bit for bit, but where the issue changed it on
purpose: a step with a separate prefill batch priced per rank now pays the
sampler per verified token (the fix), and under SGLang's padded requests the
sampler is read at the B the step verifies, after the mode's charge, as on
every other forward (it was read at the padded B, inside the charge). The grid
predates issue 47's eager cost of a DeepSeek-V4 kernel (28.5 us, sglang PR #24047):
it is compared under the launcher's 4.7 us it was recorded with (`launcher_priced`).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from specplan.engines.eager import PUBLIC_EAGER_COST
from specplan.simulator.engine.price.forwards import (
    PaddedQuote,
    PerRank,
    RankQuote,
    RequestPadded,
    TokenDense,
)
from specplan.simulator.engine.price.quote import StepQuote
from specplan.simulator.engine.price.terms import (
    ForwardRun,
    PriceSetup,
    SpeculationTerm,
    StepFacts,
    StepTerm,
)
from tests.conftest import REPO
from tests.price_grid import GRID, cases, pricer, quote_args

RECORDED = json.loads((REPO / "tests/data/price-quotes-8041aa3.json").read_text())
SAMPLER_MS = 0.01   # the cases' engine.sampling_ms_per_token where they set it
STRATEGY = {"token": TokenDense, "requests": RequestPadded, "ranks": PerRank}


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> dict[str, dict]:
    return cases(tmp_path_factory.mktemp("profiles"))


@pytest.fixture
def launcher_priced(monkeypatch):
    """DeepSeek-V4's eager steps priced at the launcher's cost per kernel, as when the grid was recorded."""
    count = PUBLIC_EAGER_COST.kernels["deepseek-v4"]
    monkeypatch.setitem(PUBLIC_EAGER_COST.kernels, "deepseek-v4", dataclasses.replace(count, eager_op_us=None))


def sampler_moved(case: str, quote: StepQuote, tokens: np.ndarray) -> np.ndarray | None:
    """What issue 46 moved on purpose at each B (see the module docstring); None where nothing moved."""
    if "sampling_ms_per_token" not in json.dumps(case):
        return None
    if isinstance(quote, RankQuote) and quote.forward.prefilling:
        return SAMPLER_MS * tokens                     # the fix: the term was dropped there
    padded = quote.balanced if isinstance(quote, RankQuote) else quote
    if isinstance(padded, PaddedQuote):                # read at B, not at ceil(B · pad(R) / R)
        return SAMPLER_MS * (tokens - (-(-tokens * padded.padded // padded.requests)))
    return None


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_forward_prices_the_grid_as_the_quotes_it_replaced(name, grid, launcher_priced):
    case = grid[name]
    priced = pricer(case)
    assert isinstance(priced.forward, STRATEGY[name.split("/")[0]])
    for recorded in RECORDED[name]:
        positional, keywords = quote_args(recorded["args"])
        quote = priced.quote(*positional, **keywords)
        tokens = np.array(recorded["tokens"])
        assert (quote.draft_ms, quote.host_ms, quote.scheduling_ms, quote.fixed_ms) == \
            (recorded["draft_ms"], recorded["host_ms"], recorded["scheduling_ms"], recorded["fixed_ms"])
        assert [str(quote.mode_at(b)) for b in recorded["tokens"]] == recorded["mode"]
        assert [quote.excess_ms(b) for b in recorded["tokens"]] == recorded["excess_ms"]
        moved = sampler_moved(case["scenario"], quote, tokens)
        verify = np.array([quote.verify_ms(b) for b in recorded["tokens"]])
        expected = np.array(recorded["verify_ms"]) + (0.0 if moved is None else moved)
        if moved is None:
            assert verify.tolist() == recorded["verify_ms"]      # bit for bit
            assert [quote.step_ms(b) for b in recorded["tokens"]] == recorded["step_ms"]
            assert quote.steps_per_s(tokens).tolist() == recorded["steps_per_s"]
        np.testing.assert_allclose(verify, expected, rtol=1e-12)
        np.testing.assert_allclose(quote.steps_per_s(tokens), 1000.0 / (quote.fixed_ms + expected), rtol=1e-12)
        ranged = quote.steps_per_s_range(tokens[0], tokens[-1] + 1)[tokens - tokens[0]]
        np.testing.assert_allclose(ranged, 1000.0 / (quote.fixed_ms + expected), rtol=1e-12)


def test_the_recorded_grid_is_the_cases_grid(grid):
    """The file was written from these cases (their quotes and B), so the comparison above covers each."""
    assert sorted(RECORDED) == sorted(grid)
    for name, case in grid.items():
        assert [q["args"] for q in RECORDED[name]] == case["quotes"]
        assert all(q["tokens"] == [b for b in GRID if b < case.get("stop", 512)] for q in RECORDED[name])


class Fan(StepTerm):
    """A test-only engine term: 0.003 ms per verified token in the forward, 0.25 ms of host time per step."""

    verifies = fixes = True

    @classmethod
    def of(cls, setup: PriceSetup) -> StepTerm | None:
        return cls()

    def verify(self, ms: np.ndarray, run: ForwardRun) -> np.ndarray:
        return ms + 0.003 * run.tokens

    def fix(self, quote, step: StepFacts) -> None:
        quote.host_ms += 0.25


@pytest.mark.parametrize(("name", "which"), [("token/profile", 1), ("token/vllm-context", 1),
                                             ("token/vllm-modes", 1), ("requests/assumed-eager", 0),
                                             ("requests/launch-floor", 1), ("ranks/dp2", 0), ("ranks/dp2", 2),
                                             ("ranks/v4-dp4", 0), ("ranks/v4-dp4", 1)])
def test_a_term_added_once_is_paid_on_every_forward(name, which, grid):
    """One class in the terms tuple: every strategy's quote pays it, at every B, in the clock and in Θ."""
    case = grid[name]
    base, fanned = pricer(case), pricer(case, (Fan(),))
    positional, keywords = quote_args(case["quotes"][which])
    plain, more = base.quote(*positional, **keywords), fanned.quote(*positional, **keywords)
    assert type(more) is type(plain)
    tokens = np.array([b for b in GRID if b < case.get("stop", 512)])
    # a speculating step's host share of a plain step (SpeculationTerm) pays the new verify term too
    share = next((t.fraction for t in base.terms if isinstance(t, SpeculationTerm)), 0.0) if positional[2] else 0.0
    assert more.host_ms == pytest.approx(plain.host_ms + 0.25 + share * 0.003 * positional[1])
    np.testing.assert_allclose(more.verify_at(tokens), plain.verify_at(tokens) + 0.003 * tokens, rtol=1e-12)
    np.testing.assert_allclose(1000.0 / more.steps_per_s(tokens),
                               more.fixed_ms + plain.verify_at(tokens) + 0.003 * tokens, rtol=1e-12)
    assert more.fixed_ms == pytest.approx(plain.fixed_ms + 0.25 + share * 0.003 * positional[1])
    assert more.step_ms(64) == pytest.approx(more.fixed_ms + plain.verify_ms(64) + 0.003 * 64)

