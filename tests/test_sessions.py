"""Agent sessions as stories: a two-turn session checked by hand, a subagent fan-out and join, the lanes'
warm-up barrier and recycling, the cache bust, the three formats, and every malformed input refused in one line."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import numpy as np
import pytest

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.traces.errors import TraceError
from specplan.traces.lanes import Play, capped_gap
from specplan.traces.sessions import Conversation, FanOut, SessionTrace, Turn, read_sessions
from tests.conftest import BASE, merged

STEP_S = 0.010   # every step costs 10 ms (a flat linear profile)
SESSION_BASE = merged(BASE, {
    "horizon": {"duration_s": 60, "warmup_s": 0},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.0}},
    "engine": {"max_batch_requests": 16, "max_step_tokens": 8192,
               "prefill": {"mode": "chunked", "chunk_tokens": 4096},
               "prefix_cache": {"block_tokens": 64, "capacity_tokens": 100_000}},
    "drafter": {"family": "none", "block_size": 0}, "policy": {"name": "none"},
})


def jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def sessions_scenario(tmp_path, arrivals: dict, **changes):
    raw = merged(SESSION_BASE, {"workload": {"arrivals": {"kind": "sessions", "lanes": 1, "start_max": 0.0,
                                                          "idle_gap_cap_s": None, "recycle": False, **arrivals}}})
    return scenario_from_mapping(merged(raw, changes), tmp_path)


TWO_TURNS = [{"session": "s", "turn": 0, "new_tokens": 640, "output_tokens": 64},
             {"session": "s", "turn": 1, "new_tokens": 128, "output_tokens": 32, "gap_s": 5.0}]


# ---- a two-turn session, by hand ----------------------------------------------------------------------------------


def test_the_second_turn_reuses_the_first_prompt_and_answer(tmp_path):
    """Turn 1's prompt is turn 0's 640 tokens, its 64-token answer and 128 new ones: 832 tokens, whose first ten
    64-token blocks are turn 0's."""
    (trace,) = read_sessions(jsonl(tmp_path / "s.jsonl", TWO_TURNS), "plain", 64)
    first, second = trace.root.turns()
    assert (first.prompt_tokens, second.prompt_tokens) == (640, 640 + 64 + 128)
    assert first.blocks.tolist() == list(range(10))
    assert second.blocks.tolist() == list(range(13))   # 832 // 64 = 13 full blocks, extending the first ten


def test_the_second_turn_waits_for_the_answer_and_the_gap_and_finds_its_prefix(tmp_path):
    """Turn 0: one 10 ms step computes its 640-token prompt and emits its first token, 63 more steps finish it at
    0.64 s. Turn 1 is sent 5 s later (5.64 s); its cache holds the ten blocks of turn 0 (640 tokens), so it
    computes 192 tokens in one step and finishes 32 steps after it was sent (5.96 s)."""
    path = jsonl(tmp_path / "s.jsonl", TWO_TURNS)
    result = simulate(sessions_scenario(tmp_path, {"path": path, "format": "plain"}))
    requests = result.requests
    assert requests["prompt_tokens"].tolist() == [640, 832]
    assert requests["finish_s"][0] == pytest.approx(64 * STEP_S)
    assert requests["arrival_s"][1] == pytest.approx(requests["finish_s"][0] + 5.0)
    assert requests["finish_s"][1] == pytest.approx(requests["arrival_s"][1] + 32 * STEP_S)
    summary = result.summary
    assert summary["prefill_tokens_looked_up"] == 640 + 832
    assert summary["prefill_tokens_saved"] == 640
    assert summary["prefix_cache_gpu_hit_rate"] == pytest.approx(640 / (640 + 832))
    assert summary["session_window_start_s"] == pytest.approx(requests["finish_s"][0])   # the warm-up was turn 0


# ---- subagents ---------------------------------------------------------------------------------------------------


