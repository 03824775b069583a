"""The first answer comes first: a command imports only what it needs (issue 32, item 7).

`specplan --help` took 3.6 s and `check` as long, importing scipy.stats, the
report's matplotlib and pandas before doing anything. Each story runs a
command in a fresh interpreter and lists which heavy libraries it imported
(no timing is asserted: benchmarks/cli_startup.py measures the time).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.test_sweep import tiny, write_yaml

pytestmark = pytest.mark.slow("starts fresh interpreters to see what each command imports")
HEAVY = ("pandas", "matplotlib", "scipy", "scipy.stats", "scipy.optimize", "torch", "ray")
PROBE = ("import contextlib, io, json, sys\n"
         "from specplan.cli.main import main\n"
         "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
         "    try:\n"
         "        status = main(sys.argv[1:])\n"
         "    except SystemExit as exc:\n"
         "        status = exc.code\n"
         f"print(json.dumps([status, sorted(m for m in {HEAVY!r} if m in sys.modules), "
         "sorted(m for m in sys.modules if m.startswith('specplan.cli.commands.'))]))\n")


def imported(*args: object) -> tuple[int, list[str], list[str]]:
    """(exit status, heavy libraries imported, command modules imported) of `specplan ARGS`."""
    done = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=True)
    status, heavy, commands = json.loads(done.stdout)
    return status, heavy, commands


def test_help_imports_no_command_and_no_heavy_library():
    assert imported("--help") == (0, [], [])


def test_check_imports_its_own_command_and_no_heavy_library():
    status, heavy, commands = imported("check", REPO / "scenarios" / "default.yaml")
    assert (status, heavy, commands) == (0, [], ["specplan.cli.commands.run"])


def test_a_command_imports_only_its_own_module(tmp_path):
    status, _, commands = imported("trace-stats", "--help")
    assert (status, commands) == (0, ["specplan.cli.commands.trace_stats"])


def test_a_sweep_without_report_draws_nothing_and_a_run_fits_no_interval(tmp_path):
    raw = tiny(horizon={"duration_s": 2, "warmup_s": 0.5})
    raw["sweep"] = {"variants": [{"label": "static-3"}], "seeds": [1]}
    path = write_yaml(tmp_path / "s.yaml", raw)
    status, heavy, _ = imported("sweep", path, "--out", tmp_path / "sweep", "--no-report", "--workers", "1", "--quiet")
    assert status == 0 and "matplotlib" not in heavy and "scipy.stats" not in heavy
    status, heavy, _ = imported("run", path, "--out", tmp_path / "run", "--quiet")
    assert status == 0 and not {"matplotlib", "scipy.stats", "torch", "ray"} & set(heavy)
