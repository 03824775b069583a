"""The calibration table written from a calibrated replication: a row per engine version, layout kind and model.

    write_table(path, members, folds, grid, command)     `specplan replicate ... --calibrate --write-table PATH`

Place in the data flow: `replicate.py` fits the folds (transfer.py) over the
simulated grid (calibrate.py) and, with `--write-table`, hands them here; the
file's format and how a scenario takes a row are the scenario layer's
(specplan.simulator.scenario.calibration_table). The table is written by this
command only, never by hand: its provenance (the command, the date, the
cases, GPUs, models and measured engine versions of each row) is in it.

A row is shipped where its transfer was checked: its goal figures span at
least two GPUs, so the leave-one-GPU-out folds ran. Any other row (one GPU
only) is listed under `not_shipped` with that reason, and a scenario of its
engine, version, layout and model runs the physics alone. Each term's interval is
the range the leave-one-GPU-out folds chose (how stable the fit is when a
GPU is taken away).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from specplan.engines.eager import PUBLIC_EAGER_COST
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.scenario.calibration_table import LAYOUT_WORDS, TABLE_FORMAT
from specplan.simulator.study.replication.calibrate import Grid, figure_key
from specplan.simulator.study.replication.case_runner import Params, model_key, signed_error
from specplan.simulator.study.replication.transfer import (
    EXTEND_METRICS,
    FIT_METRICS,
    TRANSFER_MODES,
    Folds,
    Member,
    RowKey,
    fitted_on,
)

MIN_GPUS = 2   # a row is shipped only where leave-one-GPU-out could check it
DP_SYNC = ("inside host_cycle_ms: the DP-attention ranks' sync is paid on every step as host time is, and runs of "
           "one layout cannot tell the two apart")
EAGER = ("not fitted: no eager / graph pair among the development set's serving figures separates an eager step's "
         "surcharge from the host cycle; the engine's own rule prices it")
EXTEND_NONE = ("not fitted: no case of this row runs an engine that prices a step carrying prompt tokens by its kernel "
               "launches")
TTFT = ("not fitted: the TTFT figures pick extend_op_us, and no engine key prices a per-request TTFT cost")


def write_table(path: Path, members: list[Member], folds: Folds, grid: Grid, command: str,
                priced: set[str] | frozenset[str] = frozenset(), extends: tuple[float | None, ...] = (None,)) -> Path:
    """The table at `path` (its version one past the table already there, else 1); `priced`: the cases whose
    engine prices an extend step by its launches (the extend term is fitted for a row that has one), `extends`:
    the extend values the fits chose among."""
    rows, not_shipped = [], []
    for row in sorted({m.row for m in members}):
        part = [m for m in members if m.row == row and m.goal]
        gpus = sorted({m.gpu for m in part})
        params = folds.chosen.get(("calibrated", row, ""))
        if params is None:
            not_shipped.append({**match(row), "reason": "no throughput, TPOT or speed-up figure to fit on"})
        elif len(gpus) < MIN_GPUS:
            not_shipped.append({**match(row), "reason": f"its figures are of one GPU ({', '.join(gpus)}): leave one GPU "
                                                        "out cannot check the transfer"})
        else:
            ttft = [m for m in members if m.row == row and m.figure.metric in EXTEND_METRICS]
            rows.append(table_row(row, part, params, folds, grid, Extend(priced, extends, ttft)))
    body = {"format": TABLE_FORMAT, "version": previous_version(path) + 1,
            "written": datetime.date.today().isoformat(), "written_by": command,
            "development_set": {"serving_cases": len({m.case.name for m in members}),
                                "held_out": "every DeepSeek-V4-Pro end-to-end serving figure"},
            "rows": rows, "not_shipped": not_shipped}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body, sort_keys=False, width=120))
    return path


def previous_version(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise SpecplanError(f"--write-table {path}: not a calibration table (not valid YAML); refusing to overwrite it") from None
    if not isinstance(raw, dict) or raw.get("format") != TABLE_FORMAT:
        raise SpecplanError(f"--write-table {path}: not a calibration table ({TABLE_FORMAT}); refusing to overwrite it")
    return int(raw.get("version") or 0)


def match(row: RowKey) -> dict[str, str]:
    return {"engine": row[0], "engine_version": row[1], "layout": row[2], "model": row[3]}


def table_row(row: RowKey, part: list[Member], params: Params, folds: Folds, grid: Grid,
              extend: Extend) -> dict[str, Any]:
    """One shipped row: what it matches, its label, its terms with provenance, what it was fitted on, its errors."""
    runs = {(m.case.name, m.figure.workload, arm, m.figure.concurrency) for m in part for arm in m.figure.arms}
    gpus = sorted({m.gpu for m in part})
    models = sorted({model_key(m.case) for m in part})
    versions = sorted({measured_version(m.case.source) for m in part})
    held = [folds.chosen.get(("transferred", row, gpu)) for gpu in gpus]
    fit = fitted_on(part)
    read = "TPOT" if any(m.figure.metric in FIT_METRICS for m in part) else "throughput and speed-up"
    fitted = (f"fitted on {len(part)} figures of {len(runs)} runs ({', '.join(models)} on {', '.join(gpus)}) by "
              f"specplan replicate --calibrate: the grid point with the smallest median |error| over their {len(fit)} "
              f"{read} figures; interval: the range the leave-one-GPU-out folds chose")
    sync = "; the DP-attention sync is inside it" if row[2] == "dp-attention" else ""
    host = {"value": params.host_ms, "interval": span([p.host_ms for p in held if p is not None]),
            "source": fitted + sync}
    dp_sync = DP_SYNC if row[2] == "dp-attention" else "not applicable: a tensor-parallel layout has no DP sync"
    terms = {"host_cycle_ms": host,
             "verify_scale": {"value": params.verify_scale,
                              "interval": span([p.verify_scale for p in held if p is not None]), "source": fitted},
             "dp_sync_ms": {"value": None, "interval": None, "source": dp_sync},
             "eager_surcharge_ms": {"value": None, "interval": None, "source": EAGER},
             "extend_op_us": extend_term(part, params, held, extend),
             "ttft_per_request_ms": {"value": None, "interval": None, "source": TTFT}}
    label = (f"{len(runs)} public {row[0]} {LAYOUT_WORDS.get(row[2], row[2])} runs of {row[3]} (measured on "
             f"{', '.join(versions)}, simulated as {row[1]}; {', '.join(models)} on {', '.join(gpus)})")
    return {"match": match(row), "label": label, "terms": terms,
            "fitted_on": {"runs": len(runs), "figures": len(part), "cases": sorted({m.case.name for m in part}),
                          "gpus": gpus, "models": models, "measured_versions": versions},
            "errors": {mode: median_abs(part, folds, grid, mode) for mode in TRANSFER_MODES}}


@dataclass(frozen=True)
class Extend:
    """What the extend term of a row is written from: the cases whose engine prices it, the values the fits chose
    among, and the row's TTFT figures (which picked it)."""

    priced: set[str] | frozenset[str]
    values: tuple[float | None, ...]
    ttft: list[Member]


