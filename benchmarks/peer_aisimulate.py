"""AISimulate beside specplan on the development set: the cells it can express, the same tables, the same lengths.

    python benchmarks/peer_aisimulate.py [--aisimulate PATH] [--cases DIR] [--record CSV] [--out DIR] [--write CSV]

AISimulate (ai-dynamo, the nightly wheel; not a dependency of specplan: install
it into a venv of its own and pass its `aisimulate` executable, or have it on
PATH) predicts each cell the development set runs (benchmarks/published) that
it can express, from the cell's own description:

- the target built-in's AIConfigurator query (model, system, backend and its
  version, TP / EP / DP, MoE backend: the `source` line of the profile's
  header), so both tools read the same database tables;
- speculation: MTP as `nextn` = drafted tokens with `nextn_accepted` = AL - 1
  at the acceptance the case assumes or publishes (the same AL specplan
  draws); DSpark cells are not expressed (AISimulate 0.13 rejects
  DeepSeek-V4 DSpark, whose drafter needs its sliding-window KV cap);
- the client: `concurrency` load at the figure's c over the figure's N
  prompts, prefix caching off (cache-cold); lengths as the case's
  length_rule says: uniform as bench_serving's own draws (seed 42, N prompt
  lengths then N output lengths) in a mooncake trace of unique blocks,
  fixed as a synthetic source;
- SGLang's caps: max_sequences = the scenario's max_batch_requests.

Each figure is read from AISimulate's prediction.json with the statistic
the figure names (median_ttft -> median_ttft_ms, mean_tpot -> mean_tpot_ms,
output per GPU -> output_throughput_tok_s / GPUs). `--write` saves its
predictions (benchmarks/published/results/peer_aisimulate.csv: with the
AISimulate version and command) and the script prints specplan's predicted
|error| (from the committed replication record, `--record`) beside
AISimulate's, per figure and per kind of cell and GPU, over the figures both
predicted. Without AISimulate it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from specplan.hwprofiles import load_profile
from specplan.simulator.drafters.curves import expected_tau
from specplan.simulator.drafters.presets import preset_curves
from specplan.simulator.scenario import load_scenario
from specplan.simulator.study.case_runner import CaseRunner, availability, kind
from specplan.simulator.study.published import GOAL_METRICS, RATIO_METRICS, Case, Figure, read_case

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "benchmarks" / "published"
RECORD = PUBLISHED / "results" / "replication.csv"
PEER_CSV = PUBLISHED / "results" / "peer_aisimulate.csv"
BENCH_SEED = 42          # sglang.bench_serving's --seed default: its random lengths, drawn once
TRACE_BLOCK = 512        # mooncake hash block (unique per request: no prefix is shared)
KEY = ["source", "workload", "arm", "metric", "concurrency"]
# figure metric -> (prediction.json key, divided by the GPUs)
PEER_METRICS = {"median_ttft": ("median_ttft_ms", False), "mean_ttft": ("mean_ttft_ms", False),
                "median_tpot": ("median_tpot_ms", False), "mean_tpot": ("mean_tpot_ms", False),
                "output_throughput": ("output_throughput_tok_s", False),
                "total_throughput": ("total_throughput_tok_s", False),
                "output_throughput_per_gpu": ("output_throughput_tok_s", True),
                "total_throughput_per_gpu": ("total_throughput_tok_s", True)}


def find_aisimulate(given: str | None) -> Path | None:
    found = given or shutil.which("aisimulate")
    return Path(found) if found and Path(found).is_file() else None


def aisimulate_version(executable: Path) -> str:
    """The installed distribution's version, asked of the interpreter beside the executable."""
    python = executable.with_name("python")
    done = subprocess.run([str(python if python.exists() else sys.executable), "-c",
                           "import importlib.metadata as m; print(m.version('aisimulate'))"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def why_not(case: Case) -> str | None:
    """Why AISimulate cannot express the case (None: it can)."""
    reason = availability(case)
    if reason:
        return f"specplan cannot run it either ({reason.split(':')[0]})"
    scenario = load_scenario(case.folder / "scenario.yaml")
    if scenario.drafter.family not in ("none", "mtp"):
        return f"{scenario.drafter.family} drafter (AISimulate 0.13 rejects DeepSeek-V4 DSpark)"
    if "length_rule" not in case.source and not fixed_lengths(case.folder / "scenario.yaml"):
        return "lengths neither a stated length rule nor fixed"
    return None


def fixed_lengths(scenario_path: Path) -> tuple[int, int] | None:
    workload = yaml.safe_load(scenario_path.read_text())["workload"]
    prompt, output = workload.get("prompt_tokens", {}), workload.get("output_tokens", {})
    if prompt.get("kind") == "fixed" and output.get("kind") == "fixed":
        return int(prompt["value"]), int(output["value"])
    return None


def query(case: Case, scenario: Any) -> dict[str, str]:
    """The target built-in's AIConfigurator query: the flags of its header's `source` line."""
    source = load_profile(scenario.hardware.profile).provenance["source"]
    words = shlex.split(source[source.index("specplan profile"):].rstrip(")"))
    return {words[i][2:]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("--")}


def accepted_tokens(scenario: Any) -> tuple[int, float]:
    """MTP's drafted tokens and its AL - 1 as the scenario draws them (a preset's curve or per-position rates)."""
    drafter = scenario.drafter
    if drafter.family == "none":
        return 0, 0.0
    acceptance = drafter.acceptance
    if getattr(acceptance, "preset", None):
        curve = preset_curves(acceptance.preset, drafter.family, drafter.block_size)["chat"]
    else:
        curve = list(acceptance.per_position["chat"])
    return drafter.block_size, float(expected_tau(curve)) - 1.0


def engine_config(case: Case, scenario: Any) -> dict[str, Any]:
    q = query(case, scenario)
    tp, ep, dp = (int(q.get(k, 1)) for k in ("tp", "ep", "dp"))
    parallelism = ({"tensor": 1, "attention_data": dp, "moe_expert": ep} if dp > 1
                   else {"tensor": tp, "moe_expert": ep} if ep > 1 else {"tensor": tp, "moe_tensor": tp})
    nextn, accepted = accepted_tokens(scenario)
    engine: dict[str, Any] = {"mode": "aggregated", "model": q["model"], "hardware": q["system"],
                              "backend": q["backend"], "backend_version": q["backend-version"]}
    if "moe-backend" in q:
        engine["moe_backend"] = q["moe-backend"]
    if nextn:
        engine.update(nextn=nextn, nextn_accepted=round(accepted, 4))
    engine["workers"] = {"aggregated": {"parallelism": parallelism,
                                        "scheduler": {"max_sequences": int(scenario.engine.max_batch_requests)},
                                        "kv_cache": {"prefix_caching": False}}}
    return engine


def traffic(case: Case, figure: Figure, prompts: int, folder: Path) -> dict[str, Any]:
    load = {"type": "concurrency", "concurrency": figure.concurrency}
    rule = case.source.get("length_rule")
    if rule is None or rule["rule"] == "fixed":
        prompt, output = ((rule["input_tokens"], rule["output_tokens"]) if rule
                          else fixed_lengths(case.folder / "scenario.yaml") or (0, 0))
        return {"source": {"type": "synthetic", "input_tokens": prompt, "output_tokens": output}, "load": load,
                "stop": {"requests": prompts}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"uniform-{rule['input_tokens']}-{rule['output_tokens']}-n{prompts}.jsonl"
    write_trace(path, prompts, rule["input_tokens"], rule["output_tokens"])
    return {"source": {"type": "trace", "paths": [str(path.resolve())], "format": "mooncake"}, "load": load}


def write_trace(path: Path, prompts: int, input_tokens: int, output_tokens: int) -> None:
    """bench_serving's uniform draws as a mooncake trace, every request its own blocks."""
    rng = np.random.RandomState(BENCH_SEED)
    inputs, outputs = rng.randint(1, input_tokens + 1, prompts), rng.randint(1, output_tokens + 1, prompts)
    lines, block = [], 0
    for n_in, n_out in zip(inputs, outputs, strict=True):
        blocks = -(-int(n_in) // TRACE_BLOCK)
        lines.append(json.dumps({"timestamp": 0, "input_length": int(n_in), "output_length": int(n_out),
                                 "hash_ids": list(range(block, block + blocks))}))
        block += blocks
    path.write_text("\n".join(lines) + "\n")


def predict(executable: Path, config: dict[str, Any], folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    done = subprocess.run([str(executable), "predict", "-c", str(folder / "config.yaml"), "--output-dir",
                           str(folder), "--overwrite"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = f"{done.stdout}\n{done.stderr}".strip().splitlines() or ["no output"]
        reason = next((line for line in lines if "predict failed" in line), lines[-1])
        raise RuntimeError(re.sub(r"/\S*/site-packages/", "", reason.split(";")[0])[:200])  # no local paths
    return json.loads((folder / "prediction.json").read_text())


def case_rows(executable: Path, case: Case, out: Path, version: str) -> list[dict[str, Any]]:
    """AISimulate's value of every non-ratio figure of the case (one run per arm, concurrency and prompts)."""
    runner, rows, runs = CaseRunner(case, out), [], {}
    for figure in case.figures:
        if figure.metric in RATIO_METRICS or figure.metric not in PEER_METRICS:
            continue
        prompts = runner.prompts(figure)
        scenario = load_scenario(case.folder / "scenario.yaml", runner.overrides(figure, figure.arm))
        config = {"traffic": traffic(case, figure, prompts, out), "engine": engine_config(case, scenario)}
        run = out / case.name / f"{figure.arm}-c{figure.concurrency}-n{prompts}"
        key = (figure.arm, figure.concurrency, prompts)
        try:
            runs[key] = runs.get(key) or predict(executable, config, run)
            name, per_gpu = PEER_METRICS[figure.metric]
            value = runs[key][name] / (scenario.hardware.gpus_per_replica if per_gpu else 1)
            status = "ok"
        except RuntimeError as exc:
            value, status = math.nan, f"aisimulate failed: {exc}"
        scale = figure.value / figure.published if figure.published else 1.0  # the summary unit -> as published
        rows.append({"source": case.name, "kind": kind(case), "gpu": case.source["gpus"]["type"],
                     "workload": figure.workload, "arm": figure.arm, "metric": figure.metric,
                     "concurrency": figure.concurrency, "published": figure.published, "unit": figure.unit,
                     "aisimulate_value": value / scale, "aisimulate_error": value / figure.value - 1.0,
                     "status": status, "aisimulate_version": version,
                     "command": f"aisimulate predict -c CONFIG (engine: {json.dumps(config['engine'], sort_keys=True)}; "
                                f"traffic: {traffic_words(config['traffic'])})"})
    return rows


def traffic_words(config: dict[str, Any]) -> str:
    source = config["source"]
    lengths = (f"synthetic {source['input_tokens']}/{source['output_tokens']}" if source["type"] == "synthetic"
               else f"mooncake trace {Path(source['paths'][0]).name} (bench_serving's uniform draws, seed {BENCH_SEED})")
    return f"{lengths}, concurrency {config['load']['concurrency']}"


def side_by_side(peer: pd.DataFrame, record: pd.DataFrame) -> pd.DataFrame:
    """Per figure both tools predicted: published, each tool's value and signed error."""
    mine = record[record["status"] == "ok"][[*KEY, "predicted_value", "predicted_error"]]
    both = peer[peer["status"] == "ok"].merge(mine, on=KEY, how="inner")
    return both.rename(columns={"predicted_value": "specplan_value", "predicted_error": "specplan_error"})


def kind_table(both: pd.DataFrame) -> pd.DataFrame:
    """Median |error| of each tool over the goal figures, per kind of cell (all GPUs, then each GPU) and overall."""
    goal = both[both["metric"].isin(GOAL_METRICS)]
    rows = []
    for kind_name, part in goal.groupby("kind", sort=True):
        for gpu, sub in [("all", part), *part.groupby("gpu", sort=True)]:
            rows.append(summary_row(str(kind_name), str(gpu), sub))
    rows.append(summary_row("all", "all", goal))
    return pd.DataFrame(rows)


def summary_row(kind_name: str, gpu: str, part: pd.DataFrame) -> dict[str, Any]:
    return {"kind": kind_name, "gpu": gpu, "figures": len(part),
            "specplan_median": part["specplan_error"].abs().median(),
            "aisimulate_median": part["aisimulate_error"].abs().median(),
            "specplan_max": part["specplan_error"].abs().max(), "aisimulate_max": part["aisimulate_error"].abs().max()}


def print_tables(both: pd.DataFrame, kinds: pd.DataFrame, left_out: dict[str, str], failed: pd.DataFrame) -> None:
    print(f"{'source':58} {'metric':26} {'c':>5} {'published':>10} {'specplan':>9} {'AISim':>9}")
    for _, r in both.iterrows():
        print(f"{r['source']:58} {r['metric']:26} {r['concurrency']:>5} {r['published']:>10.4g} "
              f"{r['specplan_error']:>+9.1%} {r['aisimulate_error']:>+9.1%}")
    print("\nmedian / max |error| over the throughput and TPOT figures both predicted (TTFT in no statistic):")
    print(f"{'kind':16} {'GPU':6} {'figures':>7}  {'specplan':>17}  {'AISimulate':>17}")
    for _, r in kinds.iterrows():
        print(f"{r['kind']:16} {r['gpu']:6} {r['figures']:>7}  {r['specplan_median']:>7.1%} / {r['specplan_max']:>7.1%}"
              f"  {r['aisimulate_median']:>7.1%} / {r['aisimulate_max']:>7.1%}")
    for name, reason in left_out.items():
        print(f"not expressed: {name}: {reason}")
    for (name, c, status), _part in failed.groupby(["source", "concurrency", "status"], sort=True):
        print(f"AISimulate failed: {name} c={c}: {status.removeprefix('aisimulate failed: ')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aisimulate", help="the aisimulate executable (default: on PATH)")
    parser.add_argument("--cases", default=str(PUBLISHED), help="a folder of replication cases")
    parser.add_argument("--record", default=str(RECORD), help="specplan's replication.csv to compare with")
    parser.add_argument("--out", default="out/peer_aisimulate", help="AISimulate's configs, traces and reports")
    parser.add_argument("--write", nargs="?", const=str(PEER_CSV), help=f"save the predictions (default {PEER_CSV})")
    args = parser.parse_args()
    executable = find_aisimulate(args.aisimulate)
    if executable is None:
        print("aisimulate is not installed: install the nightly wheel into a venv of its own "
              "(pip install aisimulate==0.13.0.devN) and pass --aisimulate VENV/bin/aisimulate", file=sys.stderr)
        return 2
    version = aisimulate_version(executable)
    cases = [read_case(p) for p in sorted(Path(args.cases).iterdir()) if (p / "source.yaml").exists()]
    left_out = {case.name: reason for case in cases if (reason := why_not(case))}
    rows = [row for case in cases if case.name not in left_out
            for row in case_rows(executable, case, Path(args.out), version)]
    peer = pd.DataFrame(rows)
    if args.write:
        peer.to_csv(args.write, index=False)
    both = side_by_side(peer, pd.read_csv(args.record))
    print(f"AISimulate {version} ({executable}) beside specplan ({args.record})")
    print_tables(both, kind_table(both), left_out, peer[peer["status"] != "ok"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
