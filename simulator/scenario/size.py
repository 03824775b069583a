"""How big a run is: its estimated engine steps and arrivals, and the refusal of a horizon too large to run.

`check_run_size(scenario, profile)` runs when a scenario loads (so `check`,
`run`, `sweep` and `plan` refuse alike). A run is refused when its estimate
needs more than an hour of wall time or more memory than the machine has:

    steps     ≤ replicas × duration_s / shortest step         (every replica always busy)
              ≤ arrivals × steps per request                  (a step emits at least one token;
                                                               chunked prefill adds prompt / chunk steps)
    arrivals  ≈ rate × duration_s (open loop; mmpp and piecewise at their mean rate),
                users + min(users × duration_s / (think_s + service),
                            slots × duration_s / service) (closed loop: every user's
                first request, then what completes: each user cycling at its
                fastest, but no more than the engines' request slots, replicas ×
                max_batch_requests, finish; service: the mean output at block + 1
                tokens per shortest step), so a closed loop of 10¹² users is
                10¹² arrivals whatever the drafter,
                the trace's requests × rate_scale (a trace),
                lanes × (1 + warmup_turns) + min(conversations × duration_s / (gap + service),
                slots × duration_s / service) (agent sessions, a closed system like the
                loop above: every lane's warm-up turns, then each of its conversations
                cycling at its mean capped tool gap and shortest answer; a corpus's
                means from traces.session_load, read from a trace only with the files),
                at most horizon.requests
    wall      = steps / 45,000 steps/s + arrivals / 20,000 requests/s (the fast ends of the
                25–45 k steps/s and 13–17 k requests/s the simulator runs at on one core)
    memory    = steps × 600 B + arrivals × 1,300 B (peak memory per step and per request, measured)

The shortest step is the profile's smallest step time plus the host time
every step pays, so the step count is an upper bound; arrivals are
expected counts. The refusal names first the key that makes the run too
big: the load (`workload.arrivals.users`, `rate_per_s`, ...) when the
arrivals' share of the wall time and memory is the larger, else the
horizon. Limits are orders of magnitude away from any run one
would want: a run refused would not finish in the hour or would run out
of memory. Only
when the cheap bound (no file read) is over a limit are traces and
empirical lengths read to sharpen it (cached per file version).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.progress import format_duration
from specplan.simulator.scenario.scaling import OPEN_LOOP, load_key, mean_rate_per_s
from specplan.traces.lengths import trace_lengths
from specplan.traces.readers import TraceFile
from specplan.traces.session_load import SessionLoad, session_load
from specplan.traces.spec import (
    ClosedLoopArrivals,
    EmpiricalLength,
    FixedLength,
    LognormalLength,
    MixtureLength,
    SessionArrivals,
    TraceArrivals,
)

STEPS_PER_S = 45_000
REQUESTS_PER_S = 20_000
MAX_WALL_S = 3600.0
BYTES_PER_STEP = 600
BYTES_PER_REQUEST = 1_300
FALLBACK_MEMORY_BYTES = 16 * 2**30
MIN_ROW_BYTES = 6  # the shortest trace line ("t,p,o\n"): file size / 6 bounds its rows without reading it


@dataclass(frozen=True)
class RunSize:
    """An estimate of a run's engine steps and arrivals, and how it was made (for the message)."""

    steps: float
    arrivals: float
    step_ms: float

    @property
    def wall_s(self) -> float:
        return self.steps / STEPS_PER_S + self.arrivals / REQUESTS_PER_S

    @property
    def memory_bytes(self) -> float:
        return self.steps * BYTES_PER_STEP + self.arrivals * BYTES_PER_REQUEST

    def fits(self, memory_bytes: float) -> bool:
        return self.wall_s <= MAX_WALL_S and self.memory_bytes <= memory_bytes

    @property
    def load_bound(self) -> bool:
        """Whether the arrivals cost more (wall time and memory, relative to their limits) than the steps."""
        arrivals = self.arrivals / REQUESTS_PER_S / MAX_WALL_S + self.arrivals * BYTES_PER_REQUEST / 2**30
        steps = self.steps / STEPS_PER_S / MAX_WALL_S + self.steps * BYTES_PER_STEP / 2**30
        return arrivals > steps


