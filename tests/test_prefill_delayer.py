"""SGLang's prefill delayer on data-parallel ranks: new prompts wait while some ranks have one and others none.

A hand-made step on two ranks, each with a request decoding: rank A gets a prompt
first, rank B one step later. Without the delayer A prefills alone (its decode
waits) and B prefills in a later step; with it, A's prompt waits one step (both
ranks decode) and the two prompts are prefilled in the same step. The delayer
gives up after its passes, lets a prompt under way go on, and is refused in one
line where the engine or the schedule has no such rule.
"""

from __future__ import annotations

import numpy as np
import pytest

from specplan.engines import engine_traits
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.batch import COLUMNS, PREFILL_LEFT, RANK, RID, Batch, Rows
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.phases import Delayed, Separate, prefill_phases
from tests.conftest import make_scenario
from tests.test_prefill_phases import SEPARATE_DP

NO_DRAFTS = {"policy": {"name": "none"}}


def two_rank_config(delayer: bool, passes: int | None = None) -> EngineConfig:
    dp = {"ranks": 2, "prefill_delayer": delayer, **({"prefill_delay_passes": passes} if passes else {})}
    scenario = make_scenario(engine={"max_batch_requests": 8, "kv_capacity_tokens": 100_000,
                                     "prefill": {"mode": "chunked", "chunk_tokens": 200, "schedule": "separate"},
                                     "dp_attention": dp}, **NO_DRAFTS)
    return assemble(scenario).config


def row(rid: int, rank: int, prompt_left: int) -> np.ndarray:
    ints = np.zeros((len(COLUMNS), 1), dtype=np.int64)
    ints[RID], ints[RANK], ints[PREFILL_LEFT] = rid, rank, prompt_left
    return ints


def batch_of(*rows: np.ndarray) -> Batch:
    batch = Batch(block_size=0)
    for ints in rows:
        batch.append(ints, np.zeros((1, 0)))
    return batch


def step(phases, batch: Batch) -> tuple[list[bool], list[int]]:
    """One step's schedule: which rows decode and each row's prompt chunk; the chunks are then computed."""
    decode, _ = phases.decoding(batch)
    take = phases.chunks(batch, Rows.every(batch.n), 1)
    batch.ints[PREFILL_LEFT] -= take
    return decode.tolist(), take.tolist()


def hand_made(phases) -> list[tuple[list[bool], list[int]]]:
    """Rows 0 and 1 decode on ranks A (0) and B (1); a 50-token prompt reaches A, then one reaches B."""
    batch = batch_of(row(0, 0, 0), row(1, 1, 0), row(2, 0, 50))
    first = step(phases, batch)
    batch.append(row(3, 1, 50), np.zeros((1, 0)))
    second = step(phases, batch)
    third = step(phases, batch)
    return [first, second, third]


def test_the_delayer_aligns_two_ranks_prefills_in_one_step():
    plain = hand_made(prefill_phases(two_rank_config(False)))
    assert [take for _, take in plain] == [[0, 0, 50], [0, 0, 0, 50], [0, 0, 0, 0]]
    assert plain[0][0] == [False, True, False]              # A prefills alone: its decoding row waits
    assert plain[1][0] == [True, False, True, False]        # then B alone (A's new request decodes)

    phases = prefill_phases(two_rank_config(True))
    assert isinstance(phases, Delayed)
    delayed = hand_made(phases)
    assert delayed[0] == ([True, True, False], [0, 0, 0])   # A's prompt waits: both ranks decode
    assert delayed[1] == ([False, False, False, False], [0, 0, 50, 50])  # both prompts in the same step
    assert phases.delayed_steps == 1


