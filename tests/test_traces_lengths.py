"""Length distributions: empirical (from a trace or values), mixtures by domain, and their wiring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.streams import stream
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.traces.lengths import LengthPair, mean_length, sample_lengths
from specplan.traces.spec import EmpiricalLength, FixedLength, LognormalLength, MixtureLength
from tests.conftest import BASE, SHARED, merged

CODE = str(SHARED / "traces" / "azure2023" / "AzureLLMInferenceTrace_code.csv")
MIX = {"drafter": {"acceptance": {"per_position": {"chat": [0.8, 0.7, 0.6], "code": [0.9, 0.85, 0.8]},
                                  "domains": {"chat": 0.7, "code": 0.3}}}}


def scenario(tmp_path, changes):
    return scenario_from_mapping(merged(BASE, changes), tmp_path)


def test_empirical_resamples_the_trace_lengths():
    code = pd.read_csv(CODE)
    spec = EmpiricalLength(path=CODE)
    prompts = sample_lengths(spec, stream(1, "test"), 20_000, "prompt")
    outputs = sample_lengths(spec, stream(1, "test"), 20_000, "output")
    assert set(prompts) <= set(code["ContextTokens"])
    assert set(outputs) <= set(code["GeneratedTokens"])
    assert np.median(prompts) == pytest.approx(code["ContextTokens"].median(), rel=0.05)
    assert mean_length(spec, "output") == pytest.approx(code["GeneratedTokens"].mean())
    chosen = sample_lengths(EmpiricalLength(path=CODE, field="output"), stream(1, "test"), 1000, "prompt")
    assert set(chosen) <= set(code["GeneratedTokens"])


def test_prompt_and_output_from_one_trace_stay_paired():
    code = pd.read_csv(CODE)
    rows = set(zip(code["ContextTokens"], code["GeneratedTokens"], strict=True))
    spec = EmpiricalLength(path=CODE)
    pair = LengthPair(spec, spec, stream(2, "p"), stream(2, "o"))
    drawn = [pair.next() for _ in range(5000)]
    assert set(drawn) <= rows
    corr = np.corrcoef(np.array(drawn).T)[0, 1]
    assert corr == pytest.approx(np.corrcoef(code["ContextTokens"], code["GeneratedTokens"])[0, 1], abs=0.06)


def test_empirical_inline_values_and_lognormal():
    values = sample_lengths(EmpiricalLength(values=(3, 5, 8)), stream(3, "t"), 3000)
    assert set(values) == {3, 5, 8}
    lognormal = LognormalLength(median=200.0, sigma=0.5, max=100_000)
    draws = sample_lengths(lognormal, stream(3, "t"), 200_000)
    assert draws.mean() == pytest.approx(mean_length(lognormal), rel=0.01)


def test_mixture_mean_weights_components_by_domain_share():
    mixture = MixtureLength(components={"chat": FixedLength(value=100), "code": FixedLength(value=1000)})
    assert mean_length(mixture, mix={"chat": 0.7, "code": 0.3}) == pytest.approx(370.0)


def test_mixture_by_domain_in_a_simulation(tmp_path):
    lengths = {"kind": "mixture", "components": {"chat": {"kind": "fixed", "value": 100},
                                                 "code": {"kind": "fixed", "value": 1000}}}
    result = simulate(scenario(tmp_path, {**MIX, "workload": {"prompt_tokens": lengths}}))
    requests = result.requests
    assert set(requests.loc[requests["domain"] == "chat", "prompt_tokens"]) == {100}
    assert set(requests.loc[requests["domain"] == "code", "prompt_tokens"]) == {1000}
    share = (requests["domain"] == "code").mean()
    n = len(requests)
    assert abs(share - 0.3) < 4 * np.sqrt(0.21 / n)


def test_empirical_per_domain_from_a_trace(tmp_path):
    code_lengths = {"kind": "empirical", "path": CODE}
    lengths = {"kind": "mixture", "components": {"chat": {"kind": "fixed", "value": 100}, "code": code_lengths}}
    result = simulate(scenario(tmp_path, {**MIX, "workload": {"prompt_tokens": lengths, "output_tokens": lengths}}))
    code = pd.read_csv(CODE)
    rows = set(zip(code["ContextTokens"], code["GeneratedTokens"], strict=True))
    code_requests = result.requests[result.requests["domain"] == "code"]
    assert len(code_requests) > 0
    assert set(zip(code_requests["prompt_tokens"], code_requests["output_tokens"], strict=True)) <= rows


@pytest.mark.parametrize(("changes", "message"), [
    ({"workload": {"prompt_tokens": {"kind": "mixture", "components": {"chat": {"kind": "fixed", "value": 5},
                                                                       "math": {"kind": "fixed", "value": 5}}}}},
     r"workload\.prompt_tokens\.components\.math: domain not in drafter\.acceptance\.domains"),
    ({**MIX, "workload": {"output_tokens": {"kind": "mixture", "components": {"chat": {"kind": "fixed", "value": 5}}}}},
     r"workload\.output_tokens\.components: no length distribution for domain 'code'"),
    ({"workload": {"prompt_tokens": {"kind": "mixture", "components": {"poetry": {"kind": "fixed", "value": 5}}}}},
     r"components\.poetry: unknown domain"),
    ({"workload": {"prompt_tokens": {"kind": "empirical"}}}, r"give either a trace 'path' or a list of 'values'"),
    ({"workload": {"arrivals": {"kind": "piecewise", "times_s": [0, 10], "rates_per_s": [1, 2], "period_s": 5}}},
     r"workload\.arrivals\.period_s: must exceed the last segment start"),
    ({"workload": {"arrivals": {"kind": "piecewise", "times_s": [5], "rates_per_s": [1], "period_s": 50}}},
     r"times_s\[0\]: the first segment starts at 0"),
    ({"workload": {"arrivals": {"kind": "gamma", "rate_per_s": 2}}}, r"workload\.arrivals\.cv: required key"),
    ({"workload": {"arrivals": {"kind": "mmpp", "rate_on_per_s": 2, "mean_on_s": 1, "mean_of_s": 2}}},
     r"did you mean 'mean_off_s'"),
])
def test_bad_workloads_are_load_errors(tmp_path, changes, message):
    with pytest.raises(SpecplanError, match=message):
        scenario(tmp_path, changes)


@pytest.mark.parametrize("arrivals", [
    {"kind": "gamma", "rate_per_s": 4, "cv": 2.0},
    {"kind": "mmpp", "rate_on_per_s": 10, "rate_off_per_s": 0.5, "mean_on_s": 2, "mean_off_s": 4},
    {"kind": "piecewise", "times_s": [0, 5], "rates_per_s": [8, 0], "period_s": 10},
    {"kind": "closed_loop", "users": 4, "think_s": 0.5, "think_cv": 0.0},
])
def test_every_arrival_kind_runs_and_conserves_requests(tmp_path, arrivals):
    result = simulate(scenario(tmp_path, {"workload": {"arrivals": arrivals}}))
    s = result.summary
    assert s["requests_arrived"] > 10
    assert s["requests_arrived"] == s["requests_completed"] + s["requests_running"] + s["requests_rejected"]
    assert "trace_bad_lines" not in s
