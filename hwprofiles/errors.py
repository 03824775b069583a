"""The profile package's error: a profile file, a built-in or a shape that cannot be used."""

from specplan.errors import SpecplanError


class ProfileError(SpecplanError):
    """A step-time profile, model shape or harness input that is wrong; one line, no traceback."""
