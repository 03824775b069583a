"""A replica's prefill front: one strategy per prefill mode, chosen when the replica is built, holding the first-token rule.

Stories: chunked prefill runs in the engine (`InEngine`), a fixed-rate stage in front of
the decode queue (`Stage`), a prefill pool (`PoolStage`); a request whose KV arrives whole
gets its first token at the end of its first decode step, or at the stage's end with
`first_token: prefill`; a request preempted before its first token still awaits it after
its prompt is computed again, and one preempted after it does not.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from specplan.simulator.engine.cluster.prefill_front import InEngine, PoolStage, Stage
from specplan.simulator.engine.cluster.simulation import Simulation, simulate
from specplan.simulator.scenario import scenario_from_mapping
from tests.conftest import BASE, REPO, make_scenario

SHORT = {"duration_s": 6, "warmup_s": 0}


def pool_scenario():
    raw = copy.deepcopy(BASE)
    del raw["engine"]["prefill"]
    raw["horizon"] = SHORT
    raw["cluster"]["prefill"] = {"replicas": 1, "link": {"gbps": 100.0, "latency_ms": 2.0},
                                 "kv_bytes_per_token": 131072}
    return scenario_from_mapping(raw, REPO)


@pytest.mark.parametrize(("scenario", "front"), [
    (lambda: make_scenario(horizon=SHORT, engine={"prefill": {"mode": "chunked", "chunk_tokens": 256}}), InEngine),
    (lambda: make_scenario(horizon=SHORT), Stage),
    (pool_scenario, PoolStage),
])
def test_each_prefill_mode_runs_its_own_front(scenario, front) -> None:
    sim = Simulation(scenario())
    assert all(type(replica.front) is front for replica in sim.replicas)


def test_after_the_stage_the_first_token_is_the_first_decode_steps_end() -> None:
    result = simulate(make_scenario(horizon=SHORT))
    req = result.requests[result.requests["status"] == "completed"]
    assert len(req) > 5
    assert (req["first_token_s"] > req["kv_ready_s"]).all()
    ends = result.steps["end_s"].to_numpy()   # one replica: its steps in order
    first_step = ends[np.searchsorted(ends, req["admitted_s"].to_numpy(), side="right")]
    np.testing.assert_array_equal(req["first_token_s"].to_numpy(), first_step)   # the end of its first step


def test_with_first_token_prefill_the_stage_emits_it() -> None:
    result = simulate(make_scenario(horizon=SHORT, engine={"prefill": {"first_token": "prefill"}}))
    req = result.requests[result.requests["status"] == "completed"]
    assert len(req) > 5 and (req["first_token_s"] == req["kv_ready_s"]).all()


class Calls:
    """A driver or a pool that records what the front asked of it."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def enqueue(self, rid: int, front: bool = False) -> None:
        self.calls.append(("enqueue", rid, front))

    def receive(self, rid: int, first: bool) -> None:
        self.calls.append(("receive", rid, first))

    def finish(self, ids: np.ndarray) -> None:
        self.calls.append(("finish", ids.tolist()))

    def submit(self, rid: int, tokens: int, blocks, first: bool) -> None:
        self.calls.append(("pool", rid, tokens, first))


def replica_parts():
    sim = Simulation(make_scenario(horizon=SHORT))
    log = sim.log
    early = log.add(0.0, 200, 50, 0)       # preempted before its first token
    late = log.add(0.0, 300, 50, 0)        # preempted after it
    log.first_token(late, 1.0)
    log["generated_tokens"][late] = 7
    return sim, log, early, late


def test_a_request_preempted_before_its_first_token_still_awaits_it() -> None:
    sim, log, early, late = replica_parts()
    core = sim.replicas[0].core
    pool = Calls()
    front = PoolStage(core, log, pool)  # type: ignore[arg-type]
    driver = Calls()
    front.receive(driver, early, True)
    front.receive(driver, late, True)
    assert front.awaiting == 2
    front.awaiting -= 1                     # `late` got its first token at a step's end
    front.requeue(driver, early)
    front.requeue(driver, late)
    assert pool.calls == [("pool", early, 200, True), ("pool", late, 307, False)]
    assert front.awaiting == 0              # `early` awaits it again only once its KV comes back


def test_chunked_prefill_requeues_at_the_head_and_a_stage_recomputes_prompt_and_generated_tokens() -> None:
    sim, log, _early, late = replica_parts()
    core, driver = sim.replicas[0].core, Calls()
    InEngine(core, log).requeue(driver, late)
    assert driver.calls == [("enqueue", late, True)]
    stage = Stage(sim.env, core, log, 1000.0, first_token=False)
    stage.requeue(driver, late)                 # 300 prompt + 7 generated tokens at 1000 tokens/s
    assert stage.in_prefill == 1 and stage.free_at == pytest.approx(0.307)
    sim.env.run(until=1.0)
    assert stage.in_prefill == 0 and driver.calls[-1] == ("receive", late, False)
