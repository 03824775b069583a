"""A plan says what its SLA asks, in the SLA's own statistics (issue 45, items 10, 12 and 14).

probes.csv and plan.md show each statistic the SLA names (TPOT p50 and
TTFT p90, not a fixed tokens/s/user p10 and TTFT p99); `plan --help`
lists every key a bound may name, from the list the parser reads; a
mean and its interval are printed at one precision ("272 ± 360", not
"272 ± 3.6e+02"); a plan with no price prints no cost columns (no
"savings +0%"); `check` counts in the singular where it is one and says
what a search: block holds, each of its points validated.
"""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from specplan.cli.main import main
from specplan.simulator.scenario.study import LOWER_BOUNDED, UPPER_BOUNDED, Bound
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.plan.files import write_plan_files
from specplan.simulator.study.plan.planner import CapacityPlan
from specplan.simulator.study.plan.probe import Probe
from specplan.simulator.study.plan.replica_search import ReplicaSizing
from specplan.simulator.study.plan.tables import plan_table, stat_text
from specplan.simulator.study.plan.target import Target
from tests.test_sweep import BASE, write_yaml

TPOT, TTFT = Bound("tpot_p50_ms", "<=", 25.0), Bound("ttft_p90_s", "<=", 3.0)


def probe(replicas: int, tpot: tuple[float, float], ttft: tuple[float, float]) -> Probe:
    """A probe of two seeds whose SLA statistics are `tpot` and `ttft` (mean, 95% half-width)."""
    runs = tuple({"gpus": 8 * replicas, "seed": seed, "tpot_p50_ms": tpot[0] + d, "ttft_p90_s": ttft[0] + d,
                  "tps_user_p10": 40.0, "ttft_p99_s": 9.9, "key": f"k{replicas}{seed}"}
                 for seed, d in ((1, -0.1), (2, 0.1)))
    return Probe(replicas=replicas, meets_sla=TPOT.holds(tpot[0]) and TTFT.holds(ttft[0]), tps_user=40.0,
                 tps_user_ci95=1.0, throughput_per_gpu=1000.0, ttft_p99_s=9.9, backlog_growth=0.0,
                 gpus=8 * replicas, runs=runs, stats={TPOT.key: tpot, TTFT.key: ttft}, simulated=replicas)


def sla_plan(price: float | None = None) -> CapacityPlan:
    probes = [probe(2, (24.0, 0.5), (3.6, 0.3)), probe(3, (18.4, 0.6), (1.79, 0.21))]
    target = Target("rate_per_s", 20.0, (TPOT, TTFT), seeds=2, gpu_hour_usd=price)
    return CapacityPlan(target, [ReplicaSizing("MTP-3", 3, 24, probes)], RunOptions())


def test_probes_csv_and_plan_md_show_the_statistics_the_sla_names(tmp_path):
    files = write_plan_files(sla_plan(), tmp_path)
    probes = pd.read_csv(files["probes.csv"])
    assert list(probes.columns[-2:]) == ["tpot_p50_ms", "ttft_p90_s"]
    assert list(probes["tpot_p50_ms"]) == pytest.approx([23.9, 24.1, 18.3, 18.5])
    md = files["plan.md"].read_text()
    assert "3 replica(s): tpot_p50_ms 18.40 ± 0.60, ttft_p90_s 1.79 ± 0.21, keeps up" in md
    assert "tokens/s/user p10" not in md


def test_plan_help_lists_every_key_a_bound_may_name(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--sla KEY<=VALUE an SLA bound")
    section = text[start:text.index("--sla-tps SLA_TPS", start)]
    missing = [key for key in UPPER_BOUNDED + LOWER_BOUNDED if key not in section]
    assert missing == [] and "tpot_p50_ms" in section


@pytest.mark.parametrize(("mean", "half", "shown"), [
    (272.3, 360.4, "272 ± 360"), (4.1412, 0.612, "4.14 ± 0.61"), (63.12, 2.01, "63.1 ± 2.0"),
    (1.79, 0.21, "1.79 ± 0.21"), (0.0523, float("nan"), "0.0523"), (330.2, 21.4, "330 ± 21"),
])
def test_a_mean_and_its_interval_are_printed_at_one_precision(mean, half, shown):
    held = Probe(replicas=1, meets_sla=True, tps_user=mean, tps_user_ci95=half, throughput_per_gpu=1.0,
                 ttft_p99_s=1.0, backlog_growth=0.0, gpus=1, stats={TPOT.key: (mean, half)})
    assert stat_text(held, TPOT.key) == shown and "e+" not in shown


def test_a_plan_without_a_price_prints_no_cost_columns():
    text = plan_table(sla_plan())
    assert "savings" not in text and "$/hour" not in text and "no GPU price given (--gpu-hour-usd)" in text
    priced = plan_table(sla_plan(price=5.0))
    assert "savings" in priced and "120.00" in priced  # 24 GPUs at $5


def one_point_sweep() -> dict:
    raw = copy.deepcopy(BASE)
    raw["sweep"] = {"load": {"users": [2]}, "variants": [{"label": "MTP-1", "policy": {"name": "mtp-1"}}]}
    return raw


def test_check_counts_one_sweep_point_in_the_singular(cli, tmp_path):
    status, out, _ = cli("check", write_yaml(tmp_path / "one.yaml", one_point_sweep()))
    assert status == 0 and "1 sweep point over 1 variant)" in out


def search_space(raw: dict) -> dict:
    raw = copy.deepcopy(raw)
    raw.pop("sweep")
    linear = raw["hardware"]["profile"]
    raw["engine"]["prefill"] = {"mode": "chunked", "chunk_tokens": 512}
    raw["search"] = {"hardware": [{"label": "slow", "profile": linear},
                                  {"label": "fast", "profile": {**linear, "per_token_ms": 0.02}}],
                     "serving": [{"mode": "aggregated"}, {"mode": "aggregated", "chunk_tokens": 256, "label": "small"}],
                     "variants": [{"label": "MTP-1", "policy": {"name": "mtp-1"}}]}
    return raw


def test_check_says_what_a_search_block_holds(cli, tmp_path):
    status, out, _ = cli("check", write_yaml(tmp_path / "search.yaml", search_space(BASE)))
    assert status == 0
    assert ("search: 4 deployments (2 hardware options, 2 serving modes, 1 variant), each valid at one replica"
            in out)


def test_check_refuses_a_bad_search_point_in_one_line(cli, tmp_path):
    raw = search_space(BASE)
    raw["search"]["hardware"][1]["dp_attention"] = {"ranks": 0}
    status, _, err = cli("check", write_yaml(tmp_path / "bad.yaml", raw))
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "search point 'fast / aggregated / MTP-1'" in err and "search.hardware[1].dp_attention.ranks" in err
