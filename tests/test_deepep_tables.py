"""DeepEP's tables price SGLang's DP-attention dispatch and combine (hwprofiles/aiconfigurator/deepep.py).

The hand-checked shape: B200, SGLang 0.5.12's low-latency table, V4-Flash's MoE (hidden 4096, top-6,
256 experts), EP8, 64 tokens per rank; the row read by pandas straight from the parquet file must be
what the rule reads, and a DP8 / EP8 built-in's dispatch at B = 8 x 64 must be 43 layers of it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from specplan.hwprofiles.fileformat import DATA_DIR
from tests.conftest import REPO

needs_aic = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                               reason="needs aiconfigurator-core (the 'aic' extra)")
FLASH = (4096, 6, 256)          # hidden, top-k, routed experts
RULE_START = "SGLang DP attention over EP MoE (DeepEP)"


def parquet_row(system: str, mode: str, tokens: int) -> dict:
    """One row of the package's DeepEP table at V4-Flash's shape, read by pandas (normal: its largest SM count)."""
    import aiconfigurator_core
    import pandas as pd

    name = {"ll": "wideep_deepep_ll_perf.parquet", "normal": "wideep_deepep_normal_perf.parquet"}[mode]
    path = Path(aiconfigurator_core.__file__).parent / "systems" / "data" / system / "comm" / "sglang" / "0.5.12" / name
    table = pd.read_parquet(path)
    rows = table[(table.hidden_size == 4096) & (table.num_topk == 6) & (table.num_experts == 256)
                 & (table.num_token == tokens)]
    if mode == "normal":
        rows = rows[rows.dispatch_sms == rows.dispatch_sms.max()]
    assert len(rows) == 1
    return rows.iloc[0].to_dict()


@needs_aic
def test_the_ll_table_is_read_at_the_hand_checked_shape():
    from specplan.hwprofiles.aiconfigurator.deepep import deepep_curve

    row = parquet_row("b200_sxm", "ll", 64)
    assert (row["dispatch_avg_t_us"], row["combine_avg_t_us"]) == pytest.approx((23.359, 24.19))
    curve = deepep_curve("b200_sxm", "ll", *FLASH)
    assert curve.us(True, np.array([64.0]))[0] == row["dispatch_avg_t_us"]
    assert curve.us(False, np.array([64.0]))[0] == row["combine_avg_t_us"]
    assert "b200_sxm/comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet" in curve.where


@needs_aic
def test_the_normal_table_is_read_at_its_largest_sm_count():
    from specplan.hwprofiles.aiconfigurator.deepep import deepep_curve

    row = parquet_row("h200_sxm", "normal", 4096)
    curve = deepep_curve("h200_sxm", "normal", *FLASH)
    assert row["dispatch_sms"] == 24 and "at 24 SMs" in curve.where
    assert curve.us(True, np.array([4096.0]))[0] == row["dispatch_transmit_us"]
    assert curve.us(False, np.array([4096.0]))[0] == row["combine_transmit_us"]


@needs_aic
def test_a_dp8_built_in_pays_the_table_per_layer():
    """b200 DP8 / EP8 (the table's own EP): dispatch at B = 512 (64 tokens per rank) = 43 layers x 23.359 us."""
    from specplan.hwprofiles.aiconfigurator.build import price
    from specplan.hwprofiles.aiconfigurator.package import quiet
    from specplan.hwprofiles.builtins import AIC_BUILTINS

    target, layout, drafter = AIC_BUILTINS["b200-deepseek-v4-flash-dp8ep8-sglang"]
    with quiet():
        priced = price(target, layout, "", drafter)
    row = parquet_row("b200_sxm", "ll", 64)
    assert priced.leaves.part_ms("dispatch")[511] == pytest.approx(43 * row["dispatch_avg_t_us"] / 1000, rel=1e-12)
    assert priced.leaves.part_ms("combine")[511] == pytest.approx(43 * row["combine_avg_t_us"] / 1000, rel=1e-12)
    assert priced.leaves.part_source("dispatch") == "DeepEP table"
    assert priced.deepep.startswith(RULE_START)


def test_ep8_is_carried_to_ep4_at_equal_off_rank_traffic():
    from specplan.hwprofiles.aiconfigurator.deepep import carried_tokens, off_rank_copies

    assert off_rank_copies("ll", 8, 6, 256) == pytest.approx(5.25)
    assert off_rank_copies("ll", 4, 6, 256) == pytest.approx(4.5)
    assert off_rank_copies("normal", 8, 6, 256) == pytest.approx(3.885, abs=0.001)
    assert off_rank_copies("normal", 4, 6, 256) == pytest.approx(2.477, abs=0.001)
    assert carried_tokens("ll", 4, 6, 256, np.array([70.0]))[0] == pytest.approx(60.0)
    assert carried_tokens("ll", 8, 6, 256, np.array([70.0]))[0] == 70.0


def test_the_tables_apply_to_sglang_dp_attention_over_deepep_only():
    from specplan.hwprofiles.aiconfigurator.deepep import applies
    from specplan.hwprofiles.builtins import AIC_BUILTINS

    def target(name: str):
        return AIC_BUILTINS[name][0]

    assert applies(target("b200-deepseek-v4-flash-dp4ep4-sglang"))
    assert not applies(target("gb300-deepseek-v4-flash-dp4ep4-sglang-megamoe"))   # its all-to-all is in the block
    assert not applies(target("b200-deepseek-v4-flash-tp4ep4-sglang"))             # TP attention: no all-to-all
    assert not applies(target("b200-deepseek-v4-flash-dp8ep8-vllm"))               # not SGLang's DeepEP


def header(name: str) -> dict[str, str]:
    lines = {}
    with (DATA_DIR / f"{name}.csv").open() as handle:
        for line in handle:
            if not line.startswith("# "):
                break
            key, _, value = line[2:].partition(": ")
            lines[key] = value.strip()
    return lines


def test_no_header_claims_there_is_no_deepep_table():
    for path in sorted(DATA_DIR.glob("*.csv")):
        text = path.read_text()
        assert "has no table of this model in the database" not in text, path.name
        assert "(DeepEP, NCCL EP) has no table" not in text, path.name


@pytest.mark.parametrize("name", ["b200-deepseek-v4-flash-dp4ep4-sglang", "b200-deepseek-v4-flash-dp4ep4-sglang-mtp",
                                  "h200-deepseek-v4-flash-dp4ep4-sglang-fp8-prefill",
                                  "b200-deepseek-v4-flash-dp8ep8-sglang"])
def test_the_dp_built_ins_say_they_read_deepep(name):
    line = header(name)["moe_communication"]
    assert line.startswith(RULE_START)
    assert ("EP8 carried to EP4" in line) == ("dp4ep4" in name)
    assert "wideep_deepep_" in line and "/comm/sglang/0.5.12/" in line


def test_builtins_source_no_longer_says_deepep_is_missing():
    source = (REPO / "hwprofiles" / "builtins.py").read_text()
    assert "DeepEP is not a gap" in source
    assert "whatever all-to-all the engine runs" not in source
