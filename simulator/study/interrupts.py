"""Stopping a batch of simulations: Ctrl-C, SIGTERM and SIGHUP alike; workers that die with their parent.

    with Stopper(running=lambda: len(started), stop_now=kill_workers) as stop:
        for ...:
            if stop.requested: break        # start nothing new
        stop.check()                        # raise Interrupted once the batch is drained

The first stop signal (SIGINT from Ctrl-C, SIGTERM from a process manager or
`timeout`, SIGHUP from a closed terminal): one line on stderr saying how many
simulations are being finished; nothing new starts; what finishes is stored
as usual, then `Interrupted` is raised (the CLI exits 128 + the signal's
number, 130 for Ctrl-C, without a traceback). A second one: `stop_now()`
(kill the worker processes) and `Interrupted` at once. Either way every
stored result was written whole (temporary file, then rename), so the next
run resumes from it. Outside a batch the CLI turns SIGTERM and SIGHUP into
the same `Interrupted` (`stop_on_signals`), as Python turns SIGINT into
KeyboardInterrupt. Outside the main thread (where no signal handler can be
installed) the defaults apply.

Worker processes (`worker_init`, every pool's initializer) ignore SIGINT and
SIGHUP, which a terminal sends to the whole process group: only the parent
decides. They keep SIGTERM's default, which the pool itself uses on a broken
worker. And they end when their parent dies, even by SIGKILL: on Linux the
kernel sends them SIGKILL (prctl PR_SET_PDEATHSIG), elsewhere a thread
watches the parent's pid; a pool of a worker (a sampled probe's replicas)
inherits the rule, so no simulation outlives the command that started it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
PR_SET_PDEATHSIG = 1
WATCH_PERIOD_S = 0.5


def line_break() -> str:
    """A line break first on a terminal, where a progress bar may be drawn on the current line."""
    return "\n" if sys.stderr.isatty() else ""


def say(text: str) -> None:
    """One line on stderr; nothing if stderr is gone (a closed terminal's SIGHUP)."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


class Interrupted(KeyboardInterrupt):
    """A batch (or a command) stopped by a signal; the message says what was kept, `signum` which signal.

    Both live in `args`: SimPy re-raises a process's exception as `type(e)(*e.args)`, which must
    keep the signal (a SIGTERM inside a step would otherwise exit as Ctrl-C's 130)."""

    def __init__(self, message: str = "", signum: int = int(signal.SIGINT)) -> None:
        super().__init__(message, int(signum))
        self.signum = int(signum)

    def __str__(self) -> str:
        return str(self.args[0])


def stopping() -> None:
    """A command already stopping ignores further stop signals (main thread only): a second Ctrl-C while it
    says so and exits would end it by the signal itself (no exit status of its own)."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def stop_on_signals() -> None:
    """The command's handlers: SIGTERM and SIGHUP stop it as Ctrl-C does (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signum != signal.SIGINT:
            signal.signal(signum, raise_interrupted)


def raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted("", signum)


def worker_init(parent: int) -> None:
    """Pool initializer (`initargs=(os.getpid(),)`: the pool's owner): leave Ctrl-C and hang-ups to the parent, keep
    SIGTERM's default, die with the parent."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL if signum == getattr(signal, "SIGTERM", None) else signal.SIG_IGN)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """End this process when its parent dies (SIGKILL included): the kernel's parent-death signal on Linux,
    else a thread that polls the parent's pid. `parent` is the pid the pool's owner gave, not this process's
    getppid() at start: a parent killed before the initializer runs has already handed its child to init, and
    the checks below (here, and the watcher's first look) must see that."""
    if sys.platform.startswith("linux") and set_parent_death_signal():
        if os.getppid() != parent:  # the parent died before the signal was set (or before this initializer ran)
            os._exit(1)
        return
    threading.Thread(target=watch_parent, args=(parent,), daemon=True, name="specplan-parent-watch").start()


def set_parent_death_signal() -> bool:
    """prctl(PR_SET_PDEATHSIG, SIGKILL); whether it took."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_PERIOD_S)
    os._exit(1)


class Stopper:
    """The stop signals' handler for one batch: a request to stop after the running items, then at once."""

    def __init__(self, running: Callable[[], int], stop_now: Callable[[], None] = lambda: None,
                 what: str = "point", kept: str = "") -> None:
        self.running = running
        self.stop_now = stop_now
        self.what = what
        self.kept_text = kept
        self.signals = 0
        self.signum: int = signal.SIGINT
        self.previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signals > 0

    def __enter__(self) -> Stopper:
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self.handle) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)

    def handle(self, signum: int, frame: Any) -> None:
        self.signals += 1
        if self.signals == 1:
            self.signum = signum
            n = self.running()
            again = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            say(f"{line_break()}specplan: interrupted: finishing {n} running {self.what}(s) and starting no more; "
                f"{again} again stops them now")
            if n == 0:
                raise Interrupted(self.kept(), signum)
            return
        self.stop_now()
        raise Interrupted(f"stopped {self.running()} running {self.what}(s); " + self.kept(), self.signum)

    def kept(self) -> str:
        return self.kept_text or f"every finished {self.what} is kept: run the same command again to resume"

    def check(self) -> None:
        """Raise Interrupted when a stop was requested (call once the running items are collected)."""
        if self.requested:
            raise Interrupted(self.kept(), self.signum)
