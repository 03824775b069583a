"""Writing results: where they go (`--out`), JSON without NaN, the terminal summary table.

Every command that takes `--out` checks it first, before any work, with
`out_folder` or `out_file`: a folder that is a file, a file that is a
folder, or a place that cannot be created or written is one line and exit
status 2. The check creates nothing: a folder appears when the first result
is written into it (the writers make it), so a command refused at any point
before that (a bad scenario, flag or trace) leaves nothing behind. The rule for earlier results: `--out` never overwrites them
without `--force`. A folder "holds results" when one of the command's own
result files is already there; a file `--out` that exists is a result.
Commands whose folder is their resume cache (sweep, demo, tune, plan) are
the exception by design: a re-run reuses every stored point and rewrites
the tables from them, so they take no `--force`.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.jsonsafe import dumps
from specplan.simulator.drafters.vllm_metrics import exposition_text
from specplan.simulator.scenario import write_resolved

RUN_FILES = ("summary.json", "requests.csv", "steps.csv", "scenario.resolved.yaml", "metrics.prom")


def out_folder(path: str | Path, holds: tuple[str, ...] = (), force: bool = False, flag: str = "--out") -> Path:
    """The results folder `path`, which can be created and written (nothing is created here); refuses one
    holding `holds` files unless `force`."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise SpecplanError(f"{flag} {out}: is a file, not a folder")
    check_creatable(out, flag)
    present = [name for name in holds if (out / name).exists()]
    if present and not force:
        raise SpecplanError(f"{flag} {out}: already holds results ({', '.join(present)}); pass --force to "
                            "overwrite them, or choose another folder")
    return out


def out_file(path: str | Path, force: bool = False, flag: str = "--out") -> Path:
    """The result file `path`, whose folder can be created and written (nothing is created here); refuses an
    existing file unless `force`."""
    out = Path(path)
    if out.is_dir():
        raise SpecplanError(f"{flag} {out}: is a folder, not a file")
    check_creatable(out.parent, flag, out)
    if out.exists() and not os.access(out, os.W_OK):
        raise SpecplanError(f"{flag} {out}: cannot write there (permission denied)")
    if out.exists() and not force:
        raise SpecplanError(f"{flag} {out}: already exists; pass --force to overwrite it, or choose another name")
    return out


def check_creatable(folder: Path, flag: str, named: Path | None = None) -> None:
    """`folder` exists as a writable folder, or its nearest existing ancestor is one (so mkdir -p will work);
    every failure (a part of the path that is a file, no permission) as one line."""
    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise SpecplanError(f"{flag} {named or folder}: a part of the path is a file, not a folder")
    check_writable(existing, flag, named or folder)


def check_writable(folder: Path, flag: str, named: Path) -> None:
    """Create and remove a scratch file in `folder` (what permissions alone cannot tell, e.g. for root)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise SpecplanError(f"{flag} {named}: cannot write there ({exc.strerror or exc})") from None


def add_force_arg(p: Any) -> None:
    p.add_argument("--force", action="store_true", help="overwrite results already at --out")


def write_run(result: Any, out_dir: Path) -> None:
    """summary.json, requests.csv, steps.csv (prefill_steps.csv with a prefill pool), scenario.resolved.yaml
    and metrics.prom in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(dumps(result.summary))
    result.requests.to_csv(out_dir / "requests.csv", index=False, float_format="%.9g")
    result.steps.to_csv(out_dir / "steps.csv", index=False, float_format="%.9g")
    if getattr(result, "prefill_steps", None) is not None:   # a prefill pool's steps
        result.prefill_steps.to_csv(out_dir / "prefill_steps.csv", index=False, float_format="%.9g")
    write_resolved(result.scenario, out_dir / "scenario.resolved.yaml")
    write_metrics(result, out_dir)


def write_metrics(result: Any, out_dir: Path) -> None:
    """metrics.prom: vLLM's speculative-decoding counters as a vLLM server would show them after
    this run (the whole run, every replica summed as engine "0"); none when nothing speculates,
    as a vLLM server without a speculative config exports none."""
    scenario = result.scenario
    if not scenario.drafter.speculates:
        return
    counters = result.speculation
    comment = (f"specplan: simulated run of scenario {scenario.name} (seed {scenario.seed}, policy "
               f"{scenario.policy.name}, {result.summary['simulated_s']:g} simulated s, "
               f"{scenario.cluster.replicas} replica(s) summed as engine 0)")
    text = exposition_text(scenario.name, counters.drafts, counters.draft_tokens, counters.accepted_per_position.tolist(),
                           comment=comment)
    (out_dir / "metrics.prom").write_text(text)


ROWS = (
    ("policy", "policy_label", "{}"),
    ("throughput", "throughput_tokens_per_s", "{:,.0f} tok/s"),
    ("throughput / GPU", "throughput_tokens_per_s_per_gpu", "{:,.0f} tok/s"),
    ("tokens/s/user p10 / p50 / p90", ("tps_user_p10", "tps_user_p50", "tps_user_p90"), "{:.1f}"),
    ("TTFT p50 / p99", ("ttft_p50_s", "ttft_p99_s"), "{:.3f} s"),
    ("requests arrived / completed / running / rejected",
     ("requests_arrived", "requests_completed", "requests_running", "requests_rejected"), "{}"),
    ("tokens per request-step (τ)", "mean_accepted_per_step", "{:.3f}"),
    ("verify tokens per request-step (1+ℓ)", "mean_verify_tokens_per_request_step", "{:.3f}"),
    ("mean running requests / replica", "mean_batch_requests", "{:.1f}"),
    ("simulated / wall", ("simulated_s", "wall_s"), "{:.1f} s"),
)


def fmt(template: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return template.format(value)


def summary_table(summary: dict[str, Any], title: str = "") -> str:
    lines = [title] if title else []
    for label, keys, template in ROWS:
        names = keys if isinstance(keys, tuple) else (keys,)
        text = " / ".join(fmt(template, summary.get(k)) for k in names)
        lines.append(f"  {label:<50} {text}")
    ran_out = summary.get("trace_ran_out_s")
    if ran_out is not None:
        lines.append(f"  the trace ran out at {ran_out:g} s of the {summary.get('simulated_s', float('nan')):g} s "
                     f"horizon: measured over the {summary.get('window_s', float('nan')):g} s window to there; the "
                     "run went on so that its requests finish")
    return "\n".join(lines)