def test_the_delayer_gives_up_after_its_passes_and_lets_a_prompt_under_way_go_on():
    phases = prefill_phases(two_rank_config(True, passes=3))
    batch = batch_of(row(0, 0, 0), row(1, 1, 0), row(2, 0, 50))
    takes = [step(phases, batch)[1] for _ in range(3)]
    assert takes == [[0, 0, 0], [0, 0, 0], [0, 0, 50]]       # passes − 1 = 2 steps held, then "wait_timeout"
    # a 300-token prompt on A takes a 100-token chunk (200 / 2 ranks) when both ranks have one; its rest goes on
    phases = prefill_phases(two_rank_config(True))
    batch = batch_of(row(0, 0, 0), row(1, 1, 0), row(2, 0, 300), row(3, 1, 10))
    assert step(phases, batch)[1] == [0, 0, 100, 10]
    assert step(phases, batch)[1] == [0, 0, 100, 0]          # under way: not held back by B having none
    assert phases.delayed_steps == 0


def test_with_nothing_else_to_run_a_prompt_starts_at_once():
    """SGLang's passes with nothing to run are over in the ranks' all-gather: not simulated as steps."""
    phases = prefill_phases(two_rank_config(True))
    assert step(phases, batch_of(row(0, 0, 50)))[1] == [50]


def test_the_delayer_is_off_by_default_and_sglang_rows_carry_it():
    assert type(prefill_phases(two_rank_config(False))) is Separate
    for version in ("0.5.12.post1", "0.5.14", "0.5.15"):
        rule = engine_traits("sglang", version).dp_scheduler
        assert rule is not None and rule.delayer is not None and rule.delayer.max_delay_passes == 30


def test_a_served_run_with_the_delayer_holds_prompts_and_completes_every_request():
    scenario = {**SEPARATE_DP, "horizon": {"duration_s": 4, "warmup_s": 1}}
    engine = {**scenario["engine"], "dp_attention": {"ranks": 4, "balance": "round_robin", "prefill_delayer": True}}
    on = simulate(make_scenario(**{**scenario, "engine": engine}))
    off = simulate(make_scenario(**scenario))
    for result in (on, off):
        s = result.summary
        assert s["requests_arrived"] == s["requests_completed"] + s["requests_running"] + s["requests_rejected"]
    # with new prompts held back while the ranks are mixed, fewer steps are prefill steps
    assert on.summary["engine_prefill_steps"] < off.summary["engine_prefill_steps"]


@pytest.mark.parametrize(("engine", "message"), [
    ({"dp_attention": {"ranks": 1, "prefill_delayer": True},
      "prefill": {"mode": "chunked", "chunk_tokens": 200, "schedule": "separate"}}, "dp_attention.ranks >= 2"),
    ({"dp_attention": {"ranks": 2, "prefill_delayer": True},
      "prefill": {"mode": "chunked", "chunk_tokens": 200, "schedule": "mixed"}}, "separate prefill batches"),
])
def test_a_delayer_the_engine_cannot_run_is_refused_in_one_line(engine, message):
    scenario = make_scenario(engine={"max_batch_requests": 8, "kv_capacity_tokens": 100_000, **engine}, **NO_DRAFTS)
    with pytest.raises(ScenarioError, match=message) as error:
        assemble(scenario).core(*log_and_steps())
    assert "engine.dp_attention.prefill_delayer" in str(error.value) and "\n" not in str(error.value)


def test_vllm_has_no_prefill_delayer():
    scenario = make_scenario(hardware={"profile": "builtin:b300-deepseek-v4-flash-tp1-vllm"},
                             engine={"max_batch_requests": 8, "kv_capacity_tokens": 100_000,
                                     "prefill": {"mode": "chunked", "chunk_tokens": 200, "schedule": "separate"},
                                     "dp_attention": {"ranks": 2, "prefill_delayer": True}}, **NO_DRAFTS)
    with pytest.raises(ScenarioError, match="has no prefill delayer"):
        assemble(scenario).core(*log_and_steps())


def log_and_steps():
    from specplan.simulator.engine.core.request_log import RequestLog
    from specplan.simulator.engine.records.step_log import StepLog
    return RequestLog(), StepLog()
