"""Progress on stderr for sweeps, plans and long runs: a redrawn bar with ETA, or plain lines.

On a terminal (or when forced) it redraws one line, a bar with the ETA. On
a stream that is not a terminal (a log, a pipe, a CI job) it writes a plain
line every `PLAIN_PERIOD_S` seconds of wall time ("plan: 0/2 done; 1m10s
elapsed; 14 probe runs simulated"), from a ticker thread, so a plan whose
one variant takes 12 minutes still says it is alive; one that ends sooner
writes nothing, so short scripts stay clean. `--quiet` and `--json` turn
both off. The ETA is the mean time per item computed so far times the items
left; items that were already done (cached sweep points) are counted
without moving the rate.

    with Progress(total=36, title="sweep") as bar:
        bar.skip(reused)
        for ...: bar.advance()
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 28
PLAIN_PERIOD_S = 10.0  # seconds of wall time between two plain lines (a stream that is not a terminal)
# held while a ticker writes, and across a fork: a worker process forked mid-line would inherit a held stream lock
WRITING = threading.Lock()
os.register_at_fork(before=WRITING.acquire, after_in_parent=WRITING.release, after_in_child=WRITING.release)


def format_duration(seconds: float) -> str:
    """'7s', '3m05s', '1h02m'."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Progress:
    """Counts finished items out of `total`: redraws one line on a terminal (at most ~10 times a second), or
    writes a plain line every `period_s` elsewhere (`enabled` None: by the stream; True: the bar; False: nothing).
    `detail()` adds what a plain line says beyond the count (the probe runs a plan has simulated)."""

    def __init__(self, total: int, title: str = "", stream: TextIO | None = None,
                 enabled: bool | None = None, clock: Callable[[], float] = time.monotonic,
                 period_s: float | None = None, detail: Callable[[], str] | None = None) -> None:
        self.total = max(0, int(total))
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        terminal = is_terminal(self.stream)
        self.enabled = terminal if enabled is None else enabled
        self.plain = enabled is None and not terminal
        self.period_s = PLAIN_PERIOD_S if period_s is None else period_s
        self.detail = detail
        self.clock = clock
        self.started_s = self.clock()
        self.done = 0
        self.skipped = 0
        self.last_draw_s = -1.0
        self.plain_lines = 0
        self.stopped = threading.Event()
        self.ticker: threading.Thread | None = None

    @property
    def counting(self) -> bool:
        """Whether anything is shown (the bar or plain lines): a caller that feeds the count checks this."""
        return self.enabled or self.plain

    def __enter__(self) -> Progress:
        self.draw(force=True)
        if self.plain and math.isfinite(self.period_s):
            self.ticker = threading.Thread(target=self.tick, name=f"progress {self.title}", daemon=True)
            self.ticker.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(ended=exc_type is None)

    def skip(self, n: int) -> None:
        """Items already done before this run (not used for the rate)."""
        self.skipped += n
        self.done += n
        self.draw(force=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.draw(force=self.done >= self.total)

    def update(self, done: int) -> None:
        """Set the count of finished items (never backwards, never past the total)."""
        self.done = min(self.total, max(self.done, done))
        self.draw()

    def eta_s(self) -> float | None:
        worked = self.done - self.skipped
        if worked <= 0:
            return None
        elapsed = self.clock() - self.started_s
        return elapsed / worked * (self.total - self.done)

    def line(self) -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = round(frac * WIDTH)
        bar = "#" * filled + "-" * (WIDTH - filled)
        eta = self.eta_s()
        elapsed = self.clock() - self.started_s
        tail = f"ETA {format_duration(eta)}" if eta is not None and self.done < self.total else \
            f"{format_duration(elapsed)} elapsed"
        title = f"{self.title} " if self.title else ""
        return f"{title}[{bar}] {self.done}/{self.total} {tail}"

    def draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self.last_draw_s < 0.1:
            return
        self.last_draw_s = now
        self.stream.write("\r" + self.line() + "\x1b[K")
        self.stream.flush()

    def tick(self) -> None:
        """The ticker thread: a plain line every period until the progress closes."""
        while not self.stopped.wait(self.period_s):
            self.write_plain()

    def write_plain(self) -> None:
        with WRITING:
            self.stream.write(self.plain_line() + "\n")
            self.stream.flush()
        self.plain_lines += 1

    def plain_line(self) -> str:
        """'plan: 0/2 done; 1m10s elapsed; 14 probe runs simulated' (with the ETA once an item has finished)."""
        eta = self.eta_s()
        elapsed = format_duration(self.clock() - self.started_s)
        parts = [f"{self.done}/{self.total} done", f"{elapsed} elapsed"]
        if eta is not None and self.done < self.total:
            parts.append(f"ETA {format_duration(eta)}")
        if self.detail is not None:
            parts.append(self.detail())
        title = f"{self.title}: " if self.title else ""
        return title + "; ".join(p for p in parts if p)

    def close(self, ended: bool = True) -> None:
        """Stop the ticker (a run that wrote plain lines and ended writes where it ended; a refusal or an
        interrupt says its own line) and finish the bar."""
        if self.ticker is not None:
            self.stopped.set()
            self.ticker.join()
            self.ticker = None
            if self.plain_lines and ended:
                self.write_plain()
        if self.enabled:
            self.draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
