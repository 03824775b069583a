"""The step's fast paths draw and count what the plain ones would (issue 46, item 3: a faster step, the same answers).

Outcome draws come a block at a time (`Drawn`: uniform ones for fixed lengths; a
draft reader's token noise and logistic outcomes too), the speculative counters hold
the steps' arrays until they bin them, and the ledger sums with a row of ones:
each must give the numbers a call per step gives, in the same order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specplan.simulator.core.streams import stream
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.batch import COLUMNS, Batch, Rows, ones
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.intake import register
from specplan.simulator.engine.records.step_log import SpeculationCounters, StepLog
from specplan.simulator.engine.speculator import AcceptanceRows, DraftReader, Drawn
from tests.conftest import make_scenario


@pytest.mark.parametrize("block", [5, 64, 1 << 14])
def test_drawn_blocks_hand_out_the_per_step_draws_in_order(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Drawn, "BLOCK", block)
    shapes = [(3, 2), (7, 3), (1, 1), (64, 3), (2, 3), (0, 3), (40, 2), (9, 3)]
    plain = np.random.default_rng(7)
    drawn = Drawn(np.random.default_rng(7).random)
    for rows, length in shapes * 3:  # past several block edges, a step wider than a block included
        expected = plain.random((rows, length))
        got = drawn.take(rows, length)
        assert got.shape == (rows, length)
        np.testing.assert_array_equal(got, expected)


def test_speculative_counters_bin_every_step_across_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SpeculationCounters, "BUFFERED", 10)
    rng = np.random.default_rng(3)
    steps = [rng.integers(0, 4, size) for size in (4, 7, 1, 12, 3, 9, 0, 5)]
    counters = SpeculationCounters(3)
    for accepted in steps:
        counters.add(accepted, accepted.size, 3 * accepted.size)
    every = np.concatenate(steps)
    assert counters.accepted_tokens == int(every.sum())
    np.testing.assert_array_equal(counters.accepted_per_position, [(every >= k).sum() for k in (1, 2, 3)])
    assert counters.drafts == every.size and counters.draft_tokens == 3 * every.size


def test_ones_are_shared_and_read_only() -> None:
    row = ones(6)
    assert row is ones(6) and row.dtype == np.int64 and row.tolist() == [1] * 6
    with pytest.raises(ValueError):
        row[0] = 2
    accepted = np.array([0, 3, 2, 1, 3, 0])
    assert int(accepted.dot(ones(accepted.size))) == int(accepted.sum())


@pytest.mark.parametrize("kind", ["normal", "logistic"])
def test_a_draft_readers_draws_in_blocks_are_its_per_step_draws(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The draft reader's token noise (σ · a standard normal) and logistic outcome draws, taken from blocks, are
    the numbers its per-step calls drew (`rng.normal(0, σ, (R, γ))`, `rng.logistic(size=(R, γ))`)."""
    monkeypatch.setattr(Drawn, "BLOCK", 50)
    per_step = {"normal": lambda rng, shape: rng.normal(0.0, 0.3, shape),
                "logistic": lambda rng, shape: rng.logistic(size=shape)}[kind]
    blocks = {"normal": lambda rng: lambda n: rng.normal(0.0, 0.3, n),
              "logistic": lambda rng: lambda n: rng.logistic(size=n)}[kind]
    plain, drawn = np.random.default_rng(11), Drawn(blocks(np.random.default_rng(11)))
    for rows in (4, 17, 1, 64, 9, 0, 33, 64):
        np.testing.assert_array_equal(drawn.take(rows, 3), per_step(plain, (rows, 3)))


