"""The package adapter: the one place that loads aiconfigurator-core and its performance databases.

`aiconfigurator-core` (the optional `aic` extra, Apache-2.0, NVIDIA) is
imported only inside these functions, so `specplan` runs without it; every
failure of the package becomes a one-line ProfileError.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from specplan.hwprofiles.errors import ProfileError

INSTALL_HINT = "pip install 'specplan[aic]'"


def require_aic() -> Any:
    """The `aiconfigurator_core` package, or a one-line ProfileError saying how to install it."""
    try:
        # aiconfigurator-core is the optional 'aic' extra
        import aiconfigurator_core
    except ImportError:
        raise ProfileError(
            f"--source aiconfigurator needs aiconfigurator-core: {INSTALL_HINT}"
        ) from None
    return aiconfigurator_core


def package_version() -> str:
    try:
        return metadata.version("aiconfigurator-core")
    except metadata.PackageNotFoundError:
        return "unknown"


@contextmanager
def quiet() -> Iterator[None]:
    """Silence the package's warnings (data-loading notes) while it works."""
    logger = logging.getLogger("aiconfigurator_core")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@lru_cache(maxsize=16)
def database(system: str, backend: str, version: str) -> Any:
    """The package's performance database for a system, backend and version (cached per process)."""
    require_aic()
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk import perf_database

    with quiet():
        known = perf_database.get_supported_databases()
        if system not in known:
            raise ProfileError(f"--system: no AIConfigurator data for {system!r} (systems: {', '.join(sorted(known))})")
        if backend not in known[system]:
            raise ProfileError(f"--backend: no {backend} data on {system} (has: {', '.join(sorted(known[system]))})")
        try:
            db = perf_database.get_database(system, backend, version)
        except ValueError:
            slots = perf_database.get_version_slots(system, backend) or {}
            listed = ", ".join(f"{k} {v}" for k, v in slots.items() if v)
            raise ProfileError(f"--backend-version: {backend} {version} is not a version aiconfigurator-core "
                                f"serves on {system} (slots: {listed or 'none'})") from None
    if db is None:
        raise ProfileError(f"aiconfigurator-core has no {backend} {version} database for {system}")
    return db


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else exc.__class__.__name__)[:300]


@contextmanager
def one_line(doing: str) -> Iterator[None]:
    """A call into the package: whatever it raises (it raises many kinds) becomes one ProfileError line,
    "aiconfigurator-core cannot {doing}: {its first line}"."""
    try:
        yield
    except ProfileError:
        raise
    except Exception as exc:
        raise ProfileError(f"aiconfigurator-core cannot {doing}: {first_line(exc)}") from None


def literal_version(system: str, backend: str, version: str | None) -> str:
    """The database version a request names (`None` or an alias such as `current`: the slot's version)."""
    return str(database(system, backend, version or "current").version)


def table_view(system: str, backend: str, version: str, attribute: str) -> Any:
    """One of the database's tables as the estimator reads it (nested dicts keyed by shape), or {}."""
    db = database(system, backend, version)
    # aiconfigurator-core is the optional 'aic' extra
    from aiconfigurator_core.sdk.engine_table_view import fetch_table_view

    with quiet():
        return fetch_table_view(db, attribute) or {}


@lru_cache(maxsize=16)
def gemm_samples(system: str, backend: str, version: str) -> dict[str, frozenset[int]]:
    """GEMM precision → the token counts m its table samples (the engine's own view of the table)."""
    view = table_view(system, backend, version, "_gemm_data")
    return {getattr(mode, "name", str(mode)): frozenset(int(m) for m in by_m) for mode, by_m in view.items()}


@lru_cache(maxsize=64)
def dsv4_module_models(system: str, backend: str, version: str, phase: str, heads: int, tp: int) -> tuple[str, ...]:
    """The models whose DeepSeek-V4 attention-module rows (CSA and HCA, `phase` generation or context) the
    database holds at `heads` local heads and TP `tp` (its tables file rows per model: V4-Flash, V4-Pro)."""
    aic = require_aic()
    # pyarrow comes with aiconfigurator-core (the optional 'aic' extra), which reads these tables with it
    import pyarrow.parquet as pq

    folder = Path(aic.__file__).parent / "systems" / "data" / system / "sparse_attention" / backend / version
    found: set[str] = set()
    for kind in ("csa", "hca"):
        path = folder / f"dsv4_{kind}_{phase}_module_perf.parquet"
        if not path.is_file():
            continue
        table = pq.read_table(path, columns=["model", "num_heads", "tp_size"]).to_pydict()
        found |= {m for m, h, t in zip(table["model"], table["num_heads"], table["tp_size"], strict=True)
                  if (h, t) == (heads, tp)}
    return tuple(sorted(found))
