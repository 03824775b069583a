"""vLLM's speculative-decoding counters: fitted into a drafter block, and written by `specplan run`.

The fixtures under tests/data are /metrics pages in the format vLLM's
prometheus_client serves: `_total` counters with `model_name` and `engine`
labels, `_created` gauges, and other vLLM families around them. Two engines
serve one model; the window between the two pages has p = 0.85, 0.70, 0.60.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from specplan.simulator.drafters.vllm_metrics import (
    counts_between,
    exposition_text,
    fit_acceptance,
    parse_scrape,
    read_scrape,
    wilson,
)
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario.merge import deep_merge
from tests.conftest import BASE, make_scenario

DATA = Path(__file__).parent / "data"
BEFORE, AFTER = DATA / "vllm_before.prom", DATA / "vllm_after.prom"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_one_scrape_sums_engines_and_pools_over_proposals():
    counts = read_scrape(BEFORE)
    assert (counts.model, counts.engines) == (MODEL, ("0", "1"))
    assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens) == (78000, 234000, 132288)
    assert counts.accepted_per_position == (62400, 43680, 26208)
    fit = fit_acceptance(counts)
    assert [p.proposals for p in fit.positions] == [78000, 62400, 43680]
    assert fit.curve == pytest.approx([0.8, 0.7, 0.6])
    assert fit.tau == pytest.approx(1 + 132288 / 78000)
    assert fit.full_blocks


def test_two_scrapes_fit_the_window_between_them():
    window = counts_between(read_scrape(BEFORE), read_scrape(AFTER))
    assert (window.drafts, window.draft_tokens, window.accepted_tokens) == (20000, 60000, 36040)
    fit = fit_acceptance(window)
    assert fit.curve == pytest.approx([0.85, 0.70, 0.60])
    assert window.source == "vllm_before.prom → vllm_after.prom"
    for p in fit.positions:
        assert p.low < p.rate < p.high


def test_wilson_interval_matches_its_formula_and_covers_the_edges():
    low, high = wilson(80, 100, 0.95)
    assert (low, high) == pytest.approx((0.7112, 0.8666), abs=1e-4)  # textbook Wilson 95% for 80/100
    assert wilson(0, 10, 0.95)[0] == pytest.approx(0.0) and wilson(10, 10, 0.95)[1] == pytest.approx(1.0)
    assert wilson(0, 0, 0.95) == (0.0, 1.0)


def test_counters_without_total_suffix_and_with_timestamps():
    text = read_scrape_text(BEFORE).replace("_total{", "{")
    stamped = re.sub(r"^(vllm:spec_decode\S+ \S+)$", r"\1 1717003600000", text, flags=re.M)
    counts = parse_scrape(stamped, "stamped.prom")
    assert counts.accepted_per_position == (62400, 43680, 26208)
    assert counts.scraped_at_s == pytest.approx(1717003600.0)


def read_scrape_text(path: Path) -> str:
    return path.read_text()


def test_cli_writes_a_drafter_block_that_a_scenario_accepts(cli, tmp_path):
    out = tmp_path / "drafter.yaml"
    status, stdout, _ = cli("acceptance", "vllm-metrics", BEFORE, AFTER, "--out", out, "--json", "--domain", "code")
    assert status == 0
    record = json.loads(stdout)
    assert record["model"] == MODEL and record["interval"].startswith("Wilson score")
    assert [p["rate"] for p in record["positions"]] == pytest.approx([0.85, 0.70, 0.60])
    block = yaml.safe_load(out.read_text())
    assert block["drafter"]["acceptance"]["per_position"]["code"] == pytest.approx([0.85, 0.7, 0.6])
    assert "vllm_before.prom → vllm_after.prom" in out.read_text()  # provenance comment
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(deep_merge(BASE, block)))
    status, stdout, _ = cli("check", scenario)
    assert status == 0, stdout


def test_cli_table_names_the_interval(cli, tmp_path):
    status, stdout, _ = cli("acceptance", "vllm-metrics", BEFORE, "--out", tmp_path / "d.yaml")
    assert status == 0
    assert "Wilson score (proposals taken as independent)" in stdout and "τ = 1 + accepted / drafts = 2.696" in stdout


def edited(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda t: "\n".join(line for line in t.splitlines() if "spec_decode" not in line) + "\n",
     "no vLLM speculative-decoding counters"),
    (lambda t: t.replace('position="1"', 'position="4"'), "has a gap: position 1 missing"),
    (lambda t: t.replace(f'engine="0",model_name="{MODEL}"}} 67840.0', f'engine="0",model_name="{MODEL}"}} 67841.0'),
     "inconsistent totals: Σ vllm:spec_decode_num_accepted_tokens_per_pos = 132288 but"),
    (lambda t: t + t.replace(MODEL, "other-model"), "counters of 2 models"),
    (lambda t: t.replace("} 40000.0", "} 40000.5"), "whole numbers"),
    (lambda t: "vllm:spec_decode_num_drafts_total{engine=\"0\" 3\n", "not Prometheus text exposition"),
    (lambda t: t + t, "appears twice (two scrapes appended into one file"),  # issue 39: `curl >>` summed as one
])
def test_bad_metrics_files_get_one_line(cli, tmp_path, edit, message):
    bad = edited(tmp_path, "bad.prom", edit(BEFORE.read_text()))
    status, stdout, stderr = cli("acceptance", "vllm-metrics", bad, "--out", tmp_path / "d.yaml")
    assert status == 2 and stdout == ""
    assert message in stderr and len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr


def test_counters_that_decrease_between_scrapes_are_refused(cli, tmp_path):
    status, _, stderr = cli("acceptance", "vllm-metrics", AFTER, BEFORE, "--out", tmp_path / "d.yaml")
    assert status == 2 and "decreases between the scrapes" in stderr
    restarted = edited(tmp_path, "restarted.prom", AFTER.read_text().replace("1717000000.456", "1717009999.0"))
    status, _, stderr = cli("acceptance", "vllm-metrics", BEFORE, restarted, "--out", tmp_path / "d.yaml")
    assert status == 2 and "restarted" in stderr


def test_model_flag_picks_one_of_several_models(cli, tmp_path):
    mixed = edited(tmp_path, "mixed.prom", BEFORE.read_text() + AFTER.read_text().replace(MODEL, "other-model"))
    status, stdout, _ = cli("acceptance", "vllm-metrics", mixed, "--model", "other-model", "--json",
                            "--out", tmp_path / "d.yaml")
    assert status == 0 and json.loads(stdout)["drafts"] == 98000
    status, _, stderr = cli("acceptance", "vllm-metrics", mixed, "--model", "nope", "--out", tmp_path / "d.yaml")
    assert status == 2 and "found: meta-llama/Llama-3.1-8B-Instruct, other-model" in stderr


def test_exposition_reads_back_as_written():
    text = exposition_text("m", 100, 300, [80, 60, 40], comment="specplan test")
    assert "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 100.0" in text
    assert "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter" in text
    counts = parse_scrape(text, "m.prom")
    assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens) == (100, 300, 180)
    assert counts.accepted_per_position == (80, 60, 40)


def test_run_writes_metrics_prom_beside_the_summary(cli, tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(BASE))
    status, _, _ = cli("run", path, "--out", tmp_path / "out", "--quiet")
    assert status == 0
    counts = read_scrape(tmp_path / "out" / "metrics.prom")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert counts.model == BASE["name"] and counts.block_size == 3
    assert counts.drafts > 0 and counts.draft_tokens == 3 * counts.drafts  # static length 3: full blocks
    assert summary["mean_accepted_per_step"] == pytest.approx(1 + counts.accepted_tokens / counts.drafts, rel=0.05)


def test_run_without_speculation_writes_no_metrics(cli, tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(deep_merge(BASE, {"drafter": {"family": "none", "block_size": 0},
                                                     "policy": {"name": "none"}})))
    assert cli("run", path, "--out", tmp_path / "out", "--quiet")[0] == 0
    assert not (tmp_path / "out" / "metrics.prom").exists()


CURVE = (0.8, 0.7, 0.6)
SEEDS = (1, 2, 3, 4, 5)


def round_trip_fits(level: float) -> list:
    """Simulate known curves (no spread: each proposal a Bernoulli chain), export, read back, fit."""
    fits = []
    for seed in SEEDS:
        scenario = make_scenario(seed=seed, horizon={"duration_s": 30, "warmup_s": 2})
        spec = simulate(scenario).speculation
        text = exposition_text(scenario.name, spec.drafts, spec.draft_tokens, spec.accepted_per_position.tolist())
        fits.append(fit_acceptance(parse_scrape(text, f"seed{seed}.prom"), level))
    return fits


def test_round_trip_recovers_the_curves_within_their_intervals():
    """Over 5 seeds × 3 positions, a 95% interval misses the true p_k in 0.75 cases on average;
    more than 3 misses has probability 0.5% if the intervals are right."""
    fits = round_trip_fits(0.95)
    misses = sum(not (p.low <= truth <= p.high) for fit in fits for p, truth in zip(fit.positions, CURVE, strict=True))
    assert misses <= 3, [fit.curve for fit in fits]
    tau = 1 + np.cumprod(CURVE).sum()
    assert sum(not (f.tau_low <= tau <= f.tau_high) for f in fits) <= 2
    assert stats.binom.sf(3, 15, 0.05) < 0.01 and math.isfinite(fits[0].tau)
