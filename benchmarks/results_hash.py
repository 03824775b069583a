"""Hash the results of a fixed set of cases, to show that a refactor changes no answer.

    python benchmarks/results_hash.py [--out hashes.json] [--ignore-key KEY ...] [--ignore-column COL ...]
                                      [--engine-paths]

Each case is a scenario the project ships (every sweep variant of
`scenarios/default.yaml` and `scenarios/deepseek-v3-h200.yaml` at a light
and a heavy load, the policies those files do not sweep, chunked prefill,
tight KV) or one of the shared contract scenarios, run for a short horizon.
A case's hash covers its requests and steps frames and its summary (less
wall time). Run it before and after a change; the two outputs must be equal.
Every case runs the physics alone (uncalibrated): it calls `simulate()` on
the scenario as written, and only the command line (`run`, `sweep`, `plan`,
`tune`) applies the shipped calibration table (simulator.scenario.calibration_table),
so a refit of the table moves no hash here.
A change that adds a summary key changes every hash; `--ignore-key KEY`
leaves that key out, so the run after the change shows that nothing else moved;
`--ignore-column COL` does the same for a column the change adds to requests.csv or steps.csv.
A name ending in `*` leaves out every key or column it begins (`--ignore-key 'mode_*'`).
`--engine-paths` adds the engine's paths those cases miss (a prefill pool,
data-parallel attention under each budget rule, vLLM's truncation, chunked
prefill with a prefix cache on a Mooncake-format trace, a benchmark client,
the oracle with padded attention, sampled and split fleets, a run that logs
ITL, the two cases issue 30's KV-fit fix changed, the separate and mixed
prefill schedules under each DP dispatch rule, a DeepSeek-V4 DP4 step
priced at its busiest rank, and the steps' modes: an eager step priced by its
launch count, DeepEP's normal mode, a V4 DP4 run under DeepEP auto whose
prefilling ranks send every rank eager, vLLM's ragged lengths run piecewise);
its hashes also cover the prefill steps.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import yaml

from specplan.simulator.engine.cluster.simulation import SimResult, simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.merge import (
    apply_load,
    apply_variant,
    deep_merge,
    strip_study_blocks,
)
from specplan.simulator.study.split import simulate_sampled, simulate_split

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
EXTRA_POLICIES = ({"name": "dspark-global"}, {"name": "threshold", "params": {"threshold": 0.5}},
                  {"name": "goodput"}, {"name": "dspark-async", "params": {"bypass": {"acceptance_below": 0.5, "scope": "request"}}})


def sweep_cases(path: Path, loads: tuple[int, ...], duration_s: float) -> dict[str, dict]:
    raw = yaml.safe_load(path.read_text())
    base = strip_study_blocks(raw)
    base["horizon"] = {"duration_s": duration_s, "warmup_s": 1.0}
    cases = {}
    for variant in raw["sweep"]["variants"]:
        merged = apply_variant(base, {k: v for k, v in variant.items() if k != "label"})
        for users in loads:
            cases[f"{path.stem}/{variant['label']}/{users}"] = with_users(merged, users, path.parent)
    return cases


def extra_cases(path: Path, duration_s: float) -> dict[str, dict]:
    base = strip_study_blocks(yaml.safe_load(path.read_text()))
    base["horizon"] = {"duration_s": duration_s, "warmup_s": 1.0}
    cases = {f"{path.stem}/{p['name']}{'+bypass' if 'params' in p and 'bypass' in p['params'] else ''}":
             with_users(apply_variant(base, {"policy": p}), 32, path.parent) for p in EXTRA_POLICIES}
    chunked = apply_variant(base, {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 512}}})
    cases[f"{path.stem}/chunked"] = with_users(chunked, 16, path.parent)
    tight = apply_variant(base, {"engine": {"kv_capacity_tokens": 20_000}})
    cases[f"{path.stem}/tight-kv"] = with_users(tight, 64, path.parent)
    return cases


def with_users(raw: dict, users: int, folder: Path) -> dict:
    """The mapping at `users` closed-loop users (as a sweep's load axis sets them)."""
    return apply_load(raw, scenario_from_mapping(raw, folder).workload.arrivals, "users", users)


def contract_cases() -> dict[str, dict]:
    return {f"contract/{p.stem}": yaml.safe_load(p.read_text())
            for p in sorted((SHARED / "scenarios").glob("*.yaml"))}


def case_hash(raw: dict, folder: Path, ignored: tuple[str, ...] = ()) -> str:
    return result_hash(simulate(scenario_from_mapping(raw, folder)), ignored)


def is_ignored(name: str, ignored: tuple[str, ...]) -> bool:
    """Whether `name` is in `ignored`, or begins with one of its entries that ends in `*`."""
    return any(name == entry or (entry.endswith("*") and name.startswith(entry[:-1])) for entry in ignored)


def result_hash(result: SimResult, ignored: tuple[str, ...] = ()) -> str:
    """The hash of a run's frames and summary, less the summary keys and request or step columns in `ignored`."""
    digest = hashlib.sha256()
    for frame in (result.requests, result.steps):
        kept = frame.drop(columns=[name for name in frame.columns if is_ignored(name, ignored)])
        digest.update(kept.to_csv(index=False).encode())
    if result.prefill_steps is not None:
        digest.update(result.prefill_steps.to_csv(index=False).encode())
    summary = {k: v for k, v in result.summary.items() if k != "wall_s" and not is_ignored(k, ignored)}
    digest.update(json.dumps(summary, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


ENGINE_BASE = {
    "name": "engine-paths", "seed": 7, "horizon": {"duration_s": 8, "warmup_s": 1},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.05}},
    "cluster": {"replicas": 1, "router": "round_robin"},
    "engine": {"max_batch_requests": 16, "kv_capacity_tokens": 1_000_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 20_000}},
    "drafter": {"family": "mtp", "block_size": 3, "latency": {"kind": "fixed", "ms": 0.5},
                "acceptance": {"per_position": {"chat": [0.8, 0.7, 0.6]}, "domains": {"chat": 1.0},
                               "request_sigma": 0.3, "token_sigma": 0.3}},
    "policy": {"name": "static", "params": {"length": 3}},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 20},
                 "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.6, "max": 2000},
                 "output_tokens": {"kind": "lognormal", "median": 60, "sigma": 0.6, "max": 400}},
}
POOL = {"replicas": 2, "router": "least_loaded", "max_batch_tokens": 512, "link": {"gbps": 50.0, "latency_ms": 1.0},
        "kv_bytes_per_token": 131072, "profile": {"kind": "linear", "base_ms": 5.0, "per_token_ms": 0.01}}
