"""Generated AgentX-shaped sessions against the AgentX corpus's public figures (issue 45, item 16).

The generator's defaults (traces/spec.py AgentxShape) stand in for the AgentX corpus
(cc-traces-weka-with-subagents-052726); its public figures are SemiAnalysisAI/InferenceX issue #1632's.
Corpora of the corpus's size (472 sessions) are drawn from independent SeedSequence children; each
statistic's mean over the replications must lie within 10% of the corpus figure, and its 95% interval be
narrower than that band (so that the check can fail).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from specplan.traces.agentic import generate_sessions
from specplan.traces.agentx_corpus import (
    AGENTX_052726,
    TOLERANCE,
    TRACES,
    corpus_figures,
    corpus_match_text,
)
from specplan.traces.lanes import seeds_play
from specplan.traces.spec import AgentxShape, SessionArrivals

REPLICATIONS = 16


@pytest.fixture(scope="module")
def replications() -> dict[str, np.ndarray]:
    shape = dataclasses.replace(AgentxShape(), sessions=TRACES)
    children = np.random.SeedSequence(45_16).spawn(REPLICATIONS)
    rows = [corpus_figures(generate_sessions(shape, np.random.default_rng(child))) for child in children]
    return {name: np.array([row[name] for row in rows]) for name in AGENTX_052726}


@pytest.mark.parametrize("name", sorted(AGENTX_052726))
def test_the_generator_matches_each_public_corpus_figure_within_10_percent(replications, name):
    values, figure = replications[name], AGENTX_052726[name]
    mean = values.mean()
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    assert half < TOLERANCE * figure, f"{name}: interval ±{half:.4g} as wide as the tolerance: no judgement"
    assert abs(mean / figure - 1) <= TOLERANCE, f"{name}: generated {mean:.4g} ± {half:.3g}, corpus {figure:.4g}"


def test_the_corpus_figures_are_the_issues_counts():
    assert AGENTX_052726["requests_per_session"] == pytest.approx(113_254 / 472)
    assert AGENTX_052726["subagent_request_share"] == pytest.approx(0.243, abs=5e-4)   # the issue's 24.3%
    assert sum(v for k, v in AGENTX_052726.items() if k.startswith("context_")) == pytest.approx(1 - 428 / 113_254)


def test_a_plan_on_generated_sessions_says_which_corpus_figures_it_matches():
    said = seeds_play(SessionArrivals(lanes=4, generate=AgentxShape(sessions=8)))
    assert "match the AgentX corpus's public figures within 10%" in said and "issue #1632" in said
    assert "requests per subagent" in said and "tool gaps are kv-cache-tester's" in said
    changed = corpus_match_text(dataclasses.replace(AgentxShape(), turns_median=40.0))
    assert "turns_median changed" in changed and "matched by the defaults only" in changed
