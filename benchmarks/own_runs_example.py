"""Write the example runs of docs/guides/own-runs.md: scenarios/own-runs/deployment.yaml simulated with known terms.

They stand in for a team's own benchmark files: the deployment driven by a bench client at concurrency 4, 16 and
64 (4 prompts per slot, 1,024-token prompts, 256-token outputs) with the host cycle at 0.6 ms and the step times
x 1.15, written as vllm bench serve (c4, c64) and sglang.bench_serving (c16) write them, then each run's figures
moved by a stated few percent (+2%, -1.5%, +1%) so that the fit has a spread to report, as real runs do.

    .venv/bin/python benchmarks/own_runs_example.py [--out scenarios/own-runs/runs]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specplan.simulator.engine.simulation import simulate
from specplan.simulator.study.fit.fitting import Point, RunSimulator
from specplan.simulator.study.fit.runs import MeasuredRun
from specplan.simulator.study.fit.writers import sglang_bench_serving_line, vllm_bench_serve_json

REPO = Path(__file__).resolve().parents[1]
TRUTH = (0.6, 1.15)
RUNS = ((4, "vllm", 1.02), (16, "sglang", 0.985), (64, "vllm", 1.01))   # concurrency, client, throughput factor


def main() -> int:
    ap = argparse.ArgumentParser(prog="own_runs_example.py", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "scenarios" / "own-runs" / "runs"), help="folder for the run files")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sim = RunSimulator(REPO / "scenarios" / "own-runs" / "deployment.yaml", [], out / ".work")
    for c, client, factor in RUNS:
        summary = dict(simulate(sim.scenario(MeasuredRun(f"c{c}", client, c, 4 * c, 1024, 256), Point(*TRUTH))).summary)
        prefix = "sglang_bench_serving" if client == "sglang" else "vllm_bench_serve"
        for key in (f"{prefix}.output_throughput_tok_s", f"{prefix}.request_throughput_req_s"):
            summary[key] *= factor
        for key in (f"{prefix}.mean_tpot_ms", f"{prefix}.median_tpot_ms", f"{prefix}.duration_s"):
            summary[key] /= factor
        path = out / f"c{c}.{'jsonl' if client == 'sglang' else 'json'}"
        path.write_text(sglang_bench_serving_line(summary, 1024, 256) if client == "sglang"
                        else vllm_bench_serve_json(summary, "meta-llama/Llama-3.1-8B-Instruct", 4 * c))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
