"""A DP built-in's attention ranks come from its header: a scenario silent on engine.dp_attention runs them.

Stories (issue 45): a DP8 built-in without engine.dp_attention was simulated
as one attention rank, silently; it now runs the eight ranks its
`parallelism:` line states, the same run as a scenario that states them, and
`specplan check` says where they came from; a scenario stating another count
is refused in one line; a TP built-in keeps no DP attention.
"""

from __future__ import annotations

from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import load_scenario

DP8 = "builtin:b200-deepseek-v4-flash-dp8ep8-sglang"
SCENARIO = "benchmarks/published/sglang-cookbook-v4-flash-b200-fp4-balanced/scenario.yaml"
ON_DP8 = [f"hardware.profile={DP8}", "hardware.gpus_per_replica=8", "engine.dp_attention=null",
          "engine.prefill.profile=null", f"drafter.latency.path={DP8}-mtp"]
SMALL = ["horizon.duration_s=3", "horizon.warmup_s=1", "workload.arrivals.num_prompts=16",
         "workload.arrivals.max_concurrency=8", "workload.arrivals.warmup_requests=0"]


def test_a_dp8_built_in_without_dp_attention_runs_its_eight_ranks_with_a_note():
    scenario = load_scenario(SCENARIO, ON_DP8)
    assert scenario.engine.dp_attention is not None and scenario.engine.dp_attention.ranks == 8
    assert len(scenario.notes) == 1 and "8 ranks" in scenario.notes[0] and "TP1 EP8 DP8" in scenario.notes[0]


def test_the_silent_scenario_is_the_same_run_as_the_one_that_states_the_ranks():
    silent = simulate(load_scenario(SCENARIO, [*ON_DP8, *SMALL])).summary
    stated = simulate(load_scenario(SCENARIO, [*ON_DP8, *SMALL, "engine.dp_attention={ranks: 8}"])).summary
    timing = {"wall_s", "notes"}  # the silent run's notes say where its ranks came from
    assert {k: v for k, v in silent.items() if k not in timing} == {k: v for k, v in stated.items() if k not in timing}
    assert len(silent["notes"]) == 1 and "8 ranks" in silent["notes"][0] and stated["notes"] == []
    assert silent["dp_busiest_over_mean_tokens"] > 1.0   # ranks to balance: a one-rank run has none


def test_check_says_where_the_ranks_came_from(cli):
    status, out, err = cli("check", SCENARIO, *[a for kv in ON_DP8 for a in ("--set", kv)])
    assert status == 0 and "ok" in out
    notes = [line for line in err.splitlines() if line.startswith("specplan: note: engine.dp_attention")]
    assert len(notes) == 1 and "parallelism: TP1 EP8 DP8" in notes[0]


def test_a_count_that_contradicts_the_profile_is_refused_in_one_line(cli):
    status, out, err = cli("check", SCENARIO, *[a for kv in (*ON_DP8, "engine.dp_attention={ranks: 4}")
                                                for a in ("--set", kv)])
    assert status == 2 and not out and len(err.strip().splitlines()) == 1
    assert "engine.dp_attention.ranks" in err and "8 attention ranks" in err and "DP4" in err


def test_a_stated_count_that_agrees_is_kept_without_a_note_and_a_tp_built_in_gets_none():
    stated = load_scenario(SCENARIO)
    assert stated.engine.dp_attention is not None and stated.engine.dp_attention.ranks == 4 and not stated.notes
    tp = load_scenario("benchmarks/published/sglang-cookbook-v4-flash-b200-fp4-low-latency/scenario.yaml")
    assert tp.engine.dp_attention is None and not tp.notes
