"""Ctrl-C on a real worker pool: `specplan sweep --workers 2` in its own process group, sent SIGINT
the way a terminal sends it (to the whole group, workers included).

One Ctrl-C: a line saying how many running points are being finished, exit 130, no traceback
(none from the workers either), and the next run resumes from what was stored. Two: the workers
are killed at once, exit 130 within a few seconds, no traceback, no temporary file left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_sweep import tiny, write_yaml

SPECPLAN = [sys.executable, "-m", "specplan.cli.main"]


POINTS = 6


def slow_sweep(tmp_path: Path) -> Path:
    """6 points of about half a second each (a long horizon of a tiny model)."""
    raw = tiny()
    raw["horizon"] = {"duration_s": 150, "warmup_s": 1}
    raw["sweep"]["seeds"] = [1]
    return write_yaml(tmp_path / "slow.yaml", raw)


def start(scenario: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([*SPECPLAN, "sweep", str(scenario), "--out", str(out), "--workers", "2",
                             "--no-report", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def wait_for_points(out: Path, n: int, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(list((out / "points").glob("*.json"))) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no point was stored in time"
        time.sleep(0.05)


def ctrl_c(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: the parent and its workers


@pytest.mark.slow("sends a real SIGINT to a process group of sweep workers")
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups and signals")
def test_one_ctrl_c_finishes_running_points_exits_130_and_the_next_run_resumes(tmp_path):
    scenario, out = slow_sweep(tmp_path), tmp_path / "out"
    proc = start(scenario, out)
    wait_for_points(out, 1, proc)
    ctrl_c(proc)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err.replace("specplan: interrupted", "")
    assert "specplan: interrupted: finishing" in err and "running point(s)" in err
    assert "run the same command again to resume" in err
    stored = len(list((out / "points").glob("*.json")))
    assert 1 <= stored < POINTS and not list((out / "points").glob(".*.tmp"))
    done = subprocess.run([*SPECPLAN, "sweep", str(scenario), "--out", str(out), "--workers", "2",
                           "--no-report"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"({POINTS - stored} simulated, {stored} reused)" in done.stdout


@pytest.mark.slow("sends a real SIGINT to a process group of sweep workers")
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups and signals")
def test_a_second_ctrl_c_stops_the_workers_at_once(tmp_path):
    scenario, out = slow_sweep(tmp_path), tmp_path / "out"
    proc = start(scenario, out)
    wait_for_points(out, 1, proc)
    ctrl_c(proc)
    time.sleep(0.1)
    ctrl_c(proc)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 10.0  # it used to hang for minutes
    assert "Traceback" not in err and "stopped" in err
    assert len(err.strip().splitlines()) <= 3  # the finishing line, the stopped line, nothing else
    assert not list((out / "points").glob(".*.tmp"))


def test_a_stopping_command_ignores_further_stop_signals(monkeypatch):
    """A second Ctrl-C while the command says it stopped and exits would end it by the signal (status -2, no line
    of its own): once stopping, the command ignores stop signals."""
    from types import SimpleNamespace

    from specplan.cli import main as cli
    from specplan.simulator.study.interrupts import STOP_SIGNALS

    def interrupted(_args):
        raise KeyboardInterrupt

    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        monkeypatch.setattr(cli, "parser", lambda _modules: SimpleNamespace(
            parse_args=lambda _argv: SimpleNamespace(func=interrupted)))
        assert cli.main(["run"]) == 130
        assert all(signal.getsignal(signum) == signal.SIG_IGN for signum in STOP_SIGNALS)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
