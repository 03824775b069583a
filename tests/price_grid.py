"""A grid of step quotes over each forward strategy, recorded from one commit and compared by the price's tests.

    python -m tests.price_grid --record tests/data/price-quotes-COMMIT.json

Each case is a scenario (one engine: its profile, graph rule, ranks, host and
sampler terms), a drafting price and a few steps to quote; each quote is
read at a grid of verify tokens B. The token-dense cases cover the profile's
own rows, vLLM's padded tokens with a context axis, and an engine's modes
(piecewise, eager by launches, past the capture list); the request-padded
cases SGLang's padded requests under the assumed eager surcharge and under
an eager step's launch floor; the per-rank cases a skewed decode step, a
separate prefill batch beside decoding ranks (a hand-made parts table), and
DeepSeek-V4 on four ranks with a prefill profile under DeepEP auto.
`tests/test_price_forwards.py` compares today's quotes with a file this
script wrote from an earlier commit (its name says which).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.price.pricer import StepPricer
from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.engine.price.terms import PriceSetup, StepTerm, step_terms
from tests.conftest import make_scenario

GRID = (1, 2, 3, 5, 8, 9, 16, 17, 31, 33, 64, 65, 100, 121, 129, 200, 257, 310, 400, 511)
HOST = {"host_overhead_ms": 0.3, "host_overhead_per_request_ms": 0.02, "scheduling_overhead_ms": 0.4}
V4_SGLANG_TP4 = "builtin:b200-deepseek-v4-flash-tp4-sglang"
V4_VLLM = "builtin:b200-deepseek-v4-flash-tp4ep4-vllm"
# the DP4 built-ins as they were at 8041aa3, where the grid was recorded: issue 47 priced their all-to-all from
# DeepEP's tables since, which moves the profile, not the forward the grid checks
V4_DP4_DATA = Path(__file__).parent / "data" / "price-grid"
V4_DP4 = str(V4_DP4_DATA / "b200-deepseek-v4-flash-dp4ep4-sglang.csv")
LLAMA_VLLM = "builtin:h200-llama3.1-8b-vllm"


def draft_ms(requests: int, context: float, length: int, positions: int | None = None) -> float:
    """A drafting price that reads every argument (so the drafting term's inputs are compared too)."""
    return 0.5 + 0.01 * requests * length + 1e-5 * context + (0.0 if positions is None else 0.001 * positions)


def dp_parts_profile(folder: Path) -> str:
    """tests/test_prefill_phases.py's two-rank table: shared 1 + 0.01·B, own 2 + 0.02·B (no context axis)."""
    tokens = [1, 512, 1024]
    shared = [1 + 0.01 * b for b in tokens]
    own = [2 + 0.02 * b for b in tokens]
    lines = ["# format: specplan-profile/1", "# name: dp2-parts", "# source: a hand-made test table",
             "# device: none", "# model: none", "# statistic: exact", "# extrapolation: none", "tokens,step_ms",
             *(f"{b},{s + o:.6f}" for b, s, o in zip(tokens, shared, own, strict=True)),
             "# table: parts", "tokens,dispatch_ms,routed_experts_ms,combine_ms,norms_ms",
             *(f"{b},0,{s:.6f},0,{o:.6f}" for b, s, o in zip(tokens, shared, own, strict=True))]
    path = folder / "dp2.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def load(ranks: int, anchors, prefill=None, pairs=None, context=None, fixed=None) -> dict:
    zero = [0] * ranks
    return {"anchors": list(anchors), "fixed": list(fixed or zero), "context": list(context or zero),
            "prefill": list(prefill or zero), "pairs": list(pairs or zero), "chunk_context": [0] * ranks}


def step_load(given: dict) -> StepLoad:
    return StepLoad(np.array(given["anchors"], dtype=np.int64), np.array(given["fixed"], dtype=np.int64),
                    np.array(given["context"], dtype=float), np.array(given["prefill"], dtype=np.int64),
                    np.array(given["pairs"], dtype=float), np.array(given["chunk_context"], dtype=float))


def cases(folder: Path) -> dict[str, dict]:
    """name -> {"scenario": changes, "block": drafter block, "quotes": [quote arguments], "stop": the grid's end}."""
    sampled = {**HOST, "sampling_ms_per_token": 0.01}
    dp2 = {"hardware": {"profile": dp_parts_profile(folder)}, "policy": {"name": "none"},
           "engine": {"max_batch_requests": 16, "max_step_tokens": 512, "dp_attention": {"ranks": 2}}}
    separate = {"mode": "chunked", "chunk_tokens": 600, "schedule": "separate"}
    v4_dp4 = {"hardware": {"profile": V4_DP4, "gpus_per_replica": 4},
              "engine": {"max_batch_requests": 64, "max_step_tokens": 1024, "kv_capacity_tokens": 2_000_000,
                         "prefill": {"mode": "chunked", "chunk_tokens": 4096, "schedule": "separate",
                                     "profile": str(V4_DP4_DATA / "b200-deepseek-v4-flash-dp4ep4-sglang-prefill.csv")},
                         "dp_attention": {"ranks": 4, "max_step_tokens": 256}, "cuda_graph": {"engine": "sglang"},
                         "all_to_all": {"backend": "deepep"}, **sampled}}
    plain = [[8, 8, 0, 0, 0], [8, 8, 8, 0, 3], [16, 12, 12, 0, 3]]
    context = [[8, 8, 0, 8000, 0], [8, 8, 8, 8000, 3], [30, 30, 30, 61_000, 3]]
    return {
        "token/profile": {"scenario": {"engine": {"max_step_tokens": 512, **sampled}}, "quotes": plain},
        "token/vllm-context": {"scenario": {"hardware": {"profile": LLAMA_VLLM},
                                            "engine": {"max_step_tokens": 512, "max_batch_requests": 64,
                                                       "kv_capacity_tokens": 400_000,
                                                       "cuda_graph": {"engine": "vllm", "max_capture_size": 128},
                                                       **sampled}},
                               "quotes": context},
        "token/vllm-modes": {"scenario": {"hardware": {"profile": V4_VLLM, "gpus_per_replica": 4},
                                          "engine": {"max_step_tokens": 512, "max_batch_requests": 64,
                                                     "kv_capacity_tokens": 400_000,
                                                     "cuda_graph": {"engine": "vllm", "max_capture_size": 64},
                                                     "prefill": {"mode": "chunked", "chunk_tokens": 256,
                                                                 "schedule": "mixed"}, **sampled}},
                             "quotes": [[8, 8, 8, 8000, 3], [9, 8, 8, 8000, 3, None, None, 100]]},
        "requests/assumed-eager": {"scenario": {"engine": {"max_step_tokens": 256, "max_batch_requests": 16,
                                                           "cuda_graph": {"engine": "sglang", "max_capture_size": 12,
                                                                          "eager_overhead_ms": 1.0}, **HOST}},
                                   "quotes": [[9, 9, 9, 0, 3], [13, 13, 13, 0, 3], [5, 5, 0, 0, 0]], "stop": 256},
        "requests/launch-floor": {"scenario": {"hardware": {"profile": V4_SGLANG_TP4, "gpus_per_replica": 4},
                                               "engine": {"max_step_tokens": 512, "max_batch_requests": 64,
                                                          "kv_capacity_tokens": 400_000,
                                                          "cuda_graph": {"max_capture_size": 8}, **HOST}},
                                  "quotes": [[6, 6, 6, 8000, 3], [20, 20, 20, 30_000, 3], [3, 3, 0, 2000, 0]]},
        "requests/sampled": {"scenario": {"engine": {"max_step_tokens": 256, "max_batch_requests": 16,
                                                     "cuda_graph": {"engine": "sglang", "max_capture_size": 12,
                                                                    "eager_overhead_ms": 1.0}, **sampled}},
                             "quotes": [[9, 9, 9, 0, 3], [13, 13, 13, 0, 3]], "stop": 256},
        "ranks/dp2": {"scenario": {**dp2, "engine": {**dp2["engine"], **HOST, "prefill": separate}},
                      "quotes": [[40, 40, 0, 0, 0, None, load(2, [30, 10])],
                                 [40, 40, 0, 0, 0, None, load(2, [20, 20])],
                                 [11, 10, 0, 0, 0, None, load(2, [0, 10], [300, 0], [90_000, 0])]]},
        "ranks/dp2-sampled": {"scenario": {**dp2, "engine": {**dp2["engine"], **sampled, "prefill": separate}},
                              "quotes": [[40, 40, 0, 0, 0, None, load(2, [30, 10])],
                                         [11, 10, 0, 0, 0, None, load(2, [0, 10], [300, 0], [90_000, 0])]]},
        "ranks/v4-dp4": {"scenario": v4_dp4, "block": 1,
                         "quotes": [[12, 12, 12, 40_000, 1, None, load(4, [6, 3, 2, 1], context=[20000, 10000,
                                                                                                 6000, 4000])],
                                    [9, 8, 8, 30_000, 1, None, load(4, [0, 3, 3, 2], [2048, 0, 0, 0],
                                                                   [2048.0 * 2048, 0, 0, 0],
                                                                   context=[0, 12000, 10000, 8000])]]},
    }


def pricer(case: dict, more: tuple[StepTerm, ...] = ()) -> StepPricer:
    """The case's pricer (its policy pays the scheduling overhead), with the engine's terms and `more` after them."""
    scenario = make_scenario(**case["scenario"])
    profile = load_profile(scenario.hardware.profile)
    config = EngineConfig.from_scenario(scenario, profile, case.get("block", 3))
    terms = (*step_terms(PriceSetup(config, draft_ms, True)), *more) if more else None
    return StepPricer(profile, draft_ms, config, pays_scheduling=True, terms=terms)


def quote_args(args: list) -> tuple[tuple, dict]:
    """(positional, keyword) arguments of `StepPricer.quote` from a case's list."""
    positional, rest = tuple(args[:5]), args[5:] + [None, None, 0][len(args) - 5:]
    positions, given, prefill_tokens = rest[:3]
    return positional, {"positions": positions, "load": None if given is None else step_load(given),
                        "prefill_tokens": prefill_tokens}


def read(case: dict) -> list[dict]:
    """Every quote of a case read at the grid: its parts, its mode, and its price at each B."""
    priced = pricer(case)
    out = []
    for args in case["quotes"]:
        positional, keywords = quote_args(args)
        quote = priced.quote(*positional, **keywords)
        grid = [b for b in GRID if b < case.get("stop", 512)]
        tokens = np.array(grid)
        out.append({"args": args, "draft_ms": quote.draft_ms, "host_ms": quote.host_ms,
                    "scheduling_ms": quote.scheduling_ms, "fixed_ms": quote.fixed_ms, "tokens": grid,
                    "mode": [str(quote.mode_at(b)) for b in grid],
                    "verify_ms": [quote.verify_ms(b) for b in grid], "step_ms": [quote.step_ms(b) for b in grid],
                    "steps_per_s": quote.steps_per_s(tokens).tolist(),
                    "range_steps_per_s": quote.steps_per_s_range(grid[0], grid[-1] + 1)[tokens - grid[0]].tolist(),
                    "excess_ms": [quote.excess_ms(b) for b in grid]})
    return out


def record(path: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        table = {name: read(case) for name, case in cases(Path(folder)).items()}
    path.write_text(json.dumps(table, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, required=True, help="the JSON file to write")
    record(parser.parse_args().record)


if __name__ == "__main__":
    main()
