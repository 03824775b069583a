"""Workloads: arrival processes, length distributions, trace readers and replay, trace statistics.

A leaf package: it imports no part of specplan.simulator (tests/test_layers.py).
The engine wires these into SimPy processes (specplan.simulator.engine.cluster.workload).

    spec.py      the `workload:` section as plain dataclasses (bounds as field metadata: specplan.fields)
    arrivals.py  open-loop arrival processes and think times, with their analytic moments
    lengths.py   prompt / output length distributions
    readers.py   trace files (azure, mooncake, burstgpt, csv), streamed
    replay.py    a trace replayed as timed arrivals (generators passed in)
    sessions.py  agent session traces (weka, mooncake, plain): turns, fan-outs, joins, block hashes
    lanes.py     sessions replayed on lanes (the AgentX protocol: warm-up barrier, gaps, recycling)
    agentic.py   AgentX-shaped sessions generated from real traces' statistics; session_stats.py measures them
    session_load.py  a session corpus's mean turn (answer, gap, concurrency): the run-size estimate reads it
    draws.py     one generator's values one at a time, drawn in blocks
    stats.py     trace statistics (`specplan trace-stats`); plots.py draws them
    errors.py    TraceError: the package's own error (the CLI prints it as one line, exit 2)
"""