def weka_trace(tmp_path) -> str:
    """A parent turn, two subagents spawned together (two turns and one), then the parent's joining turn."""
    def turn(t, prompt, output, ids, think=0.0):
        return {"t": t, "type": "n", "model": "m", "in": prompt, "out": output, "hash_ids": ids,
                "think_time": think}
    trace = {"id": "w", "models": ["m"], "block_size": 64, "hash_id_scope": "local", "requests": [
        turn(0.0, 640, 10, list(range(10))),
        {"t": 1.0, "type": "subagent", "agent_id": "a", "subagent_type": "Explore", "status": "completed",
         "models": ["m"], "requests": [turn(1.0, 128, 20, [100, 101], 1.0),
                                       turn(3.0, 300, 20, [100, 101, 102, 103], 2.0)]},
        {"t": 1.0, "type": "subagent", "agent_id": "b", "subagent_type": "Explore", "status": "completed",
         "models": ["m"], "requests": [turn(1.0, 64, 50, [200], 0.5)]},
        turn(9.0, 800, 10, list(range(12)), 3.0),
        turn(9.5, 900, 10, list(range(14)), 0.25)]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(trace))
    return str(path)


def test_a_weka_subagent_entry_is_a_fan_out_the_next_parent_turn_joins(tmp_path):
    (trace,) = read_sessions(weka_trace(tmp_path), "weka")
    kinds = [type(item).__name__ for item in trace.root.items]
    assert kinds == ["Turn", "FanOut", "Turn", "Turn"]
    fan = trace.root.items[1]
    assert isinstance(fan, FanOut) and [c.id for c in fan.children] == ["w/a", "w/b"]


def test_subagents_fan_out_together_and_the_parent_waits_for_both(tmp_path):
    """After the parent's turn 0 (warm-up) both subagents start their first turns after their own gaps; the
    parent's next turn is sent its 3 s gap after the later subagent ends, not before."""
    result = simulate(sessions_scenario(tmp_path, {"path": weka_trace(tmp_path)}))
    r = result.requests.set_index("prompt_tokens")
    end_parent = r.loc[640, "finish_s"]
    assert r.loc[128, "arrival_s"] == pytest.approx(end_parent + 1.0)   # subagent a, turn 0
    assert r.loc[64, "arrival_s"] == pytest.approx(end_parent + 0.5)    # subagent b, in parallel
    assert r.loc[300, "arrival_s"] == pytest.approx(r.loc[128, "finish_s"] + 2.0)
    joined = max(r.loc[300, "finish_s"], r.loc[64, "finish_s"])
    assert r.loc[800, "arrival_s"] == pytest.approx(joined + 3.0)
    assert r.loc[900, "arrival_s"] == pytest.approx(r.loc[800, "finish_s"] + 0.25)


# ---- the lanes protocol -----------------------------------------------------------------------------------------


def short_sessions(tmp_path, names=("a", "b"), turns=3) -> str:
    rows = [{"session": name, "turn": t, "new_tokens": 128 * (i + 1), "output_tokens": 4, "gap_s": 0.5}
            for i, name in enumerate(names) for t in range(turns)]
    return jsonl(tmp_path / "short.jsonl", rows)


def test_a_lane_recycles_its_session_from_turn_zero_and_plays_every_session_before_repeating(tmp_path):
    scenario = sessions_scenario(tmp_path, {"path": short_sessions(tmp_path), "format": "plain", "recycle": True},
                                 horizon={"duration_s": 20})
    result = simulate(scenario)
    prompts = result.requests["prompt_tokens"].tolist()
    firsts = [p for p in prompts if p in (128, 256)]   # the first turns of a and b
    assert len(firsts) >= 4
    assert sorted(firsts[:2]) == [128, 256] and sorted(firsts[2:4]) == [128, 256]   # shuffled rounds
    assert result.summary["sessions_started"] >= 4
    assert result.summary["sessions_completed"] >= 2
    assert result.summary["session_wall_mean_s"] > 1.0   # two gaps of 0.5 s and three turns