BENCH = {  # a benchmark client (vllm bench serve's shape): its requests, a warm-up, two in flight
    "name": "engine-bench", "seed": 3, "horizon": {"requests": 8},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.0, "max_tokens": 512}},
    "engine": {"max_batch_requests": 8, "kv_capacity_tokens": 100_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 1000}},
    "drafter": {"family": "none", "block_size": 0, "acceptance": {"preset": "qwen3-8b", "domains": {"chat": 1.0}}},
    "policy": {"name": "none"},
    "workload": {"arrivals": {"kind": "bench_client", "num_prompts": 4, "max_concurrency": 2, "warmup_requests": 1,
                              "client": "vllm"},
                 "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 3}},
}

V4_DP = {  # DeepSeek-V4-Flash on 4 x B200 under SGLang, DP4 attention: separate prefill batches, ranks round-robin
    "name": "engine-v4-dp", "seed": 5, "horizon": {"duration_s": 4, "warmup_s": 1},
    "hardware": {"profile": "builtin:b200-deepseek-v4-flash-dp4ep4-sglang", "gpus_per_replica": 4},
    "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 2_000_000,
               "prefill": {"mode": "chunked", "chunk_tokens": 4096, "schedule": "separate",
                           "profile": "builtin:b200-deepseek-v4-flash-dp4ep4-sglang-prefill"},
               "dp_attention": {"ranks": 4, "balance": "round_robin", "max_step_tokens": 1024},
               "cuda_graph": {"engine": "sglang"}},
    "drafter": {"family": "mtp", "block_size": 1,
                "acceptance": {"preset": "deepseek-v4-pro-nothink", "domains": {"chat": 1.0}},
                "latency": {"kind": "profile", "path": "builtin:b200-deepseek-v4-flash-dp4ep4-sglang-mtp"}},
    "policy": {"name": "mtp-1"},
    "workload": {"arrivals": {"kind": "closed_loop", "users": 48},
                 "prompt_tokens": {"kind": "lognormal", "median": 1500, "sigma": 0.6, "max": 6000},
                 "output_tokens": {"kind": "lognormal", "median": 120, "sigma": 0.6, "max": 600}},
}


