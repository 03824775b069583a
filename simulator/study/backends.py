"""Where sweep points run: a local process pool, or Ray tasks (local or an existing cluster).

Both backends call the same pure function, `compute_point(scenario, ...)`,
and hand each finished summary to `on_done(point, summary)` as soon as it
arrives; the caller stores it and draws progress. A point's result depends
only on its scenario, so the backend and the number of workers change
wall time, never results.

The local backend runs points in the calling process when `workers == 1`
and in a `concurrent.futures.ProcessPoolExecutor` otherwise; its workers
store each point themselves, so a result survives even if the parent dies
before collecting it. Ray tasks return the summary and the driver stores
it (a remote worker may not share the driver's disk).

Ctrl-C, SIGTERM or SIGHUP (`specplan.simulator.study.interrupts`): the
first finishes the points already running and starts no more, the second
kills the local workers at once (removing any temporary file a killed
worker left); either way `Interrupted` follows (exit 128 + the signal),
every stored point is whole, and the next run resumes. Workers ignore
SIGINT and SIGHUP, so none prints a traceback, and die with the parent,
even one killed by SIGKILL. `pool_map` is that pool for any picklable calls
(the planner's too); a worker that dies unasked is one line.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from pathlib import Path
from typing import Any

from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import Scenario
from specplan.simulator.study.interrupts import Interrupted, Stopper, worker_init
from specplan.simulator.study.points import Point, normalise, remove_partial, store_point

OnDone = Callable[[Point, dict[str, Any]], None]
BACKENDS = ("local", "ray")


def compute_point(scenario: Scenario, key: str, points_dir: str | None) -> dict[str, Any]:
    """Simulate one point; store it under `points_dir` when given; return its summary."""
    summary = normalise(simulate(scenario).summary)
    if points_dir is not None:
        store_point(Path(points_dir), key, summary, scenario)
    return summary


def default_workers() -> int:
    return os.cpu_count() or 1


def worker_count(workers: int | None, name: str = "workers") -> int:
    """The worker processes to use: `workers`, or one per core when None. The one check of a worker
    count (sweeps, split runs, plans and searches all call it); a refusal names it `name`."""
    if workers is None:
        return default_workers()
    if not isinstance(workers, int) or workers < 1:
        raise SpecplanError(f"{name} must be >= 1, got {workers}")
    return workers


def run_points(points: Sequence[Point], on_done: OnDone, backend: str = "local", workers: int | None = None,
               points_dir: Path | None = None, address: str | None = None) -> None:
    """Run `points` on `backend`, calling `on_done` for each as it finishes."""
    if backend not in BACKENDS:
        raise SpecplanError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    workers = worker_count(workers)
    if not points:
        return
    if backend == "ray":
        run_ray(points, on_done, workers, address)
    else:
        run_local(points, on_done, workers, points_dir)


def run_local(points: Sequence[Point], on_done: OnDone, workers: int, points_dir: Path | None) -> None:
    where = str(points_dir) if points_dir is not None else None
    if workers == 1 or len(points) == 1:
        with Stopper(running=lambda: 1) as stop:
            for point in points:
                if stop.requested:
                    break
                on_done(point, point_result(partial(compute_point, point.scenario, point.key, where), point))
            stop.check()
        return
    calls = [(compute_point, (p.scenario, p.key, where)) for p in points]
    pool_map(calls, lambda i, get: on_done(points[i], point_result(get, points[i])), workers,
             order=lambda i: points[i].key,
             on_killed=lambda running: remove_partial(points_dir, [points[i].key for i in running]))


def map_calls(calls: Sequence[tuple[Callable[..., Any], tuple]], on_result: Callable[[int, Callable[[], Any]], None],
              workers: int, what: str, kept: str, on_killed: Callable[[list[int]], None] = lambda running: None) -> None:
    """`calls` in this process one by one (workers ≤ 1: a first Ctrl-C ends after the running call)
    or on a process pool (`pool_map`); each finished one handed to `on_result(index, get)`."""
    if workers > 1:
        pool_map(calls, on_result, workers, what=what, kept=kept, on_killed=on_killed)
        return
    with Stopper(running=lambda: 1, what=what, kept=kept) as stop:
        for index, (fn, args) in enumerate(calls):
            if stop.requested:
                break
            on_result(index, partial(fn, *args))
        stop.check()


def pool_map(calls: Sequence[tuple[Callable[..., Any], tuple]], on_result: Callable[[int, Callable[[], Any]], None],
             workers: int, what: str = "point", order: Callable[[int], Any] = lambda i: i,
             on_killed: Callable[[list[int]], None] = lambda running: None, kept: str = "") -> None:
    """Run `calls` on a process pool; hand each finished one to `on_result(index, future.result)`.

    At most `workers` calls are in flight (a new one is submitted as one finishes), so a first
    Ctrl-C finishes exactly the running ones. Results of one wake-up go in `order`; `on_killed`
    gets the indices of the calls a second Ctrl-C killed.
    """
    pool = ProcessPoolExecutor(max_workers=min(workers, len(calls)), initializer=worker_init,
                               initargs=(os.getpid(),))
    queue = iter(range(len(calls)))
    futures: dict[Future, int] = {}
    killed: list[int] = []

    def submit(count: int) -> None:
        for index in itertools.islice(queue, count):
            fn, args = calls[index]
            futures[pool.submit(fn, *args)] = index

    def stop_now() -> None:
        killed.extend(futures.values())
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        on_killed(killed)

    try:
        with Stopper(lambda: len(futures), stop_now, what, kept) as stop:
            submit(min(workers, len(calls)))
            while futures:
                done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: order(futures[f])):
                    index = futures.pop(future)
                    on_result(index, partial(worker_result, future, stop, what))
                if not stop.requested:
                    submit(len(done))
            stop.check()
    finally:
        pool.shutdown(wait=not killed, cancel_futures=True)


def worker_result(future: Future, stop: Stopper, what: str) -> Any:
    """A finished call's value; a worker that died is the stop asked for (a signal reached it too), or one line."""
    try:
        return future.result()
    except BrokenProcessPool:
        if stop.requested:
            raise Interrupted(f"a {what} worker stopped with the signal; " + stop.kept(), stop.signum) from None
        raise SpecplanError(f"a {what} worker process died; every finished {what} is kept, run the same command "
                            "again to resume") from None


