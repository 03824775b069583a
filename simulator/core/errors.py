"""Errors a user can cause. The CLI turns each into one line on stderr and exit status 2.

`SpecplanError` is the root's base (specplan.errors), shared with the leaf
packages' own types; `ScenarioError` is a scenario that does not validate.
"""

from specplan.errors import KeyedError, SpecplanError

__all__ = ["ScenarioError", "SpecplanError"]


class ScenarioError(KeyedError):
    """A scenario that does not validate; the message starts with the key path."""
