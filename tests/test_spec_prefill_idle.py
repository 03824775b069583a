"""SGLang under speculative decoding and DP attention: while any rank prefills, every other rank idles.

SGLang's scheduler (get_next_batch_to_run) all-gathers the ranks' new prefill
batches before it builds a decode batch when a speculative algorithm runs under
DP attention, so a rank with decoding requests runs an idle batch in a step
where another rank prefills. A hand-made step on two ranks, a request decoding
on each and a prompt on rank A: with the rule, both decoding rows wait; without
it (no speculation, or `decode_during_prefill: decode`) only A's row waits. The
engine's rule is on for SGLang rows with a drafting policy; an explicit setting
the engine cannot run is refused in one line.
"""

from __future__ import annotations

import numpy as np
import pytest

from specplan.engines import engine_traits
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.phases import prefill_phases
from tests.conftest import make_scenario
from tests.test_prefill_delayer import NO_DRAFTS, batch_of, log_and_steps, row, step
from tests.test_prefill_phases import SEPARATE_DP

MTP = {"policy": {"name": "static", "params": {"length": 3}}}   # with the base scenario's MTP drafter


def two_rank_config(setting: str = "auto", profile: str | None = None, drafts: bool = False) -> EngineConfig:
    engine = {"max_batch_requests": 8, "kv_capacity_tokens": 100_000,
              "prefill": {"mode": "chunked", "chunk_tokens": 200, "schedule": "separate"},
              "dp_attention": {"ranks": 2 if profile is None else 4, "decode_during_prefill": setting}}
    hardware = {} if profile is None else {"hardware": {"profile": profile, "gpus_per_replica": 4}}
    return assemble(make_scenario(engine=engine, **hardware, **(MTP if drafts else NO_DRAFTS))).config


def first_step(phases) -> tuple[list[bool], list[int]]:
    """Rows 0 and 1 decode on ranks A (0) and B (1); row 2, on A, has a 50-token prompt to compute (the SGLang
    profile's two other ranks hold nothing)."""
    return step(phases, batch_of(row(0, 0, 0), row(1, 1, 0), row(2, 0, 50)))


def test_while_one_rank_prefills_the_other_idles_under_the_rule_and_decodes_without_it():
    assert first_step(prefill_phases(two_rank_config("decode"))) == ([False, True, False], [0, 0, 50])
    assert first_step(prefill_phases(two_rank_config("idle"))) == ([False, False, False], [0, 0, 50])
    # with no prompt anywhere both ranks decode, rule or not
    idle = prefill_phases(two_rank_config("idle"))
    assert step(idle, batch_of(row(0, 0, 0), row(1, 1, 0)))[0] == [True, True]


def test_the_delayer_and_the_rule_together_hold_every_rank_while_a_delayed_prompt_runs():
    config = two_rank_config("idle")
    engine = config.engine
    delayed = EngineConfig(**{**config.__dict__, "engine": engine.__class__(**{
        **engine.__dict__, "dp_attention": engine.dp_attention.__class__(
            **{**engine.dp_attention.__dict__, "prefill_delayer": True})})})
    phases = prefill_phases(delayed)
    batch = batch_of(row(0, 0, 0), row(1, 1, 0), row(2, 0, 50))
    assert step(phases, batch) == ([True, True, False], [0, 0, 0])      # mixed ranks: the prompt is delayed
    batch.append(row(3, 1, 50), np.zeros((1, 0)))
    assert step(phases, batch)[0] == [False, False, False, False]       # both prefill: both decode rows wait


SGLANG_DP = "builtin:b200-deepseek-v4-flash-dp4ep4-sglang"


def test_auto_is_the_engines_rule_sglang_idles_only_under_speculation():
    for version in ("0.5.12.post1", "0.5.14", "0.5.15"):
        rule = engine_traits("sglang", version).dp_scheduler
        assert rule is not None and rule.spec_prefill_idle and "get_next_batch_to_run" in rule.sources[
            "spec_prefill_idle"]
    config = two_rank_config(profile=SGLANG_DP)
    assert first_step(prefill_phases(config, speculates=True))[0] == [False, False, False]
    assert first_step(prefill_phases(config, speculates=False))[0] == [False, True, False]
    # a synthetic profile names no engine: auto keeps the decode batch
    assert first_step(prefill_phases(two_rank_config(), speculates=True))[0] == [False, True, False]


def test_a_served_mtp_run_under_the_rule_holds_more_decode_and_completes_every_request():
    scenario = {**SEPARATE_DP, **MTP, "horizon": {"duration_s": 4, "warmup_s": 1}}
    runs = {}
    for setting in ("auto", "decode"):
        engine = {**scenario["engine"], "dp_attention": {**scenario["engine"]["dp_attention"],
                                                         "decode_during_prefill": setting}}
        runs[setting] = simulate(make_scenario(**{**scenario, "engine": engine})).summary
    for s in runs.values():
        assert s["requests_arrived"] == s["requests_completed"] + s["requests_running"] + s["requests_rejected"]
    assert runs["auto"]["decode_request_steps_held"] > runs["decode"]["decode_request_steps_held"]


@pytest.mark.parametrize(("engine", "message"), [
    ({"dp_attention": {"ranks": 1, "decode_during_prefill": "idle"},
      "prefill": {"mode": "chunked", "chunk_tokens": 200, "schedule": "separate"}}, "dp_attention.ranks >= 2"),
    ({"dp_attention": {"ranks": 2, "decode_during_prefill": "decode"},
      "prefill": {"mode": "chunked", "chunk_tokens": 200, "schedule": "mixed"}}, "schedule separate"),
])
def test_a_setting_the_engine_cannot_run_is_refused_in_one_line(engine, message):
    scenario = make_scenario(engine={"max_batch_requests": 8, "kv_capacity_tokens": 100_000, **engine}, **NO_DRAFTS)
    with pytest.raises(ScenarioError, match=message) as error:
        assemble(scenario).core(*log_and_steps())
    assert "engine.dp_attention.decode_during_prefill" in str(error.value) and "\n" not in str(error.value)
