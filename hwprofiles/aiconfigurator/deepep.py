"""The DeepEP rule: SGLang's data-parallel-attention built-ins price dispatch and combine from DeepEP's tables.

Place in the data flow: `build.py` (verify and drafter steps) and
`prefill.py` (prefill steps) hand their leaf curves here before the public
and physical rules; `deepep_rule` returns the curves with every MoE dispatch
and combine leaf set from aiconfigurator-core's DeepEP tables, and the header
line (`header_line`) that says so.

The tables. aiconfigurator-core 0.12.0 ships, per GPU, SGLang 0.5.12's
`comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet` (low-latency mode:
`dispatch_avg_t_us`, `combine_avg_t_us`) and
`wideep_deepep_normal_perf.parquet` (normal mode: `dispatch_transmit_us`,
`combine_transmit_us` per SM count), one node (8 GPUs, EP8), keyed by hidden
size, top-k, expert count and tokens per rank; V4-Flash's shape (4096, top-6,
256 experts) and V4-Pro's (7168, top-6, 384) are rows there. The estimator's
own DeepEP view (`_wideep_deepep_ll_data` / `_wideep_deepep_normal_data`)
holds the same rows with dispatch and combine summed; the parts need them
apart, so the parquet files are read (with the pyarrow the package brings).
The newest version folder holding both files is read (0.5.12 on every GPU
that has one; H100 and H200 also keep 0.5.6.post2).

THE RULE, for a target served by SGLang with data-parallel attention over
expert-parallel MoE (dp = ep > 1) on the default MoE path (`--moe-a2a-backend
deepep`, what every DP-attention cell of the development set runs; MegaMoE
fuses the all-to-all into its own measured block and is left alone):

1. Mode. SGLang's DeepEP `auto` mode runs low-latency dispatch for decode
   batches (a verify step is scheduled as a decode batch) and normal mode for
   extend (prefill) batches. A verify or drafter step at t tokens per rank
   reads the LL table while t is within its rows (up to 1,024 tokens per
   rank), the normal table beyond; a prefill step reads the normal table.
2. SMs. Normal mode at the table's largest SM count (24); a cell that gives
   DeepEP more SMs runs faster than this.
3. Tokens per rank. t = ceil(B / dp), the count the rest of the step uses;
   between the table's counts the time is interpolated linearly in t, below
   its first count held, beyond its last extrapolated from the last two.
4. EP8 to EP4 (or any EP the table does not hold): equal off-rank traffic.
   The EP-ep time at t tokens per rank is the EP8 time at t x c(ep) / c(8),
   where c is the copies of one token a rank sends to other ranks: in LL mode
   one per routed expert, c = k (ep - 1) / ep (V4: 5.25 at EP8, 4.5 at EP4);
   in normal mode one per destination rank, c = (ep - 1) (1 - C(E - E/ep, k)
   / C(E, k)) (V4-Flash: 3.89 at EP8, 2.48 at EP4). The fixed latency of a
   launch and its barrier stays the table's; what scales is the payload.
5. Layers. A leaf's time is its layer count (the operator's scale factor)
   x the table's per-layer time; the leaf's source becomes `DeepEP table`.

No other target is touched: tensor-parallel attention runs no all-to-all,
vLLM's all-to-all backends are not DeepEP's tables, and a geometry the tables
lack keeps the database's model (the header says which).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles.aiconfigurator.operators import kind_of
from specplan.hwprofiles.aiconfigurator.package import require_aic
from specplan.hwprofiles.aiconfigurator.parts import LeafCurves
from specplan.hwprofiles.aiconfigurator.targets import AicTarget

DEEPEP_SOURCE = "DeepEP table"
TABLE_EP = 8                       # one node of 8 GPUs (node_num 1)
FILES = {"ll": "wideep_deepep_ll_perf.parquet", "normal": "wideep_deepep_normal_perf.parquet"}
COLUMNS = {"ll": ("dispatch_avg_t_us", "combine_avg_t_us"), "normal": ("dispatch_transmit_us", "combine_transmit_us")}
RULE_START = "SGLang DP attention over EP MoE (DeepEP)"
RULE = ("SGLang DP attention over EP MoE (DeepEP): dispatch and combine from aiconfigurator-core's DeepEP tables "
        "(comm/sglang/<version>/wideep_deepep_{{ll,normal}}_perf.parquet, EP8, one node); verify and drafter steps "
        "low-latency mode up to the LL table's largest count of tokens per rank, normal mode beyond; prefill steps "
        "normal mode at the table's largest SM count; t = ceil(B/dp) tokens per rank, linear in t between rows; "
        "EP8 carried to EP{ep} at equal off-rank traffic: time(t) = EP8 time(t x c({ep}) / c(8)), c = copies of a "
        "token a rank sends off itself (LL: k(ep-1)/ep; normal: (ep-1)(1 - C(E-E/ep, k)/C(E, k)))")


@dataclass(frozen=True)
class DeepEPCurve:
    """One mode's rows at one shape: tokens per rank and dispatch / combine µs per layer (EP8)."""

    mode: str
    tokens: np.ndarray
    dispatch_us: np.ndarray
    combine_us: np.ndarray
    where: str

    def us(self, pre_dispatch: bool, tokens: np.ndarray) -> np.ndarray:
        """Dispatch (or combine) µs at `tokens` per rank: linear between rows, held below, extrapolated above."""
        values = self.dispatch_us if pre_dispatch else self.combine_us
        inside = np.interp(tokens, self.tokens, values)
        slope = (values[-1] - values[-2]) / (self.tokens[-1] - self.tokens[-2])
        return np.where(tokens > self.tokens[-1], values[-1] + slope * (tokens - self.tokens[-1]), inside)


