"""The DeepSeek-V4 scenarios (issue 22 item 6) validate, and their two stories hold on a short horizon:
DSpark-5 async verifies a wide block at light load, and MTP-1's per-rank token cap binds under load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = ("deepseek-v4-flash.yaml", "deepseek-v4-pro.yaml")


def summary_of(cli, tmp_path: Path, name: str, label: str | None, *sets: str) -> dict:
    """Run one variant of a V4 scenario (its sweep block merged over the base, as `sweep` does)."""
    args: list[str] = []
    if label is not None:
        raw = yaml.safe_load((REPO / "scenarios" / name).read_text())
        variant = next(v for v in raw["sweep"]["variants"] if v["label"] == label)
        merge = tmp_path / "variant.yaml"
        merge.write_text(yaml.safe_dump({k: v for k, v in variant.items() if k != "label"}))
        args += ["--merge", str(merge)]
    for item in sets:
        args += ["--set", item]
    status, _, err = cli("run", REPO / "scenarios" / name, "--out", tmp_path / "out", "--quiet", *args)
    assert status == 0, err
    return json.loads((tmp_path / "out" / "summary.json").read_text())


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_v4_scenarios_check(cli, name):
    status, out, err = cli("check", REPO / "scenarios" / name)
    assert status == 0, err
    assert "55 sweep points over 5 variants" in out


def test_dspark_async_verifies_four_to_six_tokens_at_light_load(cli, tmp_path):
    summary = summary_of(cli, tmp_path, "deepseek-v4-flash.yaml", None, "workload.arrivals.users=8",
                         "horizon={duration_s: 8, warmup_s: 2}")
    assert 4.0 <= summary["mean_verify_tokens_per_request_step"] <= 6.0
    assert summary["request_steps_deferred"] == 0


def test_mtp1s_per_rank_token_cap_binds_under_load(cli, tmp_path):
    # 8 ranks x 256 tokens at 2 tokens per request: at most 1,024 decoding requests per step
    summary = summary_of(cli, tmp_path, "deepseek-v4-flash.yaml", "MTP-1", "workload.arrivals.users=1536",
                         "horizon={duration_s: 4, warmup_s: 1}")
    assert summary["mean_decode_requests"] <= 1024
    assert summary["request_steps_deferred"] > 0
    assert summary["mean_verify_tokens_per_request_step"] == pytest.approx(2.0)
