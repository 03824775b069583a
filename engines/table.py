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

from specplan.engines.sglang import ROWS as SGLANG_ROWS
from specplan.engines.traits import EngineTraits, Scheduler
from specplan.engines.trtllm import ROWS as TRTLLM_ROWS
from specplan.engines.vllm import ROWS as VLLM_ROWS
from specplan.errors import SpecplanError

ENGINE_NAMES = ("vllm", "sglang", "trtllm")


def rows() -> dict[str, tuple[EngineTraits, ...]]:
    """Every engine's rows, oldest version first."""
    return {"vllm": VLLM_ROWS, "sglang": SGLANG_ROWS, "trtllm": TRTLLM_ROWS}


def version_key(version: str) -> tuple[int, ...]:
    """'0.5.12.post1' → (0, 5, 12, 1): rows compare by their numbers."""
    return tuple(int(part) for part in "".join(c if c.isdigit() else " " for c in version).split())


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
    at_or_below = [row for row in known if version_key(row.version) <= version_key(version)]
    if not at_or_below:
        raise SpecplanError(f"{name} {version} is older than every row of its traits table "
                            f"({', '.join(engine_versions(name))})")
    return at_or_below[-1]


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