def table_folder(system: str) -> Path | None:
    """The newest comm/sglang/<version> folder of `system` that holds both DeepEP tables, or None."""
    aic = require_aic()
    root = Path(aic.__file__).parent / "systems" / "data" / system / "comm" / "sglang"
    found = [p for p in root.glob("*") if all((p / f).is_file() for f in FILES.values())] if root.is_dir() else []
    return max(found, key=lambda p: version_key(p.name)) if found else None


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.replace(".post", ".").split(".") if part.isdigit())


@lru_cache(maxsize=64)
def deepep_curve(system: str, mode: str, hidden: int, topk: int, experts: int) -> DeepEPCurve | None:
    """The table's rows of `mode` at one shape on `system` (normal: its largest SM count), or None."""
    folder = table_folder(system)
    if folder is None:
        return None
    # pyarrow comes with aiconfigurator-core (the optional 'aic' extra), which reads these tables with it
    import pyarrow.parquet as pq

    table = pq.read_table(folder / FILES[mode]).to_pandas()
    rows = table[(table.hidden_size == hidden) & (table.num_topk == topk) & (table.num_experts == experts)
                 & (table.node_num == 1)]
    if mode == "normal" and not rows.empty:
        rows = rows[(rows.dispatch_sms == rows.dispatch_sms.max()) & (rows.combine_sms == rows.combine_sms.max())]
    if len(rows) < 2:
        return None
    rows = rows.sort_values("num_token")
    dispatch, combine = COLUMNS[mode]
    sms = f" at {int(rows.dispatch_sms.iloc[0])} SMs" if mode == "normal" else ""
    where = f"systems/data/{system}/comm/sglang/{folder.name}/{FILES[mode]}{sms}"
    return DeepEPCurve(mode, rows.num_token.to_numpy(float), rows[dispatch].to_numpy(float),
                       rows[combine].to_numpy(float), where)