def engine_cases(trace: Path) -> dict[str, dict]:
    """The engine's paths the fixed cases miss (see the module docstring)."""
    pool = deep_merge(ENGINE_BASE, {"engine": {"prefill": {"tokens_per_s": 1e12}},
                                    "cluster": {"replicas": 2, "router": "least_loaded", "prefill": POOL}})
    greedy = {"name": "dspark-greedy", "params": {"bypass": {}}}
    cases = {
        "pool": deep_merge(pool, {"engine": {"kv_capacity_tokens": 3000}}),
        "pool-dp": deep_merge(pool, {"engine": {"kv_capacity_tokens": 8000, "max_batch_requests": 32,
                                                "dp_attention": {"ranks": 2}}}),
        "bench": BENCH,
        # the two cases the KV-fit rule's fix (issue 30) changed: prompts beyond one rank's cache behind a
        # pool (they used to wait at decode for good), ranks whose caches sum past the engine's total
        "pool-dp-beyond-a-rank": deep_merge(pool, {"engine": {"kv_capacity_tokens": 2000, "max_batch_requests": 32,
                                                              "dp_attention": {"ranks": 2}}}),
    }
    changes = {
        "dp-truncate-greedy": {"engine": {"budget": "truncate", "max_step_tokens": 64, "max_batch_requests": 32,
                                          "dp_attention": {"ranks": 2}}, "policy": greedy},
        "dp-defer-static": {"engine": {"budget": "defer", "max_step_tokens": 96, "max_batch_requests": 32,
                                       "kv_capacity_tokens": 12000, "dp_attention": {"ranks": 4}}},
        "dp-async-sglang-graphs": {"engine": {"max_batch_requests": 32, "cuda_graph": {"engine": "sglang"},
                                              "dp_attention": {"ranks": 2, "max_step_tokens": 64}},
                                   "policy": {"name": "dspark-async"}},
        "truncate-static": {"engine": {"budget": "truncate", "max_step_tokens": 40, "max_batch_requests": 32}},
        "truncate-threshold-chunked": {"engine": {"budget": "truncate", "max_step_tokens": 128,
                                                  "prefill": {"mode": "chunked", "chunk_tokens": 64}},
                                       "policy": {"name": "threshold", "params": {"threshold": 0.5}}},
        "chunked-cache-trace": {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 512},
                                           "prefix_cache": {"block_tokens": 512, "capacity_tokens": 1 << 20}},
                                "workload": {"arrivals": {"kind": "trace", "path": str(trace), "format": "mooncake"}}},
        "oracle-padded": {"engine": {"attention": "padded", "attention_profiled_queries": 2},
                          "policy": {"name": "oracle"}},
        "goodput-tight": {"engine": {"kv_capacity_tokens": 2500}, "policy": {"name": "goodput"}},
        "dp-ranks-past-the-total": {"engine": {"kv_capacity_tokens": 4000, "max_batch_requests": 32,
                                               "dp_attention": {"ranks": 2, "kv_capacity_tokens": 3000}}},
        # the engines' prefill schedules and DP dispatch (phases.py, ranks.py)
        "separate": {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 256, "schedule": "separate"}}},
        "dp-separate-round-robin": {"engine": {"max_batch_requests": 32,
                                               "prefill": {"mode": "chunked", "chunk_tokens": 512,
                                                           "schedule": "separate"},
                                               "dp_attention": {"ranks": 2, "balance": "round_robin"}}},
        "dp-mixed-least-loaded": {"engine": {"max_batch_requests": 32,
                                             "prefill": {"mode": "chunked", "chunk_tokens": 256, "schedule": "mixed"},
                                             "dp_attention": {"ranks": 2, "balance": "least_loaded"}}},
        "dp-fewest-requests": {"engine": {"max_batch_requests": 32,
                                          "dp_attention": {"ranks": 4, "balance": "fewest_requests"}}},
    }
    cases |= {name: deep_merge(ENGINE_BASE, change) for name, change in changes.items()}
    cases["v4-busiest-rank"] = V4_DP  # a parts table: each DP step priced at its busiest rank (price/rank_split.py)
    cases |= mode_cases()
    return {f"engine/{name}": raw for name, raw in cases.items()}