def test_without_recycling_a_lane_stops_and_the_window_ends_with_the_last_lane(tmp_path):
    scenario = sessions_scenario(tmp_path, {"path": short_sessions(tmp_path), "format": "plain"},
                                 horizon={"duration_s": 50})
    result = simulate(scenario)
    assert len(result.requests) == 3
    assert result.summary["simulated_s"] < 50


def test_every_lane_warms_up_before_the_window_opens(tmp_path):
    """Four lanes start mid-session (start share 0.5 of 8 turns: turn 4); none sends its fifth turn before the
    last lane's warm-up turn has finished, and the window opens there."""
    path = short_sessions(tmp_path, names=("a", "b", "c", "d"), turns=8)
    scenario = sessions_scenario(tmp_path, {"path": path, "format": "plain", "lanes": 4, "start_min": 0.5,
                                            "start_max": 0.5, "idle_gap_cap_s": 10}, horizon={"duration_s": 5})
    result = simulate(scenario)
    requests = result.requests
    warmups = requests.iloc[:4]
    barrier = warmups["finish_s"].max()
    assert result.summary["session_window_start_s"] == pytest.approx(barrier)
    assert (requests.iloc[4:]["arrival_s"] >= barrier).all()
    # each warm-up is turn 4 of its session (5 turns of 128 (i + 1) new tokens and 4 answers of 4 tokens)
    assert sorted(warmups["prompt_tokens"]) == [5 * 128 * (i + 1) + 4 * 4 for i in range(4)]


def test_warmup_turns_are_one_token_turns_sent_without_a_gap(tmp_path):
    path = short_sessions(tmp_path, names=("a",), turns=6)
    scenario = sessions_scenario(tmp_path, {"path": path, "format": "plain", "warmup_turns": 2},
                                 horizon={"duration_s": 3})
    requests = simulate(scenario).requests
    assert requests["output_tokens"].tolist()[:3] == [4, 1, 1]
    assert requests["arrival_s"][1] == pytest.approx(requests["finish_s"][0])
    assert requests["arrival_s"][3] == pytest.approx(requests["finish_s"][2] + 0.5)


def test_the_cache_bust_gives_each_play_its_own_blocks_but_the_shared_prefix():
    """Two plays of one session: with the bust their first prompts share only the system prefix's 2 blocks
    (128 tokens); without it, every block."""
    blocks = np.arange(5, dtype=np.int64)
    turn = Turn(320, 4, blocks, 0.0)
    trace = SessionTrace("s", 64, Conversation("s", (turn,)), shared_prefix_tokens=150)
    for bust, shared in (("first_turn", 2), ("none", 5)):
        lanes = SimpleNamespace(spec=SimpleNamespace(cache_bust=bust))
        one, two = (Play(lanes, trace, 0, number, None).blocks(turn) for number in (1, 2))  # type: ignore[arg-type]
        assert sum(a == b for a, b in zip(one, two, strict=True)) == shared
        assert len(set(one)) == 5


def test_the_idle_gap_cap_applies_to_the_recorded_start_to_start_gap():
    assert capped_gap(30.0, 4.0, 10.0) == 6.0     # 4 s of server time + 30 s of gap → start-to-start 10 s
    assert capped_gap(3.0, 4.0, 10.0) == 3.0      # under the cap: kept
    assert capped_gap(30.0, 12.0, 10.0) == 0.0    # the server time alone passes the cap
    assert capped_gap(30.0, 4.0, None) == 30.0


# ---- formats ----------------------------------------------------------------------------------------------------


def test_mooncake_sessions_chain_by_prefix_or_by_session_id(tmp_path):
    rows = [{"timestamp": 0, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2]},
            {"timestamp": 100, "input_length": 600, "output_length": 8, "hash_ids": [9, 10]},
            {"timestamp": 5000, "input_length": 1600, "output_length": 8, "hash_ids": [1, 2, 3, 4]},
            {"timestamp": 7000, "input_length": 2048, "output_length": 8, "hash_ids": [1, 2, 3, 4]}]
    traces = read_sessions(jsonl(tmp_path / "m.jsonl", rows), "mooncake", 512)
    assert [len(t.root.turns()) for t in traces] == [3, 1]
    assert [t.gap_s for t in traces[0].root.turns()] == [0.0, 5.0, 2.0]   # start-to-start without think_time
    named = [dict(row, session_id="x" if i % 2 == 0 else "y") for i, row in enumerate(rows)]
    traces = read_sessions(jsonl(tmp_path / "n.jsonl", named), "mooncake", 512)
    assert [t.id for t in traces] == ["x", "y"]


