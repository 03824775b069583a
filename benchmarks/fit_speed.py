"""Wall time of `specplan fit` on N runs (issue 48's goal: ten runs in under a minute on two cores).

The runs are the round trip's: a Llama-3.1-8B deployment on one H200 (the vLLM built-in) simulated with known
terms (host 0.8 ms, verify scale 1.3), driven by a bench client at N concurrencies (1 to 128, 4 prompts each,
1,024-token prompts, 256-token outputs) and written as vllm bench serve / sglang.bench_serving files; `specplan
fit` is then run on them REPEATS times in a fresh process. Prints the median wall time and the terms it recovered.
Pin it to two cores as the goal reads:

    taskset -c 0,1 .venv/bin/python benchmarks/fit_speed.py [--runs 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from specplan.simulator.engine.simulation import simulate
from specplan.simulator.study.fit.fitting import Point, RunSimulator
from specplan.simulator.study.fit.runs import MeasuredRun
from specplan.simulator.study.fit.writers import sglang_bench_serving_line, vllm_bench_serve_json

REPO = Path(__file__).resolve().parents[1]
CONCURRENCIES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192)
DEPLOYMENT = {"name": "llama-h200-fit-speed", "seed": 5, "horizon": {"requests": 40},
              "hardware": {"profile": "builtin:h200-llama3.1-8b-vllm"},
              "engine": {"max_batch_requests": 256, "kv_capacity_tokens": 800_000},
              "workload": {"arrivals": {"kind": "bench_client", "num_prompts": 32, "max_concurrency": 8},
                           "prompt_tokens": {"kind": "fixed", "value": 1024},
                           "output_tokens": {"kind": "fixed", "value": 256}}}


def write_runs(folder: Path, count: int) -> list[Path]:
    sim = RunSimulator(folder / "deployment.yaml", [], folder)
    files = []
    for i, c in enumerate(CONCURRENCIES[:count]):
        client = "sglang" if i % 2 else "vllm"
        summary = simulate(sim.scenario(MeasuredRun(f"c{c}", client, c, 4 * c, 1024, 256), Point(0.8, 1.3))).summary
        path = folder / f"c{c}.{'jsonl' if client == 'sglang' else 'json'}"
        path.write_text(sglang_bench_serving_line(summary, 1024, 256) if client == "sglang"
                        else vllm_bench_serve_json(summary, "llama", 4 * c))
        files.append(path)
    return files


def main() -> int:
    ap = argparse.ArgumentParser(prog="fit_speed.py", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help=f"runs to fit (at most {len(CONCURRENCIES)})")
    ap.add_argument("--repeats", type=int, default=3, help="fits timed (the median is reported)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "deployment.yaml").write_text(yaml.safe_dump(DEPLOYMENT))
        files = write_runs(folder, min(args.runs, len(CONCURRENCIES)))
        times = []
        for i in range(args.repeats):
            command = [sys.executable, "-m", "specplan", "fit", *map(str, files), "--scenario",
                       str(folder / "deployment.yaml"), "--out", str(folder / f"fit{i}"), "--quiet"]
            start = time.perf_counter()
            subprocess.run(command, cwd=REPO, check=True, env={"SPECPLAN_CACHE_DIR": str(folder / "cache"),
                                                               "PATH": "/usr/bin:/bin"})
            times.append(time.perf_counter() - start)
        terms = yaml.safe_load((folder / "fit0" / "calibration.yaml").read_text())["terms"]
    print(f"specplan fit on {len(files)} runs: median {statistics.median(times):.1f} s over {len(times)} "
          f"({', '.join(f'{t:.1f}' for t in times)} s)")
    print(f"recovered host {terms['host_cycle_ms']['value']} ms (truth 0.8), verify scale "
          f"{terms['verify_scale']['value']} (truth 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
