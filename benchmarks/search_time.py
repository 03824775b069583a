"""How long the README's deployment search takes, on local processes and on Ray, and that both agree.

    .venv/bin/python benchmarks/search_time.py [--scenario scenarios/azure-conv-search.yaml] [--rate-scale 4]
        [--seeds 2] [--max-replicas 8] [--workers 2] [--backends local,ray] [--duration S]

Runs `plan_search` on the scenario's `search:` block (the Azure conversation
trace grown `--rate-scale` times by default) once per backend, each into a
fresh temporary --out folder (nothing reused), and prints per backend the
wall time, the deployments, the probe runs simulated, the winner; then
whether every backend's plan.csv rows are identical. `--duration` shortens
the trace window and horizon (a quick check). Ray: a local Ray with
`--workers` CPUs, started and stopped by the run (RAY_AUTH_MODE=disabled).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from specplan.simulator.scenario.load import read_yaml
from specplan.simulator.scenario.study import parse_bound
from specplan.simulator.study.options import PlanOptions, RunOptions
from specplan.simulator.study.plan.plan_json import deployment_rows
from specplan.simulator.study.plan.run import plan_search
from specplan.simulator.study.plan.search import DeploymentPlan
from specplan.simulator.study.plan.target import Target

REPO = Path(__file__).resolve().parents[1]


def scenario(path: Path, duration_s: float | None) -> dict:
    """The scenario as a mapping, its trace path absolute, optionally a shorter window and horizon."""
    raw = read_yaml(path)
    arrivals = raw["workload"]["arrivals"]
    if "path" in arrivals:
        arrivals["path"] = str((path.parent / arrivals["path"]).resolve())
    if duration_s is not None:
        arrivals["duration_s"] = duration_s
        raw["horizon"] = {"duration_s": duration_s, "warmup_s": min(raw["horizon"]["warmup_s"], duration_s / 5)}
    return raw


def timed(raw: dict, target: Target, backend: str, args: argparse.Namespace) -> tuple[DeploymentPlan, float, int]:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        plan = plan_search(raw, target, RunOptions(workers=args.workers, backend=backend, out_dir=out, progress=False),
                           PlanOptions(max_replicas=args.max_replicas))
        wall = time.perf_counter() - start
        runs = len(list((Path(out) / "probes").glob("*.json")))
    return plan, wall, runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default=str(REPO / "scenarios" / "azure-conv-search.yaml"))
    p.add_argument("--rate-scale", type=float, default=4.0)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--max-replicas", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--backends", default="local,ray")
    p.add_argument("--duration", type=float, help="trace window and horizon, s (default: the scenario's)")
    args = p.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    raw = scenario(Path(args.scenario), args.duration)
    bounds = tuple(parse_bound(text) for text in raw["sla"]["bounds"])
    target = Target("rate_scale", args.rate_scale, bounds, seeds=args.seeds)
    rows = {}
    for backend in args.backends.split(","):
        plan, wall, runs = timed(raw, target, backend, args)
        rows[backend] = deployment_rows(plan)
        winner = plan.winner.info.label if plan.winner else "none"
        print(f"{backend}: {wall:.1f} s wall, {len(plan.deployments)} deployments, {runs} probe runs, "
              f"{args.workers} worker(s); winner {winner}")
    frames = list(rows.values())
    same = all(f.equals(frames[0]) for f in frames[1:])
    print("identical plan.csv rows across backends: " + ("yes" if same else "NO"))
    if not same:
        print(pd.concat(rows, names=["backend"]).to_string())


if __name__ == "__main__":
    main()
