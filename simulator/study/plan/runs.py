"""Process orchestration of a plan: its independent sizings (variants, deployments) run side by side.

    run_sizings(calls, options, workers, "plan", "variant plan", on_result)

Each call sizes one variant or deployment (specplan.simulator.study.plan.replica_search)
and returns its answer; they share nothing but the probe store's folder. Locally
they run one by one (`workers` 1) or on a process pool, a first Ctrl-C finishing
the running ones and a second killing them (removing any temporary probe file a
killed worker left); with `options.backend == "ray"` each is a Ray task. Every
finished one is handed to `on_result(index, value)` at once, and a progress bar
counts them (plain lines every ten seconds where stderr is not a terminal, with
the probe runs stored so far under --out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specplan.simulator.core.progress import Progress
from specplan.simulator.study.backends import map_calls, ray_map
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.points import remove_partial


def run_sizings(calls: Sequence[tuple[Callable[..., Any], tuple]], options: RunOptions, workers: int,
                bar_name: str, what: str, on_result: Callable[[int, Any], None]) -> None:
    """Every call, on `workers` processes or Ray tasks (see the module docstring)."""
    with Progress(len(calls), bar_name, enabled=options.progress, detail=probes_simulated(options.probes_dir)) as bar:

        def done(index: int, get: Callable[[], Any]) -> None:
            on_result(index, get())
            bar.advance()

        if options.backend == "ray":
            ray_map(calls, done, workers, options.address, what=what)
        else:
            map_calls(calls, done, min(workers, len(calls)), what, options.kept,
                      on_killed=lambda running: remove_partial(options.probes_dir, [""]))


def probes_simulated(probes_dir: Path | None) -> Callable[[], str] | None:
    """What a plain progress line adds: the probe runs stored since the plan started ('14 probe runs simulated'),
    where they are stored (--out); a variant's sizing reports nothing until it ends, its probes do."""
    if probes_dir is None:
        return None
    before = stored_runs(probes_dir)

    def text() -> str:
        n = stored_runs(probes_dir) - before
        return f"{n} probe run{'' if n == 1 else 's'} simulated"

    return text


def stored_runs(probes_dir: Path) -> int:
    return sum(1 for _ in probes_dir.glob("*.json")) if probes_dir.is_dir() else 0
