"""The general SLA form (KEY<=VALUE / KEY>=VALUE on summary.json keys) and inter-token latency from step gaps."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import yaml

from specplan.cli.commands.plan import target_of
from specplan.cli.main import parser
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.records.step_log import ChunkLog
from specplan.simulator.engine.records.summary import Window, itl_fields
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.study import Bound, parse_bound
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.plan_json import capacity_json
from specplan.simulator.study.plan.run import plan_capacity
from specplan.simulator.study.plan.target import Target
from tests.conftest import BASE, REPO
from tests.test_planner import KNOWN, RATE


def test_bounds_parse_with_their_direction():
    assert parse_bound("ttft_p99_s<=2") == Bound("ttft_p99_s", "<=", 2.0)
    assert parse_bound(" tps_user_p10 >= 30 ") == Bound("tps_user_p10", ">=", 30.0)
    assert parse_bound("itl_p99_ms<=80").holds(79.9) and not parse_bound("itl_p99_ms<=80").holds(80.1)
    assert not parse_bound("tps_user_p10>=30").holds(None) and not parse_bound("tps_user_p10>=30").holds(float("nan"))


@pytest.mark.parametrize(("text", "message"), [
    ("ttft_p99_s=2", "is not KEY<=VALUE or KEY>=VALUE"),
    ("ttft_p95_s<=2", "unknown SLA key 'ttft_p95_s'; one of ttft_p50_s"),
    ("ttft_p99_s>=2", "ttft_p99_s takes an upper bound"),
    ("tps_user_p10<=30", "tps_user_p10 takes a lower bound"),
    ("itl_p99_ms<=-1", "must be a positive number"),
    ("itl_p99_ms<=0", "must be a positive number"),
])
def test_bad_bounds_are_one_line(text, message):
    with pytest.raises(SpecplanError, match=message) as err:
        parse_bound(text)
    assert "\n" not in str(err.value)


def test_the_scenario_sla_block_takes_bounds():
    raw = copy.deepcopy(BASE)
    raw["sla"] = {"bounds": ["ttft_p99_s<=2", "tps_user_p10>=30"]}
    assert scenario_from_mapping(raw, REPO).sla.parsed_bounds == (Bound("ttft_p99_s", "<=", 2.0),
                                                                   Bound("tps_user_p10", ">=", 30.0))
    raw["sla"] = {"bounds": ["ttft_p99_s<=2", "itl_p99_ms>=3"]}
    with pytest.raises(ScenarioError, match=r"sla.bounds\[1\]: itl_p99_ms takes an upper bound"):
        scenario_from_mapping(raw, REPO)


def test_every_bound_is_required_together_and_the_flags_spell_bounds(cli, tmp_path):
    args = parser().parse_args(["plan", "s.yaml", "--rate", "17", "--sla", "itl_p99_ms<=80", "--sla-tps", "50",
                                "--statistic", "p50", "--ttft-s", "2"])
    target = target_of(args)
    assert [b.text() for b in target.bounds] == ["itl_p99_ms<=80", "tps_user_p50>=50", "ttft_p99_s<=2"]
    twice = Target("rate_per_s", RATE, (parse_bound("tps_user_p50>=3"), parse_bound("tps_user_p50>=50")))
    with pytest.raises(SpecplanError, match="the SLA bounds tps_user_p50 twice"):
        twice.check({})
    with pytest.raises(SpecplanError, match="give an SLA"):
        Target("rate_per_s", RATE).check({})
    raw = copy.deepcopy(KNOWN)
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, _, err = cli("plan", path, "--rate", RATE, "--sla", "tps_user_p50>=3", "--sla-tps", 50,
                         "--statistic", "p50")
    assert status == 2 and "the SLA bounds tps_user_p50 twice" in err


@pytest.mark.slow("a whole capacity plan: many cluster simulations")
def test_an_itl_bound_adds_replicas_a_tps_bound_alone_does_not_need():
    raw = copy.deepcopy(KNOWN)
    raw["sweep"]["variants"] = raw["sweep"]["variants"][1:]
    one = RunOptions(workers=1)
    loose = plan_capacity(raw, Target("rate_per_s", RATE, (parse_bound("tps_user_p50>=1"),), seeds=1), one)
    tight = plan_capacity(raw, Target("rate_per_s", RATE, (parse_bound("tps_user_p50>=1"),
                                                          parse_bound("itl_p90_ms<=15")), seeds=1), one)
    assert loose.variants[0].replicas == 2  # one replica falls behind; two keep up at ITL p90 ≈ 20 ms
    chosen = tight.variants[0].chosen
    assert tight.variants[0].replicas > 2 and chosen.stats["itl_p90_ms"][0] <= 15
    assert tight.variants[0].one_fewer.stats["itl_p90_ms"][0] > 15
    assert capacity_json(tight)["variants"][0]["sla"]["itl_p90_ms"]["met"] is True


def test_the_cli_takes_repeated_sla_flags(cli, tmp_path):
    raw = copy.deepcopy(KNOWN)
    raw["sweep"]["variants"] = raw["sweep"]["variants"][1:]
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump(raw))
    status, out, _ = cli("plan", path, "--rate", RATE, "--sla", "tps_user_p50>=1", "--sla", "ttft_p99_s<=5",
                         "--seeds", "1", "--quiet")
    assert status == 0 and "SLA tps_user_p50>=1, ttft_p99_s<=5" in out
    status, _, err = cli("plan", path, "--rate", RATE, "--sla", "ttft_p99_s>=5")
    assert status == 2 and "ttft_p99_s takes an upper bound" in err and len(err.strip().splitlines()) == 1


def test_itl_is_the_pooled_step_gaps_of_measured_requests():
    # request 0 (measured): first token at 1.0, steps at 1.1 (2 tokens) and 1.3 (1 token): gaps 100 and 200 ms
    # request 1 arrived before the warm-up and request 2 was rejected: neither counts
    requests = pd.DataFrame({"request_id": [0, 1, 2], "arrival_s": [0.5, 0.1, 0.6],
                             "first_token_s": [1.0, 0.2, np.nan], "status": ["completed", "completed", "rejected"]})
    chunks = ChunkLog()
    chunks.add(0.3, np.array([1]), np.array([1]))
    chunks.add(1.1, np.array([0]), np.array([2]))
    chunks.add(1.3, np.array([0, 1]), np.array([1, 4]))
    fields = itl_fields(requests, Window(0.4, 2.0), chunks)
    assert fields["itl_mean_ms"] == pytest.approx(150.0)
    assert fields["itl_p50_ms"] == pytest.approx(150.0) and fields["itl_p99_ms"] == pytest.approx(199.0)
    assert np.isnan(itl_fields(requests, Window(0.4, 2.0), None)["itl_p50_ms"])


def test_a_request_s_gaps_add_up_to_its_decode_time():
    result = simulate(scenario_from_mapping(BASE, REPO), itl=True)
    done = result.requests[(result.requests["status"] == "completed")
                           & (result.requests["arrival_s"] >= BASE["horizon"]["warmup_s"])]
    times, rids, _ = result.chunks.emissions()
    # the step that emitted a request's first token opens its stream: the gaps start after it
    gaps_per_request = {rid: np.diff(np.concatenate([[first], np.sort(times[(rids == rid) & (times > first)])]))
                        for rid, first in zip(done["request_id"], done["first_token_s"], strict=True)}
    total_ms = sum(g.sum() for g in gaps_per_request.values()) * 1e3
    assert total_ms == pytest.approx(((done["finish_s"] - done["first_token_s"]).sum()) * 1e3)
    assert result.summary["itl_mean_ms"] == pytest.approx(total_ms / sum(g.size for g in gaps_per_request.values()))
    assert result.summary["ttft_p50_s"] <= result.summary["ttft_p90_s"] <= result.summary["ttft_p99_s"]


def test_without_the_emission_log_itl_is_nan_and_nothing_else_changes():
    scenario = scenario_from_mapping(BASE, REPO)
    with_log, without = simulate(scenario, itl=True).summary, simulate(scenario).summary
    assert all(np.isnan(without[k]) for k in ("itl_mean_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms"))
    same = sorted(k for k in with_log if not k.startswith("itl_") and k != "wall_s")
    assert pd.Series([with_log[k] for k in same], dtype=object).equals(pd.Series([without[k] for k in same],
                                                                                 dtype=object))


def test_a_target_takes_bounds_as_text_and_refuses_what_is_neither(cli):
    """Issue 39, item 9: `Target("users", 64, ("tps_user_p10>=80",))` failed with an AttributeError."""
    assert Target("users", 64, ("tps_user_p10>=80",)).bounds == (Bound("tps_user_p10", ">=", 80.0),)
    assert Target("users", 64, "ttft_p99_s<=2").bounds == (Bound("ttft_p99_s", "<=", 2.0),)
    with pytest.raises(SpecplanError, match="Target bounds: 'tps_user_p10=80' is not KEY<=VALUE") as err:
        Target("users", 64, ("tps_user_p10=80",))
    assert "\n" not in str(err.value)
    with pytest.raises(SpecplanError, match="a Bound or a 'KEY<=VALUE' string, got 80"):
        Target("users", 64, (80,))


def test_tpot_keys_are_in_the_summary_and_bound_an_sla():
    """Issue 39: SLAs had no TPOT key (p90 TPOT <= 25 ms had to be written tps_user_p10>=40)."""
    assert parse_bound("tpot_p90_ms<=25") == Bound("tpot_p90_ms", "<=", 25.0)
    with pytest.raises(SpecplanError, match="tpot_p99_ms takes an upper bound"):
        parse_bound("tpot_p99_ms>=25")
    result = simulate(scenario_from_mapping(BASE, REPO))
    requests, summary = result.requests, result.summary
    measured = requests[(requests["arrival_s"] >= BASE["horizon"]["warmup_s"]) & (requests["status"] == "completed")]
    tpot_ms = 1000.0 * (measured["finish_s"] - measured["first_token_s"]) / (measured["output_tokens"] - 1)
    for q in (50, 90, 99):
        assert summary[f"tpot_p{q}_ms"] == pytest.approx(np.percentile(tpot_ms, q))
    assert summary["tpot_mean_ms"] == pytest.approx(tpot_ms.mean())
    # TPOT is 1 / tokens/s/user per request: its p90 is the slowest 10%'s, close to 1000 / tps_user_p10
    assert summary["tpot_p90_ms"] == pytest.approx(1000.0 / summary["tps_user_p10"], rel=0.02)
