"""The traits table: one `EngineTraits` row per engine and version, and how a row is looked up.

A row bundles an engine's habits (specplan.engines.traits): its CUDA-graph rule,
the host cycle of a speculating step, its scheduler (token budget, prefill
schedule, DP dispatch), its benchmark client's metric definitions and its
launch line. `NO_ENGINE` is the row of a profile no engine is known for (a
CSV, a roofline, a harness measurement): no host time, the budget defers whole
requests, prompt chunks ride in decode steps, a request takes the DP rank with
the most free KV, and an explicit `engine.cuda_graph` block pads tokens (the
rule the CUDA-graph block had before engines had rows).
"""

from __future__ import annotations

import re

from specplan.engines.sglang import ROWS as SGLANG_ROWS
from specplan.engines.traits import EngineTraits, Scheduler
from specplan.engines.trtllm import ROWS as TRTLLM_ROWS
from specplan.engines.vllm import ROWS as VLLM_ROWS
from specplan.errors import SpecplanError

ENGINE_NAMES = ("vllm", "sglang", "trtllm")


def rows() -> dict[str, tuple[EngineTraits, ...]]:
    """Every engine's rows, oldest version first."""
    return {"vllm": VLLM_ROWS, "sglang": SGLANG_ROWS, "trtllm": TRTLLM_ROWS}


VERSION = re.compile(r"v?\d+(\.\d+)*([.+-]?[A-Za-z0-9]+)*")  # 0.5.14, 0.5.12.post1, v0.6.0rc1, 0.10.1+cu128


def version_key(version: str) -> tuple[int, ...]:
    """'0.5.12.post1' → (0, 5, 12, 1): rows compare by their numbers."""
    return tuple(int(part) for part in "".join(c if c.isdigit() else " " for c in version).split())


def same_version(a: str, b: str) -> bool:
    """'0.24' and '0.24.0' name one release."""
    key_a, key_b = version_key(a), version_key(b)
    width = max(len(key_a), len(key_b))
    return key_a + (0,) * (width - len(key_a)) == key_b + (0,) * (width - len(key_b))


def check_version_text(name: str, version: str) -> None:
    """A version is numbers joined by dots, with an optional leading v and a suffix (post1, rc1, +cu128)."""
    if not VERSION.fullmatch(version.strip()):
        raise SpecplanError(f"{name} version {version!r} is not a version (numbers joined by dots, as 0.5.14)")


def engine_versions(name: str) -> tuple[str, ...]:
    """The versions `name` has rows for, oldest first."""
    return tuple(row.version for row in rows()[name])


def engine_traits(name: str, version: str | None = None) -> EngineTraits:
    """The row of `name` at `version`: its own, else the newest row at or below it; the newest without one.

    A name outside ENGINE_NAMES (and not 'none'), or a version older than every row, is refused.
    """
    if name == "none":
        return NO_ENGINE
    table = rows()
    if name not in table:
        raise SpecplanError(f"unknown serving engine '{name}' (known: {', '.join(ENGINE_NAMES)}, none)")
    known = table[name]
    if version is None:
        return known[-1]
    check_version_text(name, version)
    at_or_below = [row for row in known if version_key(row.version) <= version_key(version)]
    if not at_or_below:
        raise SpecplanError(f"{name} {version} is older than every row of its traits table "
                            f"({', '.join(engine_versions(name))})")
    return at_or_below[-1]


def version_row_note(name: str, version: str) -> str | None:
    """Which row a version without a row of its own takes, in one phrase; None where it has its own (or is
    refused: engine_traits says why)."""
    if name not in ENGINE_NAMES:
        return None
    row = engine_traits(name, version)
    if same_version(row.version, version):
        return None
    newest = rows()[name][-1]
    if row is newest and version_key(version) > version_key(newest.version):
        return (f"{name} {version} is newer than every row of its traits table: the newest, {row.label}, is used "
                "(a habit the engine changed since is not modelled)")
    return f"{name} {version} has no row of its own: {row.label}'s is used (the newest at or below it)"


def backend_traits(backend: str | None) -> EngineTraits:
    """The row a profile's `backend:` provenance line names ('sglang 0.5.14', 'vllm 0.24.0'); NO_ENGINE for
    none or an engine without rows."""
    name, _, version = (backend or "").strip().partition(" ")
    name = name.lower()
    if name not in ENGINE_NAMES:
        return NO_ENGINE
    try:
        return engine_traits(name, version.split()[0] if version.strip() else None)
    except SpecplanError:  # a version older than the rows: the oldest row stands for it
        return rows()[name][0]


NO_ENGINE = EngineTraits(name="none", version="", label="no engine",
                         graphs=VLLM_ROWS[0].graphs,  # vLLM's token padding: what a graph block ran before rows
                         host=None, scheduler=Scheduler(budget="defer", prefill_schedule="mixed",
                                                        dp_balance="most_free_kv"),
                         client=None, launch=None)