def test_a_mooncake_subagent_fans_out_after_the_parent_turn_sent_before_it(tmp_path):
    rows = [{"timestamp": 0, "input_length": 512, "output_length": 4, "hash_ids": [1], "session_id": "p"},
            {"timestamp": 1000, "input_length": 512, "output_length": 4, "hash_ids": [7], "session_id": "c",
             "parent": "p"},
            {"timestamp": 3000, "input_length": 1024, "output_length": 4, "hash_ids": [1, 2], "session_id": "p"}]
    (trace,) = read_sessions(jsonl(tmp_path / "m.jsonl", rows), "mooncake", 512)
    assert [type(i).__name__ for i in trace.root.items] == ["Turn", "FanOut", "Turn"]


# ---- malformed inputs: one line each, exit 2 through the CLI ------------------------------------------------------


def weka_with(tmp_path, **override) -> str:
    request = {"t": 3.0, "type": "n", "model": "m", "in": 640, "out": 4, "hash_ids": list(range(10))}
    trace = {"id": "w", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
             "requests": [request, {**request, "t": 4.0, "in": 700, "hash_ids": list(range(11))}]}
    trace.update(override.pop("trace", {}))
    trace["requests"][1].update(override)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(trace))
    return str(path)


MALFORMED = {
    "weka blocks too few": (lambda p: weka_with(p, hash_ids=[1, 2]), "weka", "2 blocks for a 700-token prompt"),
    "weka blocks too many": (lambda p: weka_with(p, hash_ids=list(range(13))), "weka", "13 blocks"),
    "weka unsorted": (lambda p: weka_with(p, t=1.0), "weka", "goes backwards"),
    "weka not json": (lambda p: str((p / "x.json").write_text("{nope") and p / "x.json"), "weka", "not JSON"),
    "weka global scope": (lambda p: weka_with(p, trace={"hash_id_scope": "global"}), "weka", "hash_id_scope"),
    "weka negative tokens": (lambda p: weka_with(p, out=-3), "weka", "not a whole number"),
    "plain unknown parent": (lambda p: jsonl(p / "p.jsonl", [
        {"session": "s", "turn": 0, "new_tokens": 64, "output_tokens": 2},
        {"session": "c", "turn": 0, "new_tokens": 64, "output_tokens": 2, "parent": "nobody", "after_turn": 0}]),
        "plain", "joins an unknown parent 'nobody'"),
    "plain unsorted": (lambda p: jsonl(p / "p.jsonl", [
        {"session": "s", "turn": 1, "new_tokens": 64, "output_tokens": 2}]), "plain", "turn 1 out of order"),
    "plain parent turn missing": (lambda p: jsonl(p / "p.jsonl", [
        {"session": "s", "turn": 0, "new_tokens": 64, "output_tokens": 2},
        {"session": "c", "turn": 0, "new_tokens": 64, "output_tokens": 2, "parent": "s", "after_turn": 5}]),
        "plain", "follows turn 5"),
    "mooncake blocks": (lambda p: jsonl(p / "m.jsonl", [
        {"timestamp": 0, "input_length": 2000, "output_length": 2, "hash_ids": [1]}]), "mooncake", "1 blocks"),
    "mooncake unsorted": (lambda p: jsonl(p / "m.jsonl", [
        {"timestamp": 5, "input_length": 512, "output_length": 2, "hash_ids": [1], "session_id": "s"},
        {"timestamp": 1, "input_length": 512, "output_length": 2, "hash_ids": [1], "session_id": "s"}]),
        "mooncake", "goes back in time"),
    "mooncake unknown parent": (lambda p: jsonl(p / "m.jsonl", [
        {"timestamp": 0, "input_length": 512, "output_length": 2, "hash_ids": [1], "session_id": "c",
         "parent": "ghost"}]), "mooncake", "joins an unknown parent 'ghost'"),
    "mooncake missing field": (lambda p: jsonl(p / "m.jsonl", [{"timestamp": 0, "hash_ids": []}]), "mooncake",
                               "no 'input_length'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_session_trace_is_one_line(case, tmp_path):
    make, fmt, words = MALFORMED[case]
    with pytest.raises(TraceError) as err:
        read_sessions(make(tmp_path), fmt)
    message = str(err.value)
    assert words in message and "\n" not in message


@pytest.mark.parametrize("case", ["weka blocks too few", "plain unknown parent", "mooncake unsorted"])
def test_a_malformed_session_trace_exits_2_through_the_cli(case, tmp_path, cli):
    make, fmt, words = MALFORMED[case]
    raw = merged(SESSION_BASE, {"workload": {"arrivals": {"kind": "sessions", "lanes": 1, "path": make(tmp_path),
                                                          "format": fmt}}})
    scenario = tmp_path / "s.yaml"
    scenario.write_text(json.dumps(raw))
    code, _out, err = cli("run", scenario, "--out", tmp_path / "out")
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_sessions_workload_needs_a_duration_and_one_source(tmp_path, cli):
    raw = merged(SESSION_BASE, {"horizon": {"duration_s": None, "requests": 4},
                                "workload": {"arrivals": {"kind": "sessions", "lanes": 1,
                                                          "generate": {"sessions": 2}}}})
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(raw))
    code, _, err = cli("check", path)
    assert code == 2 and "horizon.duration_s" in err
    raw = merged(SESSION_BASE, {"workload": {"arrivals": {"kind": "sessions", "lanes": 1}}})
    path.write_text(json.dumps(raw))
    code, _, err = cli("check", path)
    assert code == 2 and "give either a session trace 'path' or 'generate'" in err


def test_sessions_too_short_to_warm_up_are_refused(tmp_path):
    path = jsonl(tmp_path / "one.jsonl", [{"session": "s", "turn": 0, "new_tokens": 64, "output_tokens": 2}])
    with pytest.raises(TraceError, match="no session has the 2 main turns"):
        simulate(sessions_scenario(tmp_path, {"path": path, "format": "plain"}))


def test_generated_sessions_follow_their_shape_and_the_seed():
    from specplan.traces.agentic import generate_sessions
    from specplan.traces.spec import AgentxShape

    shape = AgentxShape(sessions=200, subagent_session_share=0.5)
    traces = generate_sessions(shape, np.random.default_rng(1))
    again = generate_sessions(shape, np.random.default_rng(1))
    assert [t.root.turns()[-1].prompt_tokens for t in traces] == [t.root.turns()[-1].prompt_tokens for t in again]
    turns = np.array([len(t.root.turns()) for t in traces])
    assert 85 <= np.median(turns) <= 140           # median 112 (log-space sigma 1.0 over 200 sessions)
    with_sub = np.mean([any(isinstance(i, FanOut) for i in t.root.items) for t in traces])
    assert 0.35 <= with_sub <= 0.65
    kept = shape.shared_prefix_tokens // shape.block_tokens
    for trace in traces[:20]:
        turns = trace.root.turns()
        for before, after in itertools.pairwise(turns):
            assert after.prompt_tokens <= shape.compact_at_tokens
            if after.prompt_tokens < before.prompt_tokens:   # compacted: only the shared prefix's blocks stay
                assert after.blocks[:kept].tolist() == before.blocks[:kept].tolist()
                assert not set(after.blocks[kept:].tolist()) & set(before.blocks.tolist())
                continue
            assert after.prompt_tokens > before.prompt_tokens + before.output_tokens - 1
            assert after.blocks[: before.blocks.size].tolist() == before.blocks.tolist()


def test_a_prompt_past_the_compaction_threshold_restarts_from_the_compacted_size():
    from specplan.traces.agentic import compacted_prompts
    from specplan.traces.spec import AgentxShape

    shape = AgentxShape(compact_at_tokens=1000, compacted_tokens=400)
    prompts, segments = compacted_prompts(900, np.array([0.0, 100, 50, 600, 600]), shape)
    # grown 900, 1000, 1050, 1650, 2250: 1050 is 50 past the cap (401 + 49), 1650 is 650 past it (one period of
    # 600 and 50: segment 2), 2250 is 1250 past it (two periods and 50: segment 3)
    assert prompts.tolist() == [900, 1000, 450, 450, 450] and segments.tolist() == [0, 0, 1, 2, 3]
    unbounded = compacted_prompts(900, np.array([0.0, 5000]), AgentxShape(compact_at_tokens=None))[0]
    assert unbounded.tolist() == [900, 5900]


def test_session_statistics_of_a_hand_made_trace(tmp_path):
    """One session of two turns: 128 tokens added to the first prompt and answer, a 5 s gap, 10 of the second
    prompt's 13 blocks shared with the first's."""
    from specplan.traces.session_stats import lognormal_fit, session_stats

    stats = session_stats(read_sessions(jsonl(tmp_path / "s.jsonl", TWO_TURNS), "plain", 64))
    assert stats["main_turns"]["p50"] == 2 and stats["first_prompt_tokens"]["p50"] == 640
    assert stats["new_tokens_per_turn"]["p50"] == 128 and stats["gap_s"]["p50"] == 5.0
    assert stats["block_reuse"]["p50"] == pytest.approx(10 / 13)
    assert stats["subagent_session_share"] == 0
    fit = lognormal_fit({"n": 3, "p50": 10.0, "p90": 10.0 * np.exp(1.2816), "p99": 50.0})
    assert fit == {"median": 10.0, "sigma": pytest.approx(1.0), "max": 50.0}


def test_the_shipped_fixture_is_generated_weka_with_subagents():
    from tests.conftest import REPO

    traces = read_sessions(str(REPO / "tests" / "data" / "agentx-generated"), "weka")
    assert len(traces) == 6 and all(t.block_tokens == 64 for t in traces)
    assert sum(any(isinstance(i, FanOut) for i in t.root.items) for t in traces) >= 2


def test_the_shared_mooncake_trace_reads_as_sessions_chained_by_prefix():
    """The shared Mooncake-format trace (3,993 requests, 512-token blocks, no session ids): every block list
    fits its length, and requests whose blocks extend an earlier prompt's continue that session."""
    from tests.conftest import SHARED

    path = SHARED / "traces" / "mooncake" / "synthetic_trace.jsonl"
    if not path.exists():
        pytest.skip("../shared/traces/mooncake is not here (a development checkout's shared data)")
    traces = read_sessions(str(path), "mooncake")
    turns = [len(t.root.turns()) for t in traces]
    assert sum(turns) == 3993 and max(turns) > 1
    for trace in traces:
        for before, after in itertools.pairwise(trace.root.turns()):
            assert after.blocks[: before.blocks.size].tolist() == before.blocks.tolist()


def test_a_sessions_run_is_deterministic_and_its_seed_matters(tmp_path):
    shape = {"sessions": 8, "turns_median": 6, "first_prompt_median": 2000, "shared_prefix_tokens": 500,
             "subagent_session_share": 0.5, "subagents_mean": 2}
    arrivals = {"generate": shape, "lanes": 3, "start_max": 1.0, "idle_gap_cap_s": 2, "recycle": True}
    runs = [simulate(sessions_scenario(tmp_path, arrivals, horizon={"duration_s": 30})) for _ in range(2)]
    assert runs[0].requests.equals(runs[1].requests)
    other = simulate(sessions_scenario(tmp_path, arrivals, horizon={"duration_s": 30}, seed=8))
    assert not other.requests["prompt_tokens"].equals(runs[0].requests["prompt_tokens"])
