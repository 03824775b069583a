"""`specplan trace-stats`: the issue's JSON keys, values checked against pandas, the plot."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import SHARED

CODE = SHARED / "traces" / "azure2023" / "AzureLLMInferenceTrace_code.csv"
MOONCAKE = SHARED / "traces" / "mooncake" / "synthetic_trace.jsonl"


def stats_json(cli, *args):
    status, out, err = cli("trace-stats", *args, "--json")
    assert status == 0, err
    return json.loads(out)


def test_json_keys_and_values_match_an_independent_computation(cli):
    got = stats_json(cli, CODE, "--format", "azure")
    for key in ("requests", "span_s", "rate_per_s", "interarrival_cv", "prompt_tokens", "output_tokens"):
        assert key in got
    for key in ("prompt_tokens", "output_tokens"):
        assert set(got[key]) >= {"p50", "p90", "p99", "max"}
    frame = pd.read_csv(CODE)
    times = (pd.to_datetime(frame["TIMESTAMP"]) - pd.to_datetime(frame["TIMESTAMP"]).iloc[0]).dt.total_seconds()
    gaps = np.diff(times.to_numpy())
    assert got["requests"] == 8_819
    assert got["span_s"] == pytest.approx(times.iloc[-1], abs=1e-6)
    assert got["rate_per_s"] == pytest.approx(1.0 / gaps.mean())
    assert got["interarrival_cv"] == pytest.approx(gaps.std(ddof=1) / gaps.mean(), rel=1e-9)
    for q in (50, 90, 99):
        assert got["prompt_tokens"][f"p{q}"] == pytest.approx(np.percentile(frame["ContextTokens"], q))
    assert got["output_tokens"]["max"] == frame["GeneratedTokens"].max()
    t = times.to_numpy()
    peak = (np.searchsorted(t, t, side="right") - np.searchsorted(t, t - 60.0, side="right")).max()
    assert got["peak_1min_rate_per_s"] == pytest.approx(peak / 60.0)


def test_mooncake_stats_and_plot(cli, tmp_path):
    png = tmp_path / "shape.png"
    got = stats_json(cli, MOONCAKE, "--format", "mooncake", "--plot", png)
    assert got["requests"] == 3_993
    assert got["span_s"] == pytest.approx(1022.025)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_text_output_and_csv_columns(cli, tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("ts;in;out\n0;10;2\n500;20;0\n1000;30;4\nbad;1;1\n2000;40;5\n")
    status, out, err = cli("trace-stats", path, "--format", "csv", "--columns",
                           "timestamp=ts,prompt_tokens=in,output_tokens=out", "--time-unit", "ms",
                           "--delimiter", ";", "--skip-bad-lines")
    assert status == 0, err
    assert "requests                        3" in out
    assert "1 bad lines, 1 failed requests" in out


@pytest.mark.parametrize(("args", "message"), [
    (("--format", "azure", "--time-unit", "ms"), "apply to --format csv only"),
    (("--format", "csv", "--columns", "when=ts"), "--columns: expected ROLE=NAME"),
    (("--format", "parquet"), "invalid choice"),
])
def test_bad_arguments_are_one_line_errors(cli, args, message):
    status, _, err = cli("trace-stats", CODE, *args)
    assert status == 2
    assert message in err
    assert "Traceback" not in err


def test_block_hashes_give_the_share_of_repeated_blocks(cli, tmp_path):
    """Issue 39: trace-stats ignored Mooncake's hash_ids; the share of repeated blocks is the first number a
    prefix-cache plan needs. Three prompts: 4 new blocks; 3 blocks whose first 2 repeat (a prefix a cache
    serves); 2 blocks whose second repeats after a new first (no prefix): 3 of 9 references repeat, 2 as a prefix."""
    trace = tmp_path / "t.jsonl"
    lines = [{"timestamp": 0, "input_length": 64, "output_length": 5, "hash_ids": [1, 2, 3, 4]},
             {"timestamp": 10, "input_length": 48, "output_length": 5, "hash_ids": [1, 2, 7]},
             {"timestamp": 20, "input_length": 32, "output_length": 5, "hash_ids": [8, 3]}]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    blocks = stats_json(cli, trace, "--format", "mooncake")["blocks"]
    assert blocks == {"requests_with_blocks": 3, "block_references": 9, "distinct_blocks": 6,
                      "repeated_block_share": pytest.approx(3 / 9), "prefix_reuse_share": pytest.approx(2 / 9)}
    status, out, _ = cli("trace-stats", trace, "--format", "mooncake")
    assert status == 0 and "repeated blocks" in out and "33.3%" in out and "22.2%" in out, out


def test_the_shared_mooncake_trace_reports_its_block_reuse_and_a_csv_none(cli):
    got = stats_json(cli, MOONCAKE, "--format", "mooncake")["blocks"]
    rows = [json.loads(line) for line in MOONCAKE.read_text().splitlines() if line.strip()]
    seen, repeated, total = set(), 0, 0
    for row in rows:
        for block in row["hash_ids"]:
            repeated += block in seen
            total += 1
            seen.add(block)
    assert got["block_references"] == total and got["repeated_block_share"] == pytest.approx(repeated / total)
    assert stats_json(cli, CODE, "--format", "azure")["blocks"] is None
