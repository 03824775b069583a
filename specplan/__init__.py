"""specplan: a discrete-event serving simulator and capacity planner for speculative decoding.

One import root. The repository keeps the project's top-level folders
(CONTRIBUTING.md) and installs each under this package:

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

This file imports no part of the project, so that importing one part never loads the others,
and reads `__version__` only when asked (importlib.metadata alone costs a command 70 ms).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name != "__version__":
        raise AttributeError(f"module 'specplan' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specplan")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
