"""What `specplan check` and `run` say beyond "ok" (issue 45, items 5, 6, 7 and 15).

A user's `check` answered "ok" for a session trace with a broken JSON line
that `run` refused; took `engine.version: 9.9.9` with no word of the row it
used, called "banana" older than every row and refused a version under
`name: auto`; and took `engine.name: vllm` over an SGLang-measured built-in
in silence. Each now reads, refuses or says so in one line.
"""

from __future__ import annotations

import json

import yaml

from specplan.engines import engine_traits
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import serving_engine
from specplan.simulator.scenario.load import scenario_from_mapping
from specplan.simulator.study.caveats import steady_state_lines
from specplan.simulator.study.points import read_source, validated
from tests.conftest import BASE, REPO, merged

SESSION_BASE = merged(BASE, {
    "horizon": {"duration_s": 60, "warmup_s": 0},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.0}},
    "engine": {"max_batch_requests": 16, "max_step_tokens": 8192,
               "prefill": {"mode": "chunked", "chunk_tokens": 4096},
               "prefix_cache": {"block_tokens": 64, "capacity_tokens": 100_000}},
    "drafter": {"family": "none", "block_size": 0}, "policy": {"name": "none"},
})
TURNS = [{"session": "s", "turn": 0, "new_tokens": 640, "output_tokens": 64},
         {"session": "s", "turn": 1, "new_tokens": 128, "output_tokens": 32, "gap_s": 5.0}]
FLASH = "builtin:b200-deepseek-v4-flash-tp8ep8-sglang"


def scenario_file(tmp_path, mapping, name="scenario.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(mapping))
    return path


def sessions_file(tmp_path, broken: bool):
    lines = [json.dumps(row) for row in TURNS]
    if broken:
        lines[1] = lines[1][:-1]  # the closing brace lost
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def sessions_scenario(tmp_path, broken: bool):
    arrivals = {"kind": "sessions", "lanes": 1, "path": str(sessions_file(tmp_path, broken)), "format": "plain"}
    return scenario_file(tmp_path, merged(SESSION_BASE, {"workload": {"arrivals": arrivals}}))


# ---- item 5: check reads the traces run reads ---------------------------------------------------------------------


def test_check_refuses_a_broken_session_trace_line_as_run_does(cli, tmp_path):
    scenario = sessions_scenario(tmp_path, broken=True)
    checked = cli("check", scenario)
    ran = cli("run", scenario, "--out", tmp_path / "out", "--quiet")
    assert checked[0] == ran[0] == 2
    assert checked[2] == ran[2] and checked[2].count("\n") == 1 and "Traceback" not in checked[2]
    assert "sessions.jsonl:2: not JSON" in checked[2]


def test_check_says_which_trace_it_read(cli, tmp_path):
    status, out, _ = cli("check", sessions_scenario(tmp_path, broken=False))
    assert status == 0 and "session trace " in out and "sessions.jsonl: 1 sessions read" in out


def test_check_refuses_a_broken_request_trace_line_as_run_does(cli, tmp_path):
    trace = tmp_path / "requests.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 100, "output_length": 20}\n'
                     '{"timestamp": 10, "input_length": 100, "output_length": 20\n')
    scenario = scenario_file(tmp_path, merged(BASE, {"workload": {"arrivals": {
        "kind": "trace", "path": str(trace), "format": "mooncake"}}}))
    checked = cli("check", scenario)
    ran = cli("run", scenario, "--out", tmp_path / "out", "--quiet")
    assert checked[0] == ran[0] == 2 and checked[2] == ran[2] and "requests.jsonl:2: malformed" in checked[2]


def test_check_reads_the_trace_a_sweep_variant_names(cli, tmp_path):
    good = sessions_scenario(tmp_path, broken=False)
    raw = yaml.safe_load(good.read_text())
    bad = tmp_path / "other" / "bad.jsonl"
    bad.parent.mkdir()
    bad.write_text("{not json\n")
    raw["sweep"] = {"variants": [{"label": "own"}, {"label": "other", "workload": {"arrivals": {"path": str(bad)}}}]}
    status, _, err = cli("check", scenario_file(tmp_path, raw, "swept.yaml"))
    assert status == 2 and "bad.jsonl:1: not JSON" in err


# ---- item 6: engine versions ---------------------------------------------------------------------------------------

FLASH_SCENARIO = merged(BASE, {
    "horizon": {"duration_s": 10, "warmup_s": 1},
    "hardware": {"profile": FLASH, "gpus_per_replica": 8},
    "engine": {"max_batch_requests": 32},
    "drafter": {"family": "none", "block_size": 0}, "policy": {"name": "none"},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 2}, "prompt_tokens": {"kind": "fixed", "value": 1000},
                 "output_tokens": {"kind": "fixed", "value": 100}},
})


def flash(tmp_path, **engine):
    return scenario_file(tmp_path, merged(FLASH_SCENARIO, {"engine": engine}))


def test_a_version_newer_than_every_row_names_the_row_it_takes_in_check_and_run(cli, tmp_path):
    newest = engine_traits("sglang").label
    path = flash(tmp_path, version="9.9.9")
    for said in (cli("check", path), cli("run", path, "--out", tmp_path / "out", "--quiet")):
        status, _, err = said
        assert status == 0
        assert err.count("\n") == 1 and "engine.version 9.9.9: sglang 9.9.9 is newer than every row" in err
        assert f"the newest, {newest}, is used" in err


