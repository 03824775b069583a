"""What a point's result depends on beyond its resolved scenario: the files it reads and specplan's code.

A sweep point (or a planner probe) is cached under a key; the resolved
scenario alone cannot be that key, because it names files by path and
says nothing of the code that runs it. `key_inputs(scenario)` adds

- `files`: the sha256 of the bytes of every file the scenario reads: the
  hardware profile and the drafter's latency profile (a `builtin:NAME`
  is the CSV shipped in hwprofiles/data/), a replayed trace, the trace an
  empirical length distribution resamples, a session trace (a folder's:
  the names and bytes of every file under it); found by walking the scenario
  for `hardware.profile` and every field the schema marks as a path.
  Fragments merged with `--merge` are already part of the scenario.
- `specplan`: the package version and the sha256 of the source of every
  module a simulation can run (simulator, policies, hwprofiles, traces).

So editing a profile or a trace in place, or upgrading specplan, gives
every affected point a new key and it is simulated again. Digests are
computed once per file version (size and modification time) per process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import specplan
from specplan.hwprofiles import profile_file
from specplan.hwprofiles.loader import file_stamp
from specplan.simulator.core.errors import SpecplanError

CODE_PACKAGES = ("specplan.simulator", "specplan.policies", "specplan.hwprofiles", "specplan.traces")
STUDY_FIELDS = ("sweep", "sla")


def key_inputs(scenario: Any) -> dict[str, Any]:
    """{"files": {path: sha256 of its bytes}, "specplan": {"version", "source"}} of one scenario."""
    return {"files": {str(path): file_digest(path) for path in input_files(scenario)}, "specplan": code_version()}


def input_files(scenario: Any) -> list[Path]:
    """Every file the scenario reads, sorted, each once."""
    found = {profile_file(spec) for spec in [scenario.hardware.profile, *marked_paths(scenario)]}
    return sorted(path for path in found if path is not None)


def marked_paths(obj: Any) -> Iterator[str]:
    """Values of every schema field marked `path=True` (non-empty strings), anywhere in the tree."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.metadata.get("path"):
                if isinstance(value, str) and value:
                    yield value
            elif f.name not in STUDY_FIELDS:
                yield from marked_paths(value)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from marked_paths(value)
    elif isinstance(obj, (tuple, list)):
        for value in obj:
            yield from marked_paths(value)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (cached per size and modification time), or of a folder's files (a folder of
    session traces); one-line error if unreadable."""
    stamp = file_stamp(path)
    if stamp is None:
        raise SpecplanError(f"{path}: cannot read this input file of the scenario")
    if path.is_dir():
        return folder_digest(path)
    return _digest(path, stamp)


def folder_digest(folder: Path) -> str:
    """sha256 over the relative name and the digest of every file under a folder, in name order."""
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        sha.update(f"{path.relative_to(folder).as_posix()}\0{file_digest(path)}\0".encode())
    return sha.hexdigest()


@lru_cache(maxsize=256)
def _digest(path: Path, stamp: tuple[int, int]) -> str:
    sha = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
    except OSError as exc:
        raise SpecplanError(f"{path}: cannot read this input file of the scenario ({exc.strerror or exc})") from None
    return sha.hexdigest()


@cache
def code_version() -> dict[str, str]:
    """specplan's version and the sha256 of its simulation code (module paths and bytes, in order)."""
    sha = hashlib.sha256()
    for package in CODE_PACKAGES:
        spec = importlib.util.find_spec(package)
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        for root in roots:
            for path in sorted(Path(root).rglob("*.py")):
                sha.update(f"{package}/{path.relative_to(root).as_posix()}\0".encode())
                sha.update(path.read_bytes())
    return {"version": specplan.__version__, "source": sha.hexdigest()}
