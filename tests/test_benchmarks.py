"""The benchmarks behind the README's performance figures still run (tiny sizes; no timing is asserted).

Speed itself is measured by running them (README, "Performance"), never by
a timed test; this only catches a benchmark broken by a change of the code
it exercises. Every script under benchmarks/ imports and parses its
arguments (`--help`); those with a tiny size run at it (`RUNS`), so none can
rot silently (engine_terms.py did, when `apply_load` gained its arrivals).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

RUNS = {
    "sim_speed": (["--repeats", "1", "--duration", "12"], "dspark-async"),
    "request_floor": (["--repeats", "1", "--duration", "12"], "simulated output tokens in the floor"),
    "draft_speed": (["--requests", "8", "--steps", "5", "--repeats", "1"], "outcomes only"),
    "policy_speed": (["--requests", "8", "--repeats", "1"], "dspark-async"),
    "bypass_gain": (["--duration", "4", "--users", "1", "--seeds", "2"], "throughput gain"),
    "fleet_plan": (["--rate", "96", "--check-rate", "48", "--seeds", "1", "--sample", "2", "--compare-seeds", "2"],
                   "one run of"),
    "search_time": (["--duration", "30", "--seeds", "1", "--max-replicas", "2", "--backends", "local"],
                    "identical plan.csv rows"),
    "results_hash": (["--duration", "2", "--engine-paths", "--ignore-key", "draft_record"], "engine/split-fleet"),
    "engine_terms": (["--smoke", "--duration", "2"], "256 users  MTP-1"),
    "fit_speed": (["--runs", "3", "--repeats", "1"], "recovered host"),
    "fit_devset": (["--census"], "deployments; the most concurrencies one publishes"),
    "calibrate_speed": (["--cases", "vllm-41044-v4-flash-mtp-b200", "--workers", "1"], "pairs simulated"),
    "dp_speed": (["--repeats", "1"], "engine steps/s"),
    "agentic_speed": (["--repeats", "1", "--duration", "20", "--lanes", "4"], "engine steps per reference step"),
    "extend_op": (["--cases", "sglang-cookbook-v4-flash-b300-fp4-low-latency", "--workers", "1"],
                  "c = 1, host: x86"),
}
SCRIPTS = sorted(path.stem for path in (REPO / "benchmarks").glob("*.py"))


@pytest.mark.slow("runs each benchmark script in a subprocess")
@pytest.mark.parametrize("name", sorted(RUNS))
def test_benchmark_runs(name):
    args, expected = RUNS[name]
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / f"{name}.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stdout


@pytest.mark.slow("starts each benchmark script in a subprocess")
@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_imports_and_parses_its_arguments(name):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / f"{name}.py"), "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith(f"usage: {name}.py"), done.stderr[-2000:]
