"""The KV rule answers which requests it admits; the decode core alone writes them to the log.

Under each shape of the rule (one cache; one per attention rank, the rank with the most
free KV; ranks chosen by the engine's dispatch) `kv.admit` pops the requests that fit
and returns them, leaving every log row as it was; `DecodeCore.admit` then marks exactly
those rows admitted (running, at its time), in the order the rule returned them.
"""

from __future__ import annotations

import numpy as np
import pytest

from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.caches import OneCache, RankCaches, RoutedRanks
from specplan.simulator.engine.core.request_log import RequestLog, Status
from specplan.simulator.engine.intake import register
from specplan.simulator.engine.records.step_log import StepLog
from tests.conftest import make_scenario

SHAPES = {  # engine block -> the rule it assembles
    "one cache": ({}, OneCache),
    "most free KV": ({"dp_attention": {"ranks": 2, "balance": "most_free_kv"}}, RankCaches),
    "round robin": ({"dp_attention": {"ranks": 2, "balance": "round_robin"}}, RoutedRanks),
}
PROMPTS = [300, 900, 200, 2500, 400, 100, 700, 1200]  # the fourth does not fit beside the first three


def queued_core(engine: dict):
    scenario = make_scenario(engine={"max_batch_requests": 6, "kv_capacity_tokens": 4000, **engine})
    parts = assemble(scenario)
    log = RequestLog()
    core = parts.core(log, StepLog())
    for prompt in PROMPTS:
        rid = register(log, 0.0, prompt, 20, 0, 0.0)
        log.queued(rid)
        core.enqueue(rid)
    return core, log


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_rule_returns_whom_it_admits_and_leaves_the_log_alone(shape: str) -> None:
    engine, rule = SHAPES[shape]
    core, log = queued_core(engine)
    assert isinstance(core.rules.kv, rule)
    before = {name: log[name].copy() for name in ("status", "admitted_s")}
    admitted = core.rules.kv.admit(core.state, log, 6)
    ids = [int(rid) for rid, *_ in admitted]
    assert ids and not set(ids) & set(core.state.queue)          # popped from the queue ...
    assert len(ids) + len(core.state.queue) == len(PROMPTS)
    for name, column in before.items():                          # ... and nothing written to the log
        np.testing.assert_array_equal(log[name], column)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_core_writes_exactly_the_admitted_ids_to_the_log(shape: str) -> None:
    engine, _rule = SHAPES[shape]
    core, log = queued_core(engine)
    count = core.admit(2.5)
    ids = core.state.batch.rids[: core.state.batch.n].tolist()
    marked = np.flatnonzero(~np.isnan(log["admitted_s"]))
    assert count == len(ids) > 0 and sorted(ids) == marked.tolist()
    assert (log["admitted_s"][marked] == 2.5).all()
    assert (log["status"][marked] == int(Status.RUNNING)).all()
    waiting = np.setdiff1d(np.arange(len(PROMPTS)), marked)
    assert (log["status"][waiting] == int(Status.QUEUED)).all()