def off_rank_copies(mode: str, ep: int, topk: int, experts: int) -> float:
    """c(ep): copies of one token a rank sends to other ranks (LL: one per expert; normal: one per rank)."""
    if mode == "ll":
        return topk * (ep - 1) / ep
    untouched = math.comb(experts - experts // ep, topk) / math.comb(experts, topk)
    return (ep - 1) * (1 - untouched)


def carried_tokens(mode: str, ep: int, topk: int, experts: int, tokens: np.ndarray) -> np.ndarray:
    """The EP8 token count with the off-rank traffic of `tokens` per rank at EP `ep` (rule step 4)."""
    if ep == TABLE_EP:
        return tokens
    return tokens * off_rank_copies(mode, ep, topk, experts) / off_rank_copies(mode, TABLE_EP, topk, experts)


def applies(target: AicTarget) -> bool:
    """SGLang, data-parallel attention over EP MoE (dp = ep > 1), DeepEP (not the fused MegaMoE)."""
    return target.backend == "sglang" and target.dp == target.ep > 1 and target.moe_backend == ""


@dataclass(frozen=True)
class DeepEPResult:
    leaves: LeafCurves
    line: str


def deepep_rule(leaves: LeafCurves, plain_ops: list[dict[str, Any]], target: AicTarget,
                prefill: bool) -> DeepEPResult:
    """The curves with every dispatch / combine leaf set by the DeepEP tables, and the header line."""
    dispatches = [(i, op["MoeDispatch"]) for i, op in enumerate(plain_ops) if kind_of(op) == "MoeDispatch"]
    if not dispatches or not applies(target):
        return DeepEPResult(leaves, "")
    body = dispatches[0][1]
    shape = (int(body["hidden_size"]), int(body["topk"]), int(body["num_experts"]))
    ll = None if prefill else deepep_curve(target.system, "ll", *shape)
    normal = deepep_curve(target.system, "normal", *shape)
    if normal is None or (ll is None and not prefill):
        return DeepEPResult(leaves, f"no DeepEP table of hidden {shape[0]}, top-{shape[1]}, {shape[2]} experts on "
                                    f"{target.system}: dispatch and combine stay the database's {body['flavor']} model")
    tokens = np.ceil(np.arange(1, leaves.ms.shape[0] + 1) / target.dp)
    for column, op in dispatches:
        us = mode_us(ll, normal, bool(op["pre_dispatch"]), tokens, target.ep, shape)
        leaves = leaves.with_ms(column, float(op["scale_factor"]) * us / 1000.0, DEEPEP_SOURCE)
    return DeepEPResult(leaves, describe(ll, normal, target.ep, shape))


def mode_us(ll: DeepEPCurve | None, normal: DeepEPCurve, pre_dispatch: bool, tokens: np.ndarray, ep: int,
            shape: tuple[int, int, int]) -> np.ndarray:
    """Per-layer µs at `tokens` per rank: LL while within its rows (decode), normal otherwise."""
    _, topk, experts = shape
    out = normal.us(pre_dispatch, carried_tokens("normal", ep, topk, experts, tokens))
    if ll is None:
        return out
    low = ll.us(pre_dispatch, carried_tokens("ll", ep, topk, experts, tokens))
    return np.where(tokens <= ll.tokens[-1], low, out)


def describe(ll: DeepEPCurve | None, normal: DeepEPCurve, ep: int, shape: tuple[int, int, int]) -> str:
    hidden, topk, experts = shape
    tables = "; ".join(c.where for c in (ll, normal) if c is not None)
    ratios = [off_rank_copies(m, ep, topk, experts) / off_rank_copies(m, TABLE_EP, topk, experts)
              for m in ("ll", "normal")]
    carry = ("the table's own EP8" if ep == TABLE_EP else
             f"EP8 carried to EP{ep} at equal off-rank traffic (x{ratios[0]:.3f} tokens in LL mode, "
             f"x{ratios[1]:.3f} in normal mode)")
    modes = (f"low-latency up to {int(ll.tokens[-1]):,} tokens per rank, normal beyond" if ll is not None
             else "normal mode (prefill)")
    return f"{RULE.format(ep=ep)}; here hidden {hidden}, top-{topk}, {experts} experts, {carry}; {modes}; tables {tables}"