def point_result(get: Callable[[], dict[str, Any]], point: Point) -> dict[str, Any]:
    """A point's summary, with failures turned into one-line errors naming the point."""
    try:
        return get()
    except SpecplanError as exc:
        raise SpecplanError(f"point {describe(point)}: {exc}") from None


def describe(point: Point) -> str:
    load = f", {point.load_kind}={point.load:g}" if point.load is not None else ""
    return f"'{point.label}'{load}, seed {point.seed}"


def run_ray(points: Sequence[Point], on_done: OnDone, workers: int, address: str | None) -> None:
    """Points as Ray tasks on a local Ray started for the run, or on the cluster at `address`."""

    def done(index: int, get: Callable[[], Any]) -> None:
        on_done(points[index], get())

    calls = [(compute_point, (p.scenario, p.key, None)) for p in points]
    ray_map(calls, done, workers, address, what=lambda index: f"point {describe(points[index])}")


def start_ray(ray: Any, workers: int, address: str | None) -> None:
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"at {address}" if address else "locally"
        raise SpecplanError(f"cannot start Ray {where}: {str(exc).splitlines()[0]}") from None


def ray_map(calls: Sequence[tuple[Callable[..., Any], tuple]], on_result: Callable[[int, Callable[[], Any]], None],
            workers: int, address: str | None, what: str | Callable[[int], str] = "task") -> None:
    """`pool_map` on Ray: each call a Ray task (one CPU) on a local Ray started for the run, or on the
    cluster at `address`; each finished one handed to `on_result(index, get)` as it arrives. A failed
    task's error names `what` (or `what(index)`)."""
    try:
        # Ray is the optional 'ray' extra
        import ray
    except ImportError:
        raise SpecplanError("--backend ray needs Ray: pip install 'specplan[ray]'") from None
    owns = not ray.is_initialized()
    if owns:
        start_ray(ray, workers, address)
    try:
        remotes: dict[Callable[..., Any], Any] = {}
        refs = {}
        for index, (fn, args) in enumerate(calls):
            remote = remotes.setdefault(fn, ray.remote(num_cpus=1)(fn))
            refs[remote.remote(*args)] = index
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                name = what(refs[ref]) if callable(what) else what
                on_result(refs[ref], partial(ray_value, ray, ref, name))
    finally:
        if owns:
            ray.shutdown()


def ray_value(ray: Any, ref: Any, what: str) -> Any:
    """A Ray task's value, its SpecplanError (or first line of any other failure) as one line."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        detail = str(cause) if isinstance(cause, SpecplanError) else str(exc).splitlines()[0]
        raise SpecplanError(f"{what}: {detail}") from None