def test_a_draft_readers_step_draws_the_logits_and_outcomes_of_its_per_step_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`DraftReader.draw_logits` over several steps (every row, some rows, past block edges) gives the x and the
    accepted prefixes that one `step_logits` call and one logistic draw per step on the same streams gave."""
    monkeypatch.setattr(Drawn, "BLOCK", 40)
    scenario = make_scenario(policy={"name": "dspark-async"},
                             drafter={"acceptance": {"request_sigma": 0.3, "token_sigma": 0.4}})
    parts = assemble(scenario)
    reader = parts.core(RequestLog(), StepLog()).rules.speculator
    assert isinstance(reader, DraftReader) and reader.noise is not None
    gamma = reader.block_size
    batch = Batch(gamma, 64)
    rng = np.random.default_rng(4)
    batch.append(np.zeros((len(COLUMNS), 30), dtype=np.int64) + np.arange(30), rng.normal(1.0, 1.0, (30, gamma)))
    noise, outcomes = stream(scenario.seed, "acceptance", 0), stream(scenario.seed, "outcomes", 0)
    for rows in [Rows.every(30), Rows.some(np.array([0, 3, 7])), Rows.every(30), Rows.some(np.arange(2, 29)),
                 Rows.every(30)]:
        x, prefix = reader.draw_logits(batch, rows)
        expected = parts.drafter.acceptance.step_logits(rows.of(batch.acceptance), noise)
        np.testing.assert_array_equal(x, expected)
        survived = np.cumprod(outcomes.logistic(size=expected.shape) < expected, axis=1)
        np.testing.assert_array_equal(prefix, survived.sum(axis=1))


def test_acceptance_rows_in_blocks_are_the_rows_one_call_per_request_makes() -> None:
    """`AcceptanceRows` makes every registered request's row at once when an admitted one is missing: each row
    equals the rule called for that request alone (admissions out of order, past the storage's doubling)."""
    scenario = make_scenario(drafter={"acceptance": {"per_position": {"chat": [0.8, 0.7, 0.6], "code": [0.9, 0.8, 0.7]},
                                                     "domains": {"chat": 0.5, "code": 0.5},
                                                     "request_sigma": 0.4, "token_sigma": 0.3}})
    drafter = assemble(scenario).drafter
    rng = np.random.default_rng(5)
    for rule in (drafter.row_probabilities, drafter.row_logits):
        log, rows = RequestLog(), AcceptanceRows(rule, drafter.block_size)
        for burst in (1, 3, 700, 2, 40):
            for _ in range(burst):
                register(log, 0.0, 100, 10, int(rng.integers(2)), float(rng.normal(0.0, 0.4)))
            admitted = rng.permutation(log.size)[:min(5, log.size)]
            for ids in (np.array([0, log.size - 1]), admitted[:1], admitted):  # an old row and a new one at once
                expected = np.concatenate([rule(log["domain"][[rid]], log["acceptance_offset"][[rid]])
                                           for rid in ids.tolist()])
                np.testing.assert_array_equal(rows.of(log, ids), expected)
        last = np.array([log.size - 1])  # the newest request: every registered row is made
        np.testing.assert_array_equal(rows.of(log, last), rule(log["domain"][last], log["acceptance_offset"][last]))
        assert rows.made == log.size


@pytest.mark.parametrize("policy", [{"name": "static", "params": {"length": 3}}, {"name": "dspark-async"}])
def test_acceptance_rows_in_blocks_give_the_records_of_one_row_per_admission(
        policy: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose admissions read the block-made rows records what a run calling the rule at each admission (the
    path they replace) records: the same requests and steps, on two replicas sharing one log."""
    scenario = make_scenario(policy=policy, cluster={"replicas": 2, "router": "least_loaded"},
                             drafter={"acceptance": {"request_sigma": 0.4, "token_sigma": 0.3}},
                             workload={"arrivals": {"kind": "poisson", "rate_per_s": 12}})
    blocks = simulate(scenario)
    monkeypatch.setattr(AcceptanceRows, "of", lambda self, log, rids: self.rule(log["domain"][rids],
                                                                                  log["acceptance_offset"][rids]))
    one_by_one = simulate(scenario)
    assert len(blocks.steps) > 100
    pd.testing.assert_frame_equal(blocks.requests, one_by_one.requests)
    pd.testing.assert_frame_equal(blocks.steps, one_by_one.steps)
