"""The one base of every error a user can cause; the CLI turns each into one line and exit status 2.

It sits at the root so that the leaf packages (hwprofiles, traces, policies)
can give their errors this base without importing the simulator: each has
its own type (`ProfileError`, `TraceError`, `PolicyError`), the scenario
layer adds `ScenarioError`, and the CLI catches the base.
"""


class SpecplanError(Exception):
    """Bad input: a scenario, a profile, a trace or a command-line argument.

    The message is one line that names what is wrong (a key path, a file and
    line, a value). The CLI prints it without a traceback and exits with 2.
    """


class KeyedError(SpecplanError):
    """A bad value at a key path of a mapping; the message starts with the path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}" if path else message)
