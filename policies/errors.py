"""The policy package's error: a policy name or parameter that cannot be used."""

from specplan.errors import KeyedError, SpecplanError


class PolicyError(SpecplanError):
    """A verification policy that cannot run as asked; one line, no traceback."""


class PolicyKeyError(PolicyError, KeyedError):
    """A bad `policy:` name or parameter; the message starts with the key path."""