def mode_cases() -> dict[str, dict]:
    """How steps run (specplan.simulator.engine.step_modes): eager by launch count, DeepEP normal and auto, vLLM
    piecewise."""
    tp4 = deep_merge(V4_DP, {"hardware": {"profile": "builtin:b200-deepseek-v4-flash-tp4-sglang"},
                             "engine": {"dp_attention": None, "prefill": {"profile": None}},
                             "drafter": {"latency": {"path": "builtin:b200-deepseek-v4-flash-tp4-sglang-mtp"}}})
    del tp4["engine"]["dp_attention"]
    del tp4["engine"]["prefill"]["profile"]
    return {
        # graphs to 8 requests: most steps of 48 users run eager, priced max(kernels, 196 x 43 launches)
        "v4-eager-launches": deep_merge(tp4, {"engine": {"cuda_graph": {"max_capture_size": 8}}}),
        # DeepEP forced normal: every decode step eager, its MoE block at normal-mode cost, a host sync per layer
        "v4-deepep-normal": deep_merge(V4_DP, {"engine": {"all_to_all": {"backend": "deepep", "mode": "normal"}}}),
        # DeepEP auto: a step where a rank prefills runs eager and normal on every rank, decode low-latency
        "v4-dp4-deepep-auto": deep_merge(V4_DP, {"engine": {"all_to_all": {"backend": "deepep"}}}),
        # vLLM: DSpark's per-request lengths run piecewise, past the capture list eager
        "vllm-ragged-piecewise": deep_merge(tp4, {
            "hardware": {"profile": "builtin:b200-deepseek-v4-flash-tp4ep4-vllm"},
            "engine": {"cuda_graph": {"engine": "vllm"}, "prefill": {"schedule": "mixed"}},
            "drafter": {"family": "dspark", "block_size": 5, "acceptance": {"preset": "deepseek-v4.1-flash"},
                        "latency": {"kind": "fixed", "ms": 1.0}},
            "policy": {"name": "dspark-async"}}),
    }


def engine_path_hashes(folder: Path, ignored: tuple[str, ...]) -> dict[str, str]:
    """The engine cases, plus a run that logs ITL and a fleet sampled and split (simulate_sampled / _split)."""
    trace = folder / "trace.jsonl"
    rows = [(t * 0.3, 1536 if t % 3 else 512, [1, 2, 3 + (t % 4)]) for t in range(40)]
    trace.write_text("\n".join(json.dumps({"timestamp": t * 1000, "input_length": n, "output_length": 30,
                                           "hash_ids": h}) for t, n, h in rows) + "\n")
    hashes = {name: case_hash(raw, folder, ignored) for name, raw in engine_cases(trace).items()}
    itl = scenario_from_mapping(deep_merge(ENGINE_BASE, {"policy": {"name": "dspark-async"}}), folder)
    hashes["engine/itl-async"] = result_hash(simulate(itl, itl=True), ignored)
    fleet = scenario_from_mapping(deep_merge(ENGINE_BASE, {"cluster": {"replicas": 6, "router": "random"},
                                                           "workload": {"arrivals": {"rate_per_s": 60}}}), folder)
    hashes["engine/sampled-fleet"] = result_hash(simulate_sampled(fleet, 2), ignored)
    hashes["engine/split-fleet"] = result_hash(simulate_split(fleet, 1), ignored)
    return hashes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the hashes as JSON here")
    parser.add_argument("--duration", type=float, default=6.0, help="simulated seconds per case (default 6)")
    parser.add_argument("--ignore-key", action="append", default=[], metavar="KEY",
                        help="leave this summary key out of the hash (a key the change adds)")
    parser.add_argument("--ignore-column", action="append", default=[], metavar="COL",
                        help="leave this requests.csv or steps.csv column out of the hash (a column the change "
                             "adds); a trailing * leaves out every name it begins")
    parser.add_argument("--engine-paths", action="store_true",
                        help="also hash the engine's paths the fixed cases miss (see the module docstring)")
    args = parser.parse_args(argv)
    ignored = (*args.ignore_key, *args.ignore_column)
    default, deepseek = REPO / "scenarios" / "default.yaml", REPO / "scenarios" / "deepseek-v3-h200.yaml"
    cases = {**sweep_cases(default, (16, 128), args.duration), **extra_cases(default, args.duration),
             **sweep_cases(deepseek, (32,), args.duration)}
    hashes = {name: case_hash(raw, default.parent, ignored) for name, raw in cases.items()}
    if SHARED.exists():
        hashes |= {name: case_hash(raw, SHARED / "scenarios", ignored) for name, raw in contract_cases().items()}
    if args.engine_paths:
        with tempfile.TemporaryDirectory() as folder:
            hashes |= engine_path_hashes(Path(folder), ignored)
    for name, value in hashes.items():
        print(f"{value}  {name}")
    if args.out:
        args.out.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