def test_a_version_between_rows_names_the_row_it_takes(cli, tmp_path):
    status, _, err = cli("check", flash(tmp_path, version="0.5.13"))
    assert status == 0 and "SGLang 0.5.12.post1's is used" in err


def test_a_version_with_its_own_row_says_nothing(cli, tmp_path):
    status, _, err = cli("check", flash(tmp_path, version="0.5.14"))
    assert status == 0 and err == ""


def test_an_unparseable_version_is_not_a_version(cli, tmp_path):
    for engine in ({"version": "banana"}, {"name": "sglang", "version": "banana"}):
        status, _, err = cli("check", flash(tmp_path, **engine))
        assert status == 2 and err.count("\n") == 1 and "Traceback" not in err
        assert "engine.version: sglang version 'banana' is not a version" in err and "older" not in err


def test_auto_resolves_from_the_profile_before_the_version(tmp_path):
    scenario = scenario_from_mapping(merged(FLASH_SCENARIO, {"engine": {"version": "0.5.12.post1"}}), tmp_path)
    profile = load_profile(scenario.hardware.profile)
    assert serving_engine(scenario.engine.name, scenario.engine.version, profile).label == "SGLang 0.5.12.post1"
    assert serving_engine("auto", None, profile).label == "SGLang 0.5.14"  # the profile's own backend line


def test_a_version_under_auto_on_a_profile_of_no_engine_is_refused(cli, tmp_path):
    status, _, err = cli("check", scenario_file(tmp_path, merged(BASE, {"engine": {"version": "0.5.14"}})))
    assert status == 2 and "engine.version: a version needs an engine: profile" in err and "set engine.name" in err


# ---- item 7: an engine over another engine's kernels ---------------------------------------------------------------


def test_another_engine_over_a_measured_built_in_is_said_in_one_line(cli, tmp_path):
    path = flash(tmp_path, name="vllm")
    for said in (cli("check", path), cli("run", path, "--out", tmp_path / "out", "--quiet")):
        status, _, err = said
        assert status == 0 and err.count("\n") == 1
        assert "engine.name vllm: profile b200-deepseek-v4-flash-tp8ep8-sglang was measured under SGLang" in err
        assert "its kernel times are SGLang 0.5.14's" in err and f"are {engine_traits('vllm').label}'s" in err


def test_an_engine_note_reaches_the_summary_and_a_sweep_says_it_once(cli, tmp_path):
    """One channel (Scenario.notes): what the engine resolved to is kept in summary.json and said by sweep and plan,
    once however many points carry it."""
    path = flash(tmp_path, name="vllm")
    status, _, err = cli("run", path, "--out", tmp_path / "out", "--quiet")
    notes = json.loads((tmp_path / "out" / "summary.json").read_text())["notes"]
    assert status == 0 and [n for n in notes if n.startswith("engine.name vllm: profile")] == [err.strip()[16:]]
    status, _, err = cli("sweep", path, "--out", tmp_path / "sweep", "--no-report", "--workers", "1", "--json",
                         "--set", "horizon.duration_s=2", "--set", "sweep.load={rate_per_s: [1, 2]}")
    assert status == 0 and err.count("engine.name vllm: profile b200-deepseek-v4-flash-tp8ep8-sglang") == 1


def test_the_engine_a_built_in_was_measured_under_says_nothing(cli, tmp_path):
    status, _, err = cli("check", flash(tmp_path, name="sglang"))
    assert status == 0 and err == ""


# ---- item 15: agent sessions and steady state ----------------------------------------------------------------------


def test_the_agentic_window_is_said_not_to_be_steady_state():
    """AgentX-shaped sessions: a mean of 185 main-agent turns (lognormal median 112, sigma 1.0, at most 2,000: the
    generator's defaults matched to the corpus, issue 45 item 16) at the 10 s idle-gap cap is 1,847 s of tool gaps
    alone, beyond the 600 s window."""
    raw, folder, name = read_source(REPO / "scenarios" / "agentic.yaml")
    (line,) = steady_state_lines(validated(raw, folder, name, ""))
    assert line.startswith("steady state: not reached: a mean session runs 185 turns, 1,847 s of tool gaps alone, "
                           "against the 600 s window")
    assert "--set horizon.duration_s=" in line


def test_short_sessions_in_a_long_window_are_said_to_be_of_every_age(tmp_path):
    """Two turns with gaps of 0 and 5 s: 5 s of tool gaps against a 60 s window."""
    scenario = scenario_from_mapping(yaml.safe_load(sessions_scenario(tmp_path, broken=False).read_text()), tmp_path)
    (line,) = steady_state_lines(scenario)
    assert line == ("steady state: a mean session runs 2 turns, 5 s of tool gaps alone, under a fifth of the 60 s "
                    "window: lanes hold sessions of every age")


def test_no_steady_state_line_without_sessions(tmp_path):
    assert steady_state_lines(scenario_from_mapping(FLASH_SCENARIO, tmp_path)) == []


def test_run_and_plan_of_sessions_print_the_steady_state_line(cli, tmp_path):
    path = sessions_scenario(tmp_path, broken=False)
    status, out, _ = cli("run", path, "--out", tmp_path / "out")
    assert status == 0 and "  steady state: a mean session runs 2 turns" in out
    status, out, _ = cli("plan", path, "--lanes", "1", "--sla", "ttft_p90_s<=5", "--seeds", "1", "--quiet",
                         "--set", "horizon.duration_s=300")  # 60 s completes too few turns to judge keep-up
    assert status == 0 and "\nsteady state: a mean session runs 2 turns, 5 s of tool gaps alone, under a fifth of " \
                           "the 300 s window" in out
