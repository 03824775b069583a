"""A killed command leaves no workers behind; SIGTERM and SIGHUP stop a command as Ctrl-C does (issue 32, item 10).

A plan killed by a timeout (SIGKILL to its parent) left two pool workers
simulating at full CPU for over half an hour. Stories, with real signals on
real processes: SIGKILL the parent of a plan's and of a sweep's workers,
and the workers are gone within seconds (the kernel's parent-death signal);
SIGTERM to the parent alone, or SIGHUP to the whole group as a closed
terminal sends it, finishes the running points, keeps them, says so in one
line and exits 128 + the signal, and the next run resumes; SIGTERM on a
single `run` stops it in one line too.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specplan.simulator.study.interrupts import Interrupted
from tests.test_interrupts import POINTS, SPECPLAN, slow_sweep, start, wait_for_points
from tests.test_planner import KNOWN
from tests.test_sweep import write_yaml

pytestmark = [pytest.mark.slow("sends real signals to process trees of plan, sweep and Ray workers"),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process trees from /proc")]


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for_children(proc: subprocess.Popen, n: int, timeout_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while len(found := children(proc.pid)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the workers did not start in time"
        time.sleep(0.05)
    return found


def gone_within(pids: list[int], seconds: float) -> bool:
    """Whether the processes end within `seconds`; those that do not are killed (no test leaves orphans)."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            for pid in filter(alive, pids):
                os.kill(pid, signal.SIGKILL)
            return False
        time.sleep(0.05)
    return True


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...)."""
    below: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            below.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
        except OSError:
            continue
    found, todo = [], [pid]
    while todo:
        kids = below.get(todo.pop(), [])
        found += kids
        todo += kids
    return [p for p in found if alive(p)]


def command_line(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def slow_plan(tmp_path: Path) -> Path:
    """Two variants, each a replica search of long probes: one worker each."""
    raw = copy.deepcopy(KNOWN)
    raw["horizon"] = {"duration_s": 600, "warmup_s": 8}
    return write_yaml(tmp_path / "plan.yaml", raw)


def test_killing_a_plan_by_sigkill_ends_its_workers(tmp_path):
    proc = subprocess.Popen([*SPECPLAN, "plan", str(slow_plan(tmp_path)), "--rate", "17", "--sla-tps", "50",
                             "--workers", "2", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    workers = wait_for_children(proc, 2)
    proc.kill()
    proc.wait(timeout=10)
    assert gone_within(workers, 5.0), f"workers {workers} outlived their parent"


def test_killing_a_sweep_by_sigkill_ends_its_workers(tmp_path):
    scenario, out = slow_sweep(tmp_path), tmp_path / "out"
    proc = start(scenario, out)
    workers = wait_for_children(proc, 2)
    proc.kill()
    proc.wait(timeout=10)
    assert gone_within(workers, 5.0), f"workers {workers} outlived their parent"


def test_killing_a_ray_sweep_by_sigkill_ends_its_tasks(tmp_path):
    pytest.importorskip("ray", reason="Ray (the 'ray' extra) is not installed")
    scenario, out = slow_sweep(tmp_path), tmp_path / "out"
    proc = subprocess.Popen([*SPECPLAN, "sweep", str(scenario), "--out", str(out), "--workers", "2", "--backend",
                             "ray", "--no-report", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    wait_for_points(out, 1, proc, timeout_s=120)
    tasks = [p for p in descendants(proc.pid) if command_line(p).startswith(b"ray::compute_point")]
    everything = descendants(proc.pid)
    proc.kill()
    proc.wait(timeout=10)
    assert tasks and gone_within(tasks, 10.0), "Ray's simulation tasks outlived their driver"
    gone_within(everything, 2.0)  # Ray's idle agents would notice their raylet's end within a minute: ended now


@pytest.mark.parametrize(("signum", "group", "status"), [(signal.SIGTERM, False, 143), (signal.SIGHUP, True, 129)])
def test_sigterm_and_sighup_finish_the_running_points_like_a_first_ctrl_c(tmp_path, signum, group, status):
    scenario, out = slow_sweep(tmp_path), tmp_path / "out"
    proc = start(scenario, out)
    wait_for_points(out, 1, proc)
    (os.killpg if group else os.kill)(proc.pid, signum)  # SIGHUP: a closed terminal's, to the whole group
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert "Traceback" not in err and "specplan: interrupted: finishing" in err and "running point(s)" in err
    assert "run the same command again to resume" in err
    stored = len(list((out / "points").glob("*.json")))
    assert 1 <= stored < POINTS and not list((out / "points").glob(".*.tmp"))
    done = subprocess.run([*SPECPLAN, "sweep", str(scenario), "--out", str(out), "--workers", "2", "--no-report"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and f"({POINTS - stored} simulated, {stored} reused)" in done.stdout


def test_sigterm_stops_a_single_run_in_one_line(tmp_path):
    raw = copy.deepcopy(KNOWN)
    del raw["sweep"]
    raw["horizon"] = {"duration_s": 3000, "warmup_s": 8}
    out = tmp_path / "run"
    proc = subprocess.Popen([*SPECPLAN, "run", str(write_yaml(tmp_path / "s.yaml", raw)), "--out", str(out),
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and err.strip() == "specplan: interrupted" and not out.exists()


def test_a_signal_survives_simpy_re_raising_it():
    """SimPy re-raises a process's exception as type(e)(*e.args): the signal and the message must survive."""
    import simpy

    def step(env):
        yield env.timeout(1)
        raise Interrupted("kept", signal.SIGTERM)

    env = simpy.Environment()
    env.process(step(env))
    with pytest.raises(Interrupted) as caught:
        env.run()
    assert caught.value.signum == signal.SIGTERM and str(caught.value) == "kept"


def test_a_worker_whose_parent_died_before_its_initializer_ran_ends_at_once():
    """A parent killed between a worker's fork and its pool initializer has already handed the worker to init:
    the worker's own getppid() then names init, so the initializer compares it with the pid the pool's owner
    passed (initargs) and ends, silently, instead of living on as an orphan (the race behind a flaky
    test_killing_a_sweep_by_sigkill_ends_its_workers under load)."""
    script = ("import sys; from specplan.simulator.study.interrupts import die_with_parent; "
              "die_with_parent(int(sys.argv[1])); print('alive')")
    orphan = subprocess.run([sys.executable, "-c", script, str(os.getpid() + 10**6)], capture_output=True, text=True,
                            timeout=60)
    assert (orphan.returncode, orphan.stdout, orphan.stderr) == (1, "", "")
    child = subprocess.run([sys.executable, "-c", script, str(os.getpid())], capture_output=True, text=True,
                           timeout=60)
    assert (child.returncode, child.stdout) == (0, "alive\n")
