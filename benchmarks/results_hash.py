"""Hash the results of a fixed set of cases, to show that a refactor changes no answer.

    python benchmarks/results_hash.py [--out hashes.json] [--ignore-key KEY ...]

Each case is a scenario the project ships (every sweep variant of
`scenarios/default.yaml` and `scenarios/deepseek-v3-h200.yaml` at a light
and a heavy load, the policies those files do not sweep, chunked prefill,
tight KV) or one of the shared contract scenarios, run for a short horizon.
A case's hash covers its requests and steps frames and its summary (less
wall time). Run it before and after a change; the two outputs must be equal.
A change that adds a summary key changes every hash; `--ignore-key KEY`
leaves that key out, so the run after the change shows that nothing else moved.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import yaml

from specplan.simulator.engine.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.merge import apply_load, apply_variant, strip_study_blocks

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
    result = simulate(scenario_from_mapping(raw, folder))
    digest = hashlib.sha256()
    digest.update(result.requests.to_csv(index=False).encode())
    digest.update(result.steps.to_csv(index=False).encode())
    summary = {k: v for k, v in result.summary.items() if k != "wall_s" and k not in ignored}
    digest.update(json.dumps(summary, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the hashes as JSON here")
    parser.add_argument("--duration", type=float, default=6.0, help="simulated seconds per case (default 6)")
    parser.add_argument("--ignore-key", action="append", default=[], metavar="KEY",
                        help="leave this summary key out of the hash (a key the change adds)")
    args = parser.parse_args(argv)
    ignored = tuple(args.ignore_key)
    default, deepseek = REPO / "scenarios" / "default.yaml", REPO / "scenarios" / "deepseek-v3-h200.yaml"
    cases = {**sweep_cases(default, (16, 128), args.duration), **extra_cases(default, args.duration),
             **sweep_cases(deepseek, (32,), args.duration)}
    hashes = {name: case_hash(raw, default.parent, ignored) for name, raw in cases.items()}
    if SHARED.exists():
        hashes |= {name: case_hash(raw, SHARED / "scenarios", ignored) for name, raw in contract_cases().items()}
    for name, value in hashes.items():
        print(f"{value}  {name}")
    if args.out:
        args.out.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
