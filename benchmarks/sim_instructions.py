"""Simulator cost as instructions (callgrind), this checkout against another: a comparison noise cannot move.

Wall-clock benchmarks (sim_speed.py) on a shared machine move by 2x from
minute to minute, so an ABBA comparison of two commits can stay inside its
own noise. Valgrind's callgrind counts the instructions a process runs, the
same for the same binary, inputs and environment whatever else the machine
does. This runs sim_speed.py's standard workload (8 replicas x 64
closed-loop users, γ = 3) under callgrind at two horizons for each policy,
in this checkout and in `--other` (another checkout with its own .venv), and
prints the instructions per simulated second: the difference of the two
horizons, so imports and start-up cancel out. A ratio under 1 means this
checkout simulates with fewer instructions. Every numeric library runs one
thread and Python one hash seed: an idle BLAS thread's spinning is counted
too, and made two runs of the same commit differ by 30% before.

    .venv/bin/python benchmarks/sim_instructions.py --other ../ref-checkout [--short 4 --long 16]
        [--policy static --policy dspark-async]

Needs valgrind on PATH (Debian's package); each run takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# one thread for every numeric library (an idle BLAS thread spins, and its spinning is counted) and one hash seed:
# with these the same run counts the same instructions to within a few hundred
QUIET_ENV = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
             "MKL_NUM_THREADS": "1"}
RUN = """
import copy, sys
from pathlib import Path
sys.path.insert(0, str(Path.cwd() / "benchmarks"))
from sim_speed import POLICIES, STANDARD
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
raw = copy.deepcopy(STANDARD)
raw["horizon"] = {"duration_s": float(sys.argv[1]), "warmup_s": 0}
raw["policy"] = POLICIES[sys.argv[2]]
simulate(scenario_from_mapping(raw, Path.cwd()))
"""


def instructions(checkout: Path, duration_s: float, policy: str) -> int:
    """Instructions callgrind counts for one simulation of `duration_s` simulated seconds in `checkout`."""
    python = checkout / ".venv" / "bin" / "python"
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", str(python), "-c", RUN,
                           str(duration_s), policy], cwd=checkout, capture_output=True, text=True, env=QUIET_ENV)
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed in {checkout}: {done.stderr.strip().splitlines()[-1:]}")
    return int(found.group(1))


def per_simulated_s(checkout: Path, short_s: float, long_s: float, policy: str) -> float:
    return (instructions(checkout, long_s, policy) - instructions(checkout, short_s, policy)) / (long_s - short_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", type=Path, required=True, help="another checkout with its own .venv (the reference)")
    ap.add_argument("--short", type=float, default=4.0, help="the short horizon, simulated s")
    ap.add_argument("--long", type=float, default=16.0, help="the long horizon, simulated s")
    ap.add_argument("--policy", action="append", choices=("static", "dspark-async"), help="default: both")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("sim_instructions: valgrind is not on PATH (apt-get install valgrind)", file=sys.stderr)
        raise SystemExit(2)
    here = Path(__file__).resolve().parents[1]
    print(f"instructions per simulated second, standard workload, horizons {args.short:g} and {args.long:g} s")
    for policy in args.policy or ["static", "dspark-async"]:
        ours = per_simulated_s(here, args.short, args.long, policy)
        theirs = per_simulated_s(args.other.resolve(), args.short, args.long, policy)
        print(f"  {policy:<13} this {ours / 1e6:,.1f} M   other {theirs / 1e6:,.1f} M   ratio {ours / theirs:.3f}")


if __name__ == "__main__":
    main()