def extend_term(part: list[Member], params: Params, held: list[Params | None], extend: Extend) -> dict[str, Any]:
    """The extend step's host cost per kernel: fitted where the row's cases price it by launches (null: the
    engine's own, the launcher's figure; its interval reads null as that figure)."""
    if not any(m.case.name in extend.priced for m in part):
        return {"value": None, "interval": None, "source": EXTEND_NONE}
    own = PUBLIC_EAGER_COST.per_launch_us
    chosen = [own if p.extend_op_us is None else p.extend_op_us for p in held if p is not None]
    values = ", ".join("the engine's own" if v is None else f"{v:g}" for v in extend.values)
    return {"value": params.extend_op_us, "interval": span(chosen),
            "source": f"chosen by specplan replicate --calibrate among {values} us a kernel (null: the engine's own, "
                      f"the launcher's {own:g} us): the value whose fit (host time and scale on the TPOT figures) has "
                      f"the smallest median |error| over the row's {len(extend.ttft)} TTFT figures, where "
                      f"{sum(m.case.name in extend.priced for m in part)} of its {len(part)} figures run an engine that "
                      "prices a step carrying prompt tokens by its kernel launches; interval: the range the "
                      "leave-one-GPU-out folds chose"}


def span(values: Sequence[float | None]) -> list[float] | None:
    got = [float(v) for v in values if v is not None]
    return [min(got), max(got)] if got else None


def median_abs(part: list[Member], folds: Folds, grid: Grid, mode: str) -> float | None:
    """The median |error| of the row's goal figures in `mode` (None: no fold of the mode could fit)."""
    errors = []
    for m in part:
        params = folds.params(m, mode)
        if params is not None:
            errors.append(abs(signed_error(m.figure, grid[params][figure_key(m.case, m.figure)])))
    return round(float(np.median(errors)), 4) if errors else None


VERSION = re.compile(r"v?(\d+(?:\.\d+)*(?:\.post\d+)?)")


def measured_version(source: dict[str, Any]) -> str:
    """The engine version a case was measured on, short ('0.5.15.post1'; 'an unreleased build' where no release is
    named: a PR branch, a nightly)."""
    text = str((source.get("engine") or {}).get("version", ""))
    found = VERSION.match(text.strip())
    return found.group(1) if found else "an unreleased build"
