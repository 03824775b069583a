"""specplan: a discrete-event serving simulator and capacity planner for speculative decoding.

One import root. The repository keeps the project's top-level folders
(DESIGN.md §2) and installs each under this package:

    specplan.simulator    the SimPy model, scenario schema, metrics, sweeps, planner
    specplan.policies     verification policies (one protocol)
    specplan.hwprofiles   step-time curves: format, lookup, builders, torch harness, data/
    specplan.traces       workloads: arrival processes, length distributions, trace readers
    specplan.reports      figures and report assembly
    specplan.scenarios    the embedded example scenarios (package data)
    specplan.validation   the reference CPU engine and the fidelity check

the command itself in the root package (`specplan.cli`: the top layer,
thin over the Python API), and two small root modules every part may import: `specplan.errors` (the
error base the CLI prints as one line) and `specplan.fields` (a scenario
key's plain declaration, its bounds as field metadata).

This file imports no part of the project, so that importing one part never loads the others.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("specplan")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
