"""Trace replay: a trace file → timed request arrivals in the SimPy run.

The engine's workload (specplan.simulator.engine.cluster.workload) calls `start_replay` for `workload.arrivals: {kind: trace}`.
The pipeline is lazy end to end (readers.py streams the file):

    TraceReader  (seconds from the trace's first request)
    → window     (start_s, duration_s, in trace time; shifted to start at 0)
    → resample   (none; windows: the window's start drawn over the trace; blocks: a
                  circular block bootstrap of the window, held in memory:
                  specplan.traces.resample)
    → rate_scale (thin below 1; above 1, superpose copies of the window,
                  each rotated by a small random offset, the last copy
                  thinned to the fraction)
    → time_scale (every time multiplied: 2 replays twice as slow)
    → SimPy process submitting each request at its time.

A trace that runs out before the horizon (its window ends, or the file
does, before horizon.duration_s) ends the measurement window there: at the
end of what the window covers (its duration_s when the trace goes on past
it, else the last arrival), so idle seconds after the trace never dilute
throughput; the run still goes on to the horizon, so the requests it sent
finish. summary.json says so (`trace_ran_out_s`, and `window_s`). A
window that holds no request is refused before the run, as an empty file
is.

Rate scaling multiplies the rate curve λ(t) by rate_scale and keeps its
shape: the bursts stay where they were, as high relative to the mean
(peak-to-mean per minute kept), and the lengths keep their distribution.
Thinning does this in expectation. A superposed copy is the window rotated
by an offset below `superpose_shift_s` (default ten mean gaps): small
enough to keep the minute-scale profile, large enough that copies are not
simultaneous duplicates; the rotation wraps inside the window, so integer
scales give exactly rate_scale × the window's requests. (Gap CV is not an
invariant of rate scaling: the idle periods of on/off traffic keep their
length while the mean gap shrinks.) The `Replay` object keeps the counts
of skipped bad lines and failed (zero-output) requests for the summary.
Its random generators are passed in (`streams(name, *index)`: the
scenario's named streams), so it holds no seed of its own.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

import numpy as np
import simpy

from specplan.traces.errors import TraceError
from specplan.traces.readers import TraceFile, TraceReader, TraceRow
from specplan.traces.resample import block_bootstrap, window_start_s
from specplan.traces.spec import TraceArrivals

# the named generators a replay draws from, passed in: streams("trace.thin", j), streams("trace.shift")
Streams = Callable[..., np.random.Generator]


class Window:
    """The rows of a window, start_s ≤ time < start_s + duration_s, times shifted so it starts at 0;
    `closed` once a row past its end was read (the trace went on beyond the window)."""

    def __init__(self, rows: Iterable[TraceRow], start_s: float, duration_s: float | None) -> None:
        self.rows, self.start_s = rows, start_s
        self.end_s = math.inf if duration_s is None else start_s + duration_s
        self.closed = False

    def __iter__(self) -> Iterator[TraceRow]:
        for row in self.rows:
            if row.time_s >= self.end_s:
                self.closed = True
                return
            if row.time_s >= self.start_s:
                yield row._replace(time_s=row.time_s - self.start_s)


def windowed(rows: Iterable[TraceRow], start_s: float, duration_s: float | None) -> Iterator[TraceRow]:
    """Rows with start_s ≤ time < start_s + duration_s, times shifted so the window starts at 0."""
    return iter(Window(rows, start_s, duration_s))


def shifted(rows: Iterable[TraceRow], offset_s: float) -> Iterator[TraceRow]:
    for row in rows:
        yield row._replace(time_s=row.time_s + offset_s)


def thinned(rows: Iterable[TraceRow], keep: float, rng: np.random.Generator) -> Iterator[TraceRow]:
    """Each row kept independently with probability `keep` (uniforms drawn in blocks)."""
    if keep >= 1.0:
        yield from rows
        return
    uniforms: list[float] = []
    for row in rows:
        if not uniforms:
            uniforms = rng.random(4096).tolist()
        if uniforms.pop() < keep:
            yield row


class Replay:
    """One trace replayed under a TraceArrivals spec; iterate `arrivals()` for timed requests."""

    def __init__(self, spec: TraceArrivals, streams: Streams) -> None:
        self.spec = spec
        self.file = TraceFile.of(spec)
        self.primary = TraceReader(self.file)
        self.streams = streams
        self.start_s = spec.start_s if spec.resample != "windows" else window_start_s(
            TraceReader(self.file).first().time_s, last_time_s(self.file), spec.duration_s,
            streams("trace.resample"), self.file.path)
        self.window = Window(self.primary, self.start_s, spec.duration_s)
        self.resampled: list[TraceRow] | None = None  # the block bootstrap of the window, once drawn

    def check(self) -> None:
        """Open the file and parse its first request in the window now, so errors come before the run: a
        file without requests, or a window that holds none, is refused."""
        first = TraceReader(self.file).first()
        spec = self.spec
        if next(windowed(TraceReader(self.file), self.start_s, spec.duration_s), None) is None:
            end = "" if spec.duration_s is None else f", duration_s {spec.duration_s:g}"
            raise TraceError(f"{self.file.path}: no request in the window (workload.arrivals.start_s "
                             f"{self.start_s:g}{end}); the trace's requests span {first.time_s:g}–"
                             f"{last_time_s(self.file):g} s")

    def covered_s(self, last_arrival_s: float) -> float:
        """Simulated seconds the replay covered, once its arrivals are over: the window's whole length when
        the trace went on past it, else up to its last arrival (`last_arrival_s`): the trace ran out."""
        if self.window.closed and self.spec.duration_s is not None:
            return self.spec.duration_s * self.spec.time_scale
        return last_arrival_s

    def counts(self) -> dict[str, int]:
        """What the primary pass skipped so far (reported in the run's summary)."""
        return {"trace_bad_lines": self.primary.bad_lines, "trace_failed_requests": self.primary.failed_requests}

    def arrivals(self) -> Iterator[TraceRow]:
        """Requests in arrival order, time_s in simulated seconds from the window's start."""
        for row in self.scaled_rows():
            yield row._replace(time_s=row.time_s * self.spec.time_scale)

    def window_rows(self) -> Iterable[TraceRow]:
        """The window's rows as recorded (read lazily), or their block bootstrap (`resample: blocks`)."""
        if self.spec.resample != "blocks":
            return self.window
        if self.resampled is None:
            recorded = list(self.window)
            extent_s, _ = self.window_extent()
            times = np.array([row.time_s for row in recorded], dtype=float)
            picked, at = block_bootstrap(times, extent_s, self.spec.resample_block_s, self.streams("trace.resample"))
            self.resampled = [recorded[i]._replace(time_s=float(t)) for i, t in zip(picked, at, strict=True)]
        return self.resampled

    def scaled_rows(self) -> Iterator[TraceRow]:
        """The window's rows after resampling and rate_scale, in trace seconds."""
        spec = self.spec
        copies = max(1, math.ceil(spec.rate_scale - 1e-12))
        keep = [min(1.0, spec.rate_scale - j) for j in range(copies)]
        streams = [thinned(self.window_rows(), keep[0], self.streams("trace.thin", 0))]
        if copies > 1:
            circle_s, n = self.window_extent()
            shift_s = min(circle_s, spec.superpose_shift_s or 10.0 * circle_s / n)
            offsets = self.streams("trace.shift").uniform(0.0, shift_s, copies - 1)
            for j, offset in enumerate(offsets, start=1):
                rows = self.circular_copy(float(offset), circle_s)
                streams.append(thinned(rows, keep[j], self.streams("trace.thin", j)))
        if len(streams) == 1:
            return streams[0]
        return heapq.merge(*streams, key=lambda row: row.time_s)

    def circular_copy(self, offset_s: float, circle_s: float) -> Iterator[TraceRow]:
        """The window rotated by offset_s on a circle of circle_s seconds (two lazy passes, or two slices of
        the resampled window)."""
        if self.resampled is not None:
            cut = circle_s - offset_s
            wrapped = [row._replace(time_s=row.time_s - cut) for row in self.resampled if row.time_s >= cut]
            return itertools.chain(wrapped, shifted((row for row in self.resampled if row.time_s < cut), offset_s))
        start = self.start_s
        tail = windowed(TraceReader(self.file), start + circle_s - offset_s, offset_s)
        head = windowed(TraceReader(self.file), start, circle_s - offset_s)
        return itertools.chain(tail, shifted(head, offset_s))

    def window_extent(self) -> tuple[float, int]:
        """(circle_s, n): the length copies rotate in and the window's request count.

        circle_s is duration_s when the trace covers the window, else the
        window's span plus one mean gap (n requests span n − 1 gaps).
        """
        spec = self.spec
        end = math.inf if spec.duration_s is None else self.start_s + spec.duration_s
        n, last_s = 0, 0.0
        for row in TraceReader(self.file):
            if row.time_s >= end:
                return float(spec.duration_s), max(n, 1)  # type: ignore[arg-type]
            if row.time_s >= self.start_s:
                n, last_s = n + 1, row.time_s - self.start_s
        if n < 2 or last_s <= 0:
            raise TraceError(f"{self.file.path}: rate_scale > 1 needs at least two requests at "
                                f"different times in the window, found {n}")
        return last_s * n / (n - 1), n


def last_time_s(file: TraceFile) -> float:
    """The time of a trace's last request (one pass over the file)."""
    last = 0.0
    for row in TraceReader(file):
        last = row.time_s
    return last


def start_replay(env: simpy.Environment, streams: Streams, spec: TraceArrivals, submit: Any,
                 budget: Any, source: Any) -> Replay:
    """Start the SimPy process replaying `spec`; the budget keeps the Replay for the summary."""
    replay = Replay(spec, streams)
    replay.check()
    budget.replay = replay
    env.process(replay_process(env, replay, source, submit, budget))
    return replay


def replay_process(env: simpy.Environment, replay: Replay, source: Any, submit: Any,
                   budget: Any) -> Generator[simpy.Event, Any, None]:
    """Submit each request at its time; when the trace runs out before the horizon, record when
    (`Replay.covered_s`) as `budget.ran_out_s`."""
    domain_of = DomainMap(replay, source)
    use_lengths = replay.spec.use_lengths
    for row in replay.arrivals():
        delay = row.time_s - env.now
        if delay > 0:
            yield env.timeout(delay)
        if not budget.allows(env.now):
            return
        domain = domain_of(row)
        prompt, output = (max(row.prompt_tokens, 1), row.output_tokens) if use_lengths else source.lengths(domain)
        budget.arrived += 1
        if row.blocks is None:
            submit(prompt, output, domain)
        else:
            submit(prompt, output, domain, row.blocks)
    end_s = replay.covered_s(env.now)
    if budget.allows(end_s):  # the horizon is not over there: the trace ran out
        budget.ran_out_s = end_s


class DomainMap:
    """A replayed request's domain index: the spec's fixed domain, the file's column, or a draw from the mix."""

    def __init__(self, replay: Replay, source: Any) -> None:
        self.path = replay.file.path
        self.names = tuple(source.domain_names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.fixed = None if replay.spec.domain is None else self.index[replay.spec.domain]
        self.source = source

    def __call__(self, row: TraceRow) -> int:
        if self.fixed is not None:
            return self.fixed
        if row.domain is None:
            return int(self.source.next_domain())
        found = self.index.get(row.domain)
        if found is None:
            raise TraceError(f"{self.path}:{row.line}: domain '{row.domain}' is not in "
                                f"drafter.acceptance.domains (active: {', '.join(self.names)})")
        return found
