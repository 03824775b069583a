"""The workload package's error: a trace file or a workload declaration that cannot be used."""

from specplan.errors import KeyedError, SpecplanError


class TraceError(SpecplanError):
    """A trace file, a length distribution or an arrival process that is wrong; one line, no traceback."""


class WorkloadKeyError(TraceError, KeyedError):
    """A `workload:` value that breaks a rule across its keys; the message starts with the key path."""
