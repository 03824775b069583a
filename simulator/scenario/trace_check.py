"""The traces a scenario replays, read whole by the readers `run` uses: what `specplan check` adds to loading.

Loading a scenario reads no trace file (a run-size estimate reads one only
when the cheap bound is over a limit), so a trace with a broken line passed
`check` and failed `run`. `read_traces(scenarios)` reads each distinct file
the scenarios replay once, with the same reader and so the same one-line
refusal (a `TraceError`: file, line, what is wrong): a request trace
(`workload.arrivals.kind: trace`) through `traces.lengths.trace_lengths`
(the run-size estimate's cached reader), a session trace
(`kind: sessions` with a `path`) through `traces.sessions.read_sessions`,
which the lanes read. Generated sessions read no file. It returns one
phrase per file read, for check's answer to say what it parsed.
"""

from __future__ import annotations

from collections.abc import Iterable

from specplan.simulator.scenario.spec import Scenario
from specplan.traces.lengths import trace_lengths
from specplan.traces.readers import TraceFile
from specplan.traces.sessions import read_sessions
from specplan.traces.spec import SessionArrivals, TraceArrivals


def read_traces(scenarios: Iterable[Scenario]) -> list[str]:
    """Read every distinct trace file of `scenarios` whole (a TraceError on the first bad line); one phrase
    per file: 'trace FILE: N requests read' or 'session trace FILE: N sessions read'."""
    said: dict[object, str] = {}
    for scenario in scenarios:
        arrivals = scenario.workload.arrivals
        if isinstance(arrivals, TraceArrivals):
            file = TraceFile.of(arrivals)
            if file not in said:
                said[file] = f"trace {arrivals.path}: {len(trace_lengths(file)[0]):,} requests read"
        elif isinstance(arrivals, SessionArrivals) and arrivals.generate is None:
            key = (arrivals.path, arrivals.format, arrivals.block_tokens)
            if key not in said:
                sessions = read_sessions(arrivals.path, arrivals.format, arrivals.block_tokens)
                said[key] = f"session trace {arrivals.path}: {len(sessions):,} sessions read"
    return list(said.values())