def check_run_size(scenario: Any, profile: StepProfile) -> None:
    """Raise ScenarioError (one line, with the estimate) when the horizon cannot run in an hour or in memory."""
    memory = machine_memory_bytes()
    size = run_size(scenario, profile, read_files=False)
    if size.fits(memory):
        return
    size = run_size(scenario, profile, read_files=True)
    if size.fits(memory):
        return
    horizon = scenario.horizon
    span = "horizon.duration_s" if horizon.duration_s is not None else "horizon.requests"
    path, advice = ((load_key(scenario.workload.arrivals), "lower the load or shorten the horizon")
                    if size.load_bound and horizon.requests is None else (span, "shorten the horizon or lower the load"))
    raise ScenarioError(path, f"this run is about {size.steps:.2g} engine steps and {size.arrivals:.2g} "
                              f"arrivals (shortest step {size.step_ms:.3g} ms), i.e. ~{wall_text(size.wall_s)} at "
                              f"{STEPS_PER_S:,} steps/s and {REQUESTS_PER_S:,} requests/s and "
                              f"~{size.memory_bytes / 2**30:.3g} GiB of records; "
                              f"the limits are 1 hour and this machine's {memory / 2**30:.3g} GiB: {advice}")


def wall_text(wall_s: float) -> str:
    return f"{wall_s / 3600:.3g} hours" if wall_s >= 360_000 else format_duration(wall_s)


def run_size(scenario: Any, profile: StepProfile, read_files: bool) -> RunSize:
    """Steps and arrivals of a run (files read only when `read_files`)."""
    step_s = (float(np.min(profile.step_ms_table)) + scenario.engine.host_overhead_ms) / 1000.0
    duration = scenario.horizon.duration_s
    busy = math.inf if duration is None else scenario.cluster.replicas * duration / step_s
    arrivals = expected_arrivals(scenario, step_s, read_files)
    if arrivals is None:  # an arrival kind this estimate does not know: only the busy bound
        return RunSize(busy, 0.0, step_s * 1000.0)
    steps = min(busy, arrivals * steps_per_request(scenario, read_files))
    return RunSize(steps, arrivals, step_s * 1000.0)


def expected_arrivals(scenario: Any, step_s: float, read_files: bool) -> float | None:
    arrivals = scenario.workload.arrivals
    duration = scenario.horizon.duration_s
    cap = math.inf if scenario.horizon.requests is None else float(scenario.horizon.requests)
    if isinstance(arrivals, TraceArrivals):
        return min(cap, trace_requests(arrivals, read_files) * arrivals.rate_scale)
    if duration is None:
        return cap
    if isinstance(arrivals, ClosedLoopArrivals):
        service = service_s(scenario, step_s, read_files)
        cycles = arrivals.users * duration / (arrivals.think_s + service)
        return min(cap, arrivals.users + min(cycles, request_slots(scenario) * duration / service))
    if isinstance(arrivals, SessionArrivals):
        return min(cap, session_arrivals(scenario, arrivals, step_s, read_files))
    if arrivals.KIND not in OPEN_LOOP:
        return None
    return min(cap, mean_rate_per_s(arrivals) * duration)


def session_arrivals(scenario: Any, arrivals: SessionArrivals, step_s: float, read_files: bool) -> float:
    """Turns the lanes send: their warm-up turns, then each conversation at its mean gap and shortest answer
    (a corpus not read: no gap and one-step answers, an upper bound the files then sharpen)."""
    load = session_load(arrivals, read_files) or SessionLoad(1.0, 0.0, 0.0, 1.0)
    service = step_s * max(1.0, load.output_tokens / emitted_per_step(scenario))
    duration = scenario.horizon.duration_s
    cycles = arrivals.lanes * load.conversations_per_lane * duration / (load.gap_s + service)
    return arrivals.lanes * (1 + arrivals.warmup_turns) + min(cycles, request_slots(scenario) * duration / service)


