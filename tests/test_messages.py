"""Refusals that name the right thing (issue 32, item 8).

A newcomer's three misreadings: a reversed `tune --lengths` range answered
"got []"; a load of 1e12 users blamed the horizon; `plan --users 1e12`
answered "invalid int value". Each now names what is wrong, in one line.
"""

from __future__ import annotations

from tests.conftest import REPO

DEFAULT = REPO / "scenarios" / "default.yaml"


def test_a_reversed_length_range_says_it_is_reversed(cli, tmp_path):
    status, _, err = cli("tune", DEFAULT, "--lengths", "5:1", "--out", tmp_path / "tune")
    assert status == 2 and "--lengths 5:1: the range is reversed" in err and "write 1:5" in err
    assert "got []" not in err


def test_a_load_too_large_to_run_names_the_load_first(cli):
    status, _, err = cli("check", DEFAULT, "--set", "workload.arrivals.users=1e12")
    assert status == 2 and err.count("\n") == 1
    assert ": workload.arrivals.users: this run is about" in err and "lower the load or shorten the horizon" in err


def test_a_horizon_too_long_to_run_still_names_the_horizon(cli):
    status, _, err = cli("check", DEFAULT, "--set", "horizon.duration_s=1e12")
    assert status == 2 and ": horizon.duration_s: this run is about" in err


def test_plan_reads_users_written_as_1e12_and_names_the_flag_it_came_from(cli):
    status, _, err = cli("plan", DEFAULT, "--users", "1e12", "--sla-tps", "10")
    assert status == 2 and err.count("\n") == 1
    assert "invalid int value" not in err and ": --users: this run is about" in err


def test_a_count_flag_refuses_a_fraction_in_one_line(cli):
    status, _, err = cli("plan", DEFAULT, "--users", "2.5", "--sla-tps", "10")
    assert status == 2 and "argument --users: expected a whole number, got '2.5'" in err


# ---- issue 39: three more misreadings -------------------------------------------------------------


def test_an_indexed_set_says_indexing_is_unsupported_and_what_to_do(cli):
    """`--set 'sweep.variants[0].policy.name=static'` answered "did you mean 'variants'"."""
    status, _, err = cli("check", DEFAULT, "--set", "sweep.variants[0].policy.name=static")
    assert status == 2 and err.count("\n") == 1, err
    assert "sweep.variants[0]" in err and "cannot index" in err and "did you mean" not in err, err
    assert "--set 'sweep.variants=[" in err and "--merge" in err, err


def test_run_refuses_json_with_quiet(cli, tmp_path):
    """`run --json --quiet` was accepted silently (and printed the JSON)."""
    status, out, err = cli("run", DEFAULT, "--out", tmp_path / "o", "--json", "--quiet")
    assert status == 2 and out == "" and "not allowed with argument" in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_a_jsonl_trace_read_as_azure_points_at_mooncake(cli, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n')
    status, _, err = cli("trace-stats", trace, "--format", "azure")
    assert status == 2 and err.count("\n") == 1, err
    assert "JSON lines" in err and "--format mooncake" in err, err
