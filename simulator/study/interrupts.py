"""Ctrl-C during a batch of simulations: the first finishes what is running, the second stops now.

    with Stopper(running=lambda: len(started), stop_now=kill_workers) as stop:
        for ...:
            if stop.requested: break        # start nothing new
        stop.check()                        # raise Interrupted once the batch is drained

First SIGINT: one line on stderr saying how many simulations are being
finished; nothing new starts; what finishes is stored as usual, then
`Interrupted` is raised (the CLI exits 130 without a traceback). Second
SIGINT: `stop_now()` (kill the worker processes) and `Interrupted` at once.
Either way every stored result was written whole (temporary file, then
rename), so the next run resumes from it. Worker processes ignore SIGINT
(`ignore_sigint`, the pool's initializer): a terminal's Ctrl-C reaches the
whole process group, and only the parent decides. Outside the main thread
(where no signal handler can be installed) the default KeyboardInterrupt
applies.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any


def line_break() -> str:
    """A line break first on a terminal, where a progress bar may be drawn on the current line."""
    return "\n" if sys.stderr.isatty() else ""


class Interrupted(KeyboardInterrupt):
    """A batch stopped by Ctrl-C; the message says what was kept."""


def ignore_sigint() -> None:
    """Pool initializer: workers leave Ctrl-C to the parent (no tracebacks from them)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Stopper:
    """SIGINT handler for one batch: a request to stop after the running items, then at once."""

    def __init__(self, running: Callable[[], int], stop_now: Callable[[], None] = lambda: None,
                 what: str = "point", kept: str = "") -> None:
        self.running = running
        self.stop_now = stop_now
        self.what = what
        self.kept_text = kept
        self.signals = 0
        self.previous: Any = None
        self.installed = False

    @property
    def requested(self) -> bool:
        return self.signals > 0

    def __enter__(self) -> Stopper:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self.handle)
            self.installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.installed:
            signal.signal(signal.SIGINT, self.previous)

    def handle(self, signum: int, frame: Any) -> None:
        self.signals += 1
        if self.signals == 1:
            n = self.running()
            print(f"{line_break()}specplan: interrupted: finishing {n} running {self.what}(s) and starting no more; "
                  "Ctrl-C again stops them now", file=sys.stderr, flush=True)
            if n == 0:
                raise Interrupted(self.kept())
            return
        self.stop_now()
        raise Interrupted(f"stopped {self.running()} running {self.what}(s); " + self.kept())

    def kept(self) -> str:
        return self.kept_text or f"every finished {self.what} is kept: run the same command again to resume"

    def check(self) -> None:
        """Raise Interrupted when a stop was requested (call once the running items are collected)."""
        if self.requested:
            raise Interrupted(self.kept())
