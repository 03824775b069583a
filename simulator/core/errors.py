"""Errors a user can cause. The CLI turns each into one line on stderr and exit status 2."""


class SpecplanError(Exception):
    """Bad input: a scenario, a profile, a trace or a command-line argument.

    The message is one line that names what is wrong (a key path, a file and
    line, a value). The CLI prints it without a traceback and exits with 2.
    """


class ScenarioError(SpecplanError):
    """A scenario that does not validate; the message starts with the key path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}" if path else message)
