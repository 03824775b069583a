"""A one-line progress bar with ETA on stderr, for sweeps, plans and long runs.

It draws only when its stream is a terminal (or when forced), so scripts and
CI logs stay clean; `--quiet` and `--json` turn it off. The ETA is the mean
time per item computed so far times the items left; items that were already
done (cached sweep points) are counted without moving the rate.

    with Progress(total=36, title="sweep") as bar:
        bar.skip(reused)
        for ...: bar.advance()
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 28


def format_duration(seconds: float) -> str:
    """'7s', '3m05s', '1h02m'."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Progress:
    """Counts finished items out of `total` and redraws one line (at most ~10 times a second)."""

    def __init__(self, total: int, title: str = "", stream: TextIO | None = None,
                 enabled: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(0, int(total))
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.clock = clock
        self.started_s = self.clock()
        self.done = 0
        self.skipped = 0
        self.last_draw_s = -1.0

    def __enter__(self) -> Progress:
        self.draw(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def close(self) -> None:
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
