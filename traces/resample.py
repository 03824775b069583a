"""Resampling a trace's arrivals, so that seeds vary the traffic and not only the simulator's own draws.

A replay (specplan.traces.replay) sends a trace's window as recorded: every
seed of a plan or a sweep sees the same arrivals, so an interval over seeds
covers acceptance, routing and length draws but not the traffic (a plan on
one 600 s window of a Mooncake trace read TTFT p90 ± 0.000). Two
resamplings, chosen by `workload.arrivals.resample` and drawn from the
generator the replay hands in (the scenario's named stream
"trace.resample", so each seed resamples differently and every draw still
flows from the scenario's seed):

    windows   the window (its duration_s) starts at a uniform draw over the
              trace, so each seed replays another stretch of it;
    blocks    a circular block bootstrap of the window: it is cut into
              `resample_block_s` blocks and rebuilt from as many blocks,
              each starting at a uniform draw on the window's circle, their
              requests kept in order and at their offsets within the block
              (a burst shorter than a block is kept whole; the sequence of
              bursts is resampled).

Both keep the lengths of the requests they pick; `rate_scale` and
`time_scale` then apply to the resampled window as to a recorded one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specplan.traces.errors import TraceError

RESAMPLINGS = ("none", "windows", "blocks")


def seeds_replay(spec: Any) -> str:
    """What each seed replays of a trace (`workload.arrivals`), in words: what an interval over seeds covers."""
    if spec.resample == "blocks":
        return (f"each seed replays a circular block bootstrap of the trace's window ({spec.resample_block_s:g} s "
                "blocks), so the interval covers the traffic too")
    if spec.resample == "windows":
        return (f"each seed replays a {spec.duration_s:g} s window drawn anew over the trace, so the interval "
                "covers the traffic too")
    return ("every seed replays the trace's arrivals as recorded, so the interval covers the simulator's own draws "
            "(acceptance, routing), not the traffic: resample it with workload.arrivals.resample blocks or windows")


def window_start_s(first_s: float, last_s: float, duration_s: float | None, rng: np.random.Generator,
                   path: str) -> float:
    """A window's start drawn uniformly so that [start, start + duration_s) lies within the trace's span."""
    if duration_s is None:
        raise TraceError(f"{path}: resample windows draws a window of workload.arrivals.duration_s seconds from "
                         "the trace: give duration_s")
    room = last_s - first_s - duration_s
    if room <= 0:
        raise TraceError(f"{path}: resample windows needs a trace longer than the window (duration_s "
                         f"{duration_s:g} s; the trace spans {last_s - first_s:g} s): shorten duration_s, or "
                         "resample blocks")
    return first_s + float(rng.uniform(0.0, room))


def block_bootstrap(times_s: np.ndarray, extent_s: float, block_s: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(which rows, at what times) of a circular block bootstrap of a window of `extent_s` seconds whose rows
    arrive at `times_s` (sorted, in [0, extent_s)): ceil(extent / block) blocks, each `block_s` long from a
    uniform start on the window's circle, laid end to end and cut at `extent_s`."""
    if not (math.isfinite(block_s) and block_s > 0):
        raise TraceError(f"resample_block_s must be a positive number of seconds, got {block_s}")
    if times_s.size == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    block_s = min(block_s, extent_s)
    blocks = math.ceil(extent_s / block_s - 1e-9)
    starts = rng.uniform(0.0, extent_s, blocks)
    doubled = np.concatenate((times_s, times_s + extent_s))  # the circle unrolled once
    rows, at = [], []
    for k, start in enumerate(starts):
        span = min(block_s, extent_s - k * block_s)
        lo, hi = np.searchsorted(doubled, [start, start + span], side="left")
        picked = np.arange(lo, hi)
        rows.append(picked % times_s.size)
        at.append(k * block_s + doubled[picked] - start)
    return np.concatenate(rows).astype(np.int64), np.concatenate(at)