def request_slots(scenario: Any) -> float:
    """Requests the cluster's engines run at once: replicas × max_batch_requests (or the DP ranks' own slots,
    when they hold more)."""
    engine = scenario.engine
    slots = float(engine.max_batch_requests)
    dp = engine.dp_attention
    if dp is not None and dp.max_batch_requests is not None:
        slots = max(slots, float(dp.ranks * dp.max_batch_requests))
    return scenario.cluster.replicas * slots


def service_s(scenario: Any, step_s: float, read_files: bool) -> float:
    """The shortest a request can take: its mean output at block + 1 tokens per step, at least one step."""
    output = mean_tokens(scenario.workload.output_tokens, "output", read_files)
    return step_s * (max(1.0, output / emitted_per_step(scenario)) if math.isfinite(output) else 1.0)


def emitted_per_step(scenario: Any) -> int:
    """The most tokens a request gets per step: block + 1 with a drafter, else 1."""
    return scenario.drafter.block_size + 1 if scenario.drafter.speculates else 1


def trace_requests(spec: TraceArrivals, read_files: bool) -> float:
    """The trace's requests: counted when reading is allowed, else bounded by its size in bytes."""
    if read_files:
        return float(trace_lengths(TraceFile.of(spec))[0].size)
    try:
        return os.stat(spec.path).st_size / MIN_ROW_BYTES
    except OSError:
        return 0.0  # the replay names the missing file when it starts


def steps_per_request(scenario: Any, read_files: bool) -> float:
    """Engine steps one request can take at most: its output tokens, plus its prompt chunks (chunked prefill)."""
    workload, prefill = scenario.workload, scenario.engine.prefill
    arrivals = workload.arrivals
    chunk = getattr(prefill, "chunk_tokens", None)
    if isinstance(arrivals, SessionArrivals):
        load = session_load(arrivals, read_files)
        if load is None:
            return math.inf
        return load.output_tokens + 1.0 + (load.new_tokens / chunk if chunk else 0.0)
    from_trace = isinstance(arrivals, TraceArrivals) and arrivals.use_lengths
    output = trace_mean(arrivals, 1, read_files) if from_trace else \
        mean_tokens(workload.output_tokens, "output", read_files)
    if chunk is None:
        return output
    prompt = trace_mean(arrivals, 0, read_files) if from_trace else \
        mean_tokens(workload.prompt_tokens, "prompt", read_files)
    return output + prompt / chunk + 1.0


def trace_mean(spec: Any, column: int, read_files: bool) -> float:
    if not read_files:
        return math.inf
    values = trace_lengths(TraceFile.of(spec))[column]
    return float(values.mean()) if values.size else 0.0


def mean_tokens(spec: Any, role: str, read_files: bool) -> float:
    """An upper bound of a length distribution's mean (inf when it needs a file that is not read)."""
    if isinstance(spec, FixedLength):
        return float(spec.value)
    if isinstance(spec, LognormalLength):
        return min(float(spec.max), spec.median * math.exp(spec.sigma**2 / 2) + spec.min)
    if isinstance(spec, EmpiricalLength):
        if spec.values:
            return float(np.mean(spec.values))
        return trace_mean(spec, 0 if (spec.field or role) == "prompt" else 1, read_files)
    assert isinstance(spec, MixtureLength)
    return max(mean_tokens(part, role, read_files) for part in spec.components.values())


def machine_memory_bytes() -> float:
    """Physical memory of this machine (16 GiB when the system does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return float(FALLBACK_MEMORY_BYTES)
