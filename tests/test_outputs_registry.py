"""The outputs registry (specplan.simulator.core.outputs) is the one list of what specplan writes: every engine
path is run, and a summary key or CSV column written but not registered fails, as does an entry that no path
writes (a stale definition)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from specplan.simulator.core.outputs import OUTPUT_FILES, contract_keys, describe, output_file
from specplan.simulator.engine.request_log import REJECT_REASONS
from specplan.simulator.engine.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.calibration import Applied, Calibration, Deployment
from specplan.simulator.study.split import simulate_sampled, simulate_split
from tests.conftest import BASE, REPO, merged

SHORT = {"horizon": {"duration_s": 3, "warmup_s": 0.5}}
POOL = {"engine": {"prefill": {"tokens_per_s": 1e12}},
        "cluster": {"replicas": 2, "router": "least_loaded",
                    "prefill": {"replicas": 2, "link": {"gbps": 100}, "kv_bytes_per_token": 1000,
                                "profile": "builtin:h200-llama3.1-8b-vllm-prefill", "router": "cache_aware",
                                "prefix_cache": {"block_tokens": 512, "capacity_tokens": 100_000}}}}
PREFILL_PROFILE = "builtin:h200-llama3.1-8b-vllm-prefill"
V4_DP = {"hardware": {"profile": "builtin:b200-deepseek-v4-flash-dp4ep4-sglang", "gpus_per_replica": 4},
         "engine": {"max_batch_requests": 32, "kv_capacity_tokens": 2_000_000, "dp_attention": {"ranks": 4},
                    "prefill": {"mode": "chunked", "chunk_tokens": 2048, "schedule": "separate"},
                    "cuda_graph": {"engine": "sglang"}, "all_to_all": {"backend": "deepep"}},
         "drafter": {"latency": {"kind": "fixed", "ms": 0.5}}, "policy": {"name": "none"},
         "workload": {"arrivals": {"kind": "closed_loop", "users": 48, "think_s": 0},
                      "output_tokens": {"kind": "lognormal", "median": 30, "sigma": 0.6, "max": 120}}}
BENCH = {"horizon": {"requests": 6}, "drafter": {"family": "none", "block_size": 0}, "policy": {"name": "none"},
         "workload": {"arrivals": {"kind": "bench_client", "num_prompts": 4, "max_concurrency": 2,
                                   "warmup_requests": 1}, "output_tokens": {"kind": "fixed", "value": 4}}}

SESSIONS = {"horizon": {"duration_s": 20, "warmup_s": 0}, "cluster": {"router": "session"},
            "engine": {"prefill": {"mode": "chunked", "chunk_tokens": 512},
                       "prefix_cache": {"block_tokens": 64, "capacity_tokens": 4096, "layout": "deepseek-v4-flash",
                                        "kv_value_bytes": 1, "host": {"gbytes_per_s": 64, "ratio": 2}}},
            "workload": {"arrivals": {"kind": "sessions", "lanes": 2, "idle_gap_cap_s": 0.5,
                                      "generate": {"sessions": 4, "turns_median": 4, "turns_sigma": 0,
                                                   "first_prompt_median": 2000, "shared_prefix_tokens": 500,
                                                   "output_median": 8, "output_sigma": 0}}}}


def mooncake(path) -> str:
    rows = [(t * 0.1, 1536 if t % 3 else 512, [1, 2, 3 + t % 4]) for t in range(30)]
    path.write_text("".join(json.dumps({"timestamp": t * 1000, "input_length": n, "output_length": 20,
                                        "hash_ids": h}) + "\n" for t, n, h in rows))
    return str(path)


def cases(tmp_path) -> dict[str, dict]:
    """One scenario per engine path that writes keys or columns of its own."""
    trace = {"workload": {"arrivals": {"kind": "trace", "path": mooncake(tmp_path / "t.jsonl"),
                                       "format": "mooncake"}}}
    raw = merged(BASE, SHORT)
    return {
        "plain": raw,
        "pool-cache-trace": merged(merged(raw, POOL), trace),
        "chunked-cache": merged(merged(raw, trace), {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 512},
                                                                "prefix_cache": {"block_tokens": 512}}}),
        "trace-runs-out": merged(merged(raw, trace), {"horizon": {"duration_s": 5}}),
        "dp-truncate": merged(raw, {"engine": {"budget": "truncate", "max_step_tokens": 64, "max_batch_requests": 32,
                                               "dp_attention": {"ranks": 2}}, "policy": {"name": "dspark-async"}}),
        "dp-separate": merged(raw, {"engine": {"prefill": {"mode": "chunked", "chunk_tokens": 512,
                                                           "schedule": "separate", "profile": PREFILL_PROFILE},
                                               "dp_attention": {"ranks": 2, "balance": "round_robin"}}}),
        "tight-kv": merged(raw, {"engine": {"kv_capacity_tokens": 300}}),
        "sessions-host-tier": merged(raw, SESSIONS),
        "vllm-bench": merged(raw, BENCH),
        "sglang-bench": merged(merged(raw, BENCH), {"workload": {"arrivals": {"client": "sglang"}}}),
        "v4-dp-deepep-graphs": merged(raw, V4_DP),
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """file name → {key: the case that wrote it}, over every case."""
    folder = tmp_path_factory.mktemp("paths")
    seen: dict[str, dict[str, str]] = {f.name: {} for f in OUTPUT_FILES}
    results = {name: simulate(scenario_from_mapping(raw, folder), itl=True) for name, raw in cases(folder).items()}
    fleet = scenario_from_mapping(merged(BASE, {**SHORT, "cluster": {"replicas": 4, "router": "random"}}), REPO)
    results["sampled"] = simulate_sampled(fleet, 2)
    results["split"] = simulate_split(fleet, 1)
    assert results["trace-runs-out"].summary["trace_ran_out_s"] is not None  # the window ended with the trace
    for name, result in results.items():
        for file, keys in (("summary.json", result.summary), ("requests.csv", result.requests.columns),
                           ("steps.csv", result.steps.columns)):
            for key in keys:
                seen[file].setdefault(key, name)
        if result.prefill_steps is not None:
            for key in result.prefill_steps.columns:
                seen["prefill_steps.csv"].setdefault(key, name)
    # `specplan run --calibration FILE` adds the calibration's keys to the summary (the command, not simulate())
    calibration = Calibration(Deployment("vllm", "0.24.0", "H200", "Llama-3.1-8B", "tp"), {})
    seen["summary.json"].update(dict.fromkeys(Applied(calibration, [], {}, []).summary_keys(), "calibrated"))
    return seen


@pytest.mark.parametrize("file", ["summary.json", "requests.csv", "steps.csv", "prefill_steps.csv"])
def test_every_key_a_run_writes_is_registered(written, file):
    missing = {key: case for key, case in written[file].items() if describe(file, key) is None}
    assert not missing, f"{file}: written but not in specplan.simulator.core.outputs: {missing}"


@pytest.mark.parametrize("file", ["summary.json", "requests.csv", "steps.csv", "prefill_steps.csv"])
def test_every_registered_key_is_written_by_some_path(written, file):
    stale = [o.name for o in output_file(file).columns if not any(o.matches(key) for key in written[file])]
    assert not stale, f"{file}: registered but written by no engine path: {stale}"


# the modes each case runs in (specplan.simulator.core.outputs.PRESENCE and the benchmark clients' keys)
MODES = {"pool-cache-trace": ("prefill pool", "prefix cache", "trace arrivals"),
         "chunked-cache": ("prefix cache", "KV tiers", "trace arrivals"), "trace-runs-out": ("trace arrivals",),
         "sessions-host-tier": ("prefix cache", "KV tiers", "session lanes"),
         "dp-truncate": ("DP attention",), "dp-separate": ("DP attention",), "vllm-bench": ("client: vllm",),
         "sglang-bench": ("client: sglang",), "sampled": ("split or sampled", "sampled fleet"),
         "split": ("split or sampled",), "v4-dp-deepep-graphs": ("DP attention", "serving engine's caps")}
# keys written once for each value the window's steps recorded (a reason, an all-to-all mode): their presence is
# the run's, so only that some path writes them is checked (test_every_registered_key_is_written_by_some_path)
EACH_SEEN = "one key for each"


@pytest.mark.parametrize("file", ["summary.json", "requests.csv"])
def test_each_key_is_written_in_exactly_the_runs_its_entry_names(tmp_path_factory, file):
    """Issue 39: outputs.md listed keys that some runs do not write. Every-run keys are in every case's output;
    a key of a mode ("with a prefill pool") is in exactly the cases that run in that mode."""
    folder = tmp_path_factory.mktemp("modes")
    results = {name: simulate(scenario_from_mapping(raw, folder), itl=True) for name, raw in cases(folder).items()}
    fleet = scenario_from_mapping(merged(BASE, {**SHORT, "cluster": {"replicas": 4, "router": "random"}}), REPO)
    results["sampled"], results["split"] = simulate_sampled(fleet, 2), simulate_split(fleet, 1)
    wrong = []
    for name, result in results.items():
        keys = set(result.summary) if file == "summary.json" else set(result.requests.columns)
        for entry in output_file(file).columns:
            if entry.present.startswith(EACH_SEEN):
                continue
            expected = entry.present == "every run" or any(mode in entry.present for mode in MODES.get(name, ()))
            if expected != any(entry.matches(k) for k in keys):
                wrong.append((entry.name, name, "missing" if expected else "written", entry.present))
    assert not wrong, wrong


def test_every_entry_has_a_unit_and_a_definition():
    for file in OUTPUT_FILES:
        for column in file.columns:
            assert column.unit and len(column.doc) > 10, (file.name, column.name)


def test_the_contract_keys_are_design_md_s_and_every_reject_reason_is_counted(written):
    assert set(contract_keys()) == {
        "policy", "throughput_tokens_per_s", "throughput_tokens_per_s_per_gpu", "tps_user_mean", "tps_user_p10",
        "tps_user_p50", "tps_user_p90", "ttft_p50_s", "ttft_p99_s", "requests_arrived", "requests_completed",
        "tokens_generated", "mean_accepted_per_step", "mean_verify_tokens_per_request_step", "mean_batch_requests",
        "simulated_s", "wall_s"}
    assert {f"requests_rejected_{reason}" for reason in REJECT_REASONS} <= set(written["summary.json"])


def test_the_committed_replication_table_is_registered():
    columns = pd.read_csv(REPO / "benchmarks" / "published" / "results" / "replication.csv", nrows=1).columns
    assert [c for c in columns if describe("replication.csv", c) is None] == []
    assert [o.name for o in output_file("replication.csv").columns if o.name not in columns] == []


def test_the_committed_version_spread_table_is_registered():
    columns = pd.read_csv(REPO / "benchmarks" / "published" / "results" / "version_spread.csv", nrows=1).columns
    assert [c for c in columns if describe("version_spread.csv", c) is None] == []
    assert [o.name for o in output_file("version_spread.csv").columns if o.name not in columns] == []
