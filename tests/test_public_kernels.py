"""The public kernel measurements (hwprofiles/public/): every row names a known source and part, with a sane value.

The table is data other people published; these checks keep its layout the
one the code reading it relies on (the header, the vocabularies, integers and
positive latencies) and keep every source documented in sources.yaml.
"""

from __future__ import annotations

import csv

import yaml

from specplan.hwprofiles.aiconfigurator.public import load_scheduler_costs
from tests.conftest import REPO

PUBLIC = REPO / "hwprofiles" / "public"
HEADER = ["source", "gpu", "model", "part", "kernel", "precision", "ep", "tokens_per_rank", "latency_us",
          "statistic", "note", "n", "k"]
PARTS = {"dispatch", "combine", "routed_experts", "moe_block", "shared_expert", "attention_decode", "gemm"}
GPUS = {"b200_sxm", "b300_sxm", "h200_sxm", "h100_sxm", "gb200", "gb300", "h800"}
MODELS = {"deepseek-v4-flash", "deepseek-v4-pro", "deepseek-v3", "none"}
PRECISIONS = {"fp8", "mxfp4", "nvfp4", "bf16", "w4a8", "fp8_block"}
STATISTICS = {"p50", "mean", "median", "min"}
SOURCE_KEYS = {"repository", "url", "reference", "commit", "measured", "conditions", "assumptions"}


def rows() -> list[dict[str, str]]:
    with (PUBLIC / "kernels.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def sources() -> dict[str, dict]:
    return yaml.safe_load((PUBLIC / "sources.yaml").read_text())


def test_the_header_is_the_agreed_one():
    with (PUBLIC / "kernels.csv").open(newline="") as handle:
        assert next(csv.reader(handle)) == HEADER


def test_every_row_is_well_formed():
    known = sources()
    for line, row in enumerate(rows(), start=2):
        where = f"kernels.csv:{line}"
        assert row["source"] in known, where
        assert row["part"] in PARTS and row["gpu"] in GPUS and row["model"] in MODELS, where
        assert row["precision"] in PRECISIONS and row["statistic"] in STATISTICS, where
        assert row["kernel"] and row["kernel"] == row["kernel"].strip(), where
        assert int(row["ep"]) >= 1 and int(row["tokens_per_rank"]) >= 1, where   # int() refuses "8.0"
        assert float(row["latency_us"]) > 0, where
        gemm = row["part"] == "gemm"   # a single GEMM: its shape in n, k, no model geometry; other rows none
        assert (row["model"] == "none") == gemm and bool(row["n"] and row["k"]) == gemm, where
        assert not gemm or (int(row["n"]) >= 1 and int(row["k"]) >= 1 and row["ep"] == "1"), where


def test_every_source_is_documented_and_used():
    table, documented = rows(), sources()
    assert {r["source"] for r in table} | {c.source for c in load_scheduler_costs()} == set(documented)
    for name, entry in documented.items():
        missing = SOURCE_KEYS - set(entry)
        assert not missing, f"{name} lacks {sorted(missing)}"
        assert entry["url"].startswith("https://github.com/")


def test_the_scheduler_costs_read_as_published():
    """sglang PR #34338: the DP-attention sync at 4 DP ranks, 454.6 -> 172.0 us per scheduler step."""
    costs = load_scheduler_costs()
    at_dp4 = [c for c in costs if c.source == "sglang_pr34338" and c.dp_ranks == 4]
    assert [(c.before_us, c.after_us) for c in at_dp4] == [(454.6, 172.0)]
    assert all(c.after_us < c.before_us and c.statistic in STATISTICS for c in costs)


def test_deepgemm_316_legacy_rows_are_its_speedups():
    """Each derived legacy row is the Mega MoE row of the same PR times the printed speedup vs legacy."""
    table = rows()
    mega = {(r["model"], r["tokens_per_rank"]): float(r["latency_us"]) for r in table if r["source"] == "deepgemm_pr316"}
    legacy = {(r["model"], r["tokens_per_rank"]): float(r["latency_us"]) for r in table
              if r["source"] == "deepgemm_pr316_legacy"}
    assert set(legacy) == set(mega)
    assert legacy[("deepseek-v4-flash", "512")] == 253.4     # 146.5 us x 1.73
    for key, value in legacy.items():
        assert 1.4 < value / mega[key] < 2.0, key


def test_derived_rows_say_how():
    """A latency derived from a published bandwidth says so in its note, and its source gives the derivation."""
    derived = [r for r in rows() if "DERIVED" in r["note"]]
    assert derived
    for row in derived:
        assert "derivation" in sources()[row["source"]]


def test_one_point_per_measurement():
    keys = [(r["source"], r["gpu"], r["model"], r["part"], r["kernel"], r["ep"], r["tokens_per_rank"], r["note"],
             r["n"], r["k"]) for r in rows()]
    assert len(keys) == len(set(keys))
