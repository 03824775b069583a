"""Where a plan's probe runs are kept: a folder of `<key>.json` records, or memory for a remote worker.

A probe run (one cluster size, one seed) is stored by its point key
(`specplan.simulator.study.points.point_key`: the resolved scenario and the
digests of every file it reads and of specplan's code), exactly as sweep
points are. Locally the planner reads and writes the folder itself. A Ray
task may not share the driver's disk, so it gets the records the driver
already holds (`known`) and returns the new ones (`fresh`) for the driver to
write: the same runs, the same files, wherever the probe ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specplan.simulator.scenario import Scenario
from specplan.simulator.study.points import load_point, point_record, write_record


class ProbeStore:
    """get(key) → a stored run's summary or None; put(key, summary, scenario) keeps a new run."""

    def __init__(self, folder: Path | None, known: dict[str, dict[str, Any]] | None = None) -> None:
        self.folder = folder
        self.known = dict(known or {})
        self.fresh: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        if key in self.known:
            return self.known[key]
        return load_point(self.folder, key) if self.folder is not None else None

    def put(self, key: str, summary: dict[str, Any], scenario: Scenario) -> None:
        record = point_record(key, summary, scenario)
        if self.folder is not None:
            write_record(self.folder, key, record)
        else:
            self.fresh[key] = record
        self.known[key] = summary


def stored_summaries(folder: Path | None) -> dict[str, dict[str, Any]]:
    """Every whole record of a probes folder, by key (what a remote probe may reuse)."""
    if folder is None or not folder.is_dir():
        return {}
    out = {}
    for path in sorted(folder.glob("*.json")):
        summary = load_point(folder, path.stem)
        if summary is not None:
            out[path.stem] = summary
    return out


def write_fresh(folder: Path | None, fresh: dict[str, dict[str, Any]]) -> None:
    """The driver's side: write the records a remote probe returned."""
    if folder is None:
        return
    for key, record in fresh.items():
        write_record(folder, key, record)
