"""The distribution as a user installs it: one import root, package data inside, nothing else.

The wheel is built from a copy of the source tree (no build isolation: the
dev environment's setuptools), installed with no dependencies into a fresh
virtual environment, and imported there with the dev environment's
third-party packages on PYTHONPATH (site-packages' .pth hooks, the editable
install among them, are not read from PYTHONPATH).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow("builds a wheel and installs it in a fresh environment")
SKIP = shutil.ignore_patterns(".git", ".venv", "out", "build", "dist", "*.egg-info", "__pycache__", ".*cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel and everything its build printed (verbose: the build backend's warnings included)."""
    work = tmp_path_factory.mktemp("wheel")
    shutil.copytree(REPO, work / "src", ignore=SKIP)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "-w", str(work / "dist"), str(work / "src")], check=True, capture_output=True, text=True)
    (found,) = (work / "dist").glob("specplan-*.whl")
    return found, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(built: tuple[Path, str]) -> Path:
    return built[0]


def test_the_build_declares_its_data_folders(built: tuple[Path, str]) -> None:
    """`make demo` printed ~150 lines of setuptools' "Package would be ignored" before its answer."""
    assert "would be ignored" not in built[1] and "SetuptoolsDeprecationWarning" not in built[1]


def test_the_wheel_holds_one_top_level_name_and_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"specplan"}
    assert "specplan/scenarios/default.yaml" in names
    assert "specplan/hwprofiles/data/h200-llama3.1-8b-vllm.csv" in names
    assert {"specplan/hwprofiles/shapes/llama3-8b.yaml", "specplan/hwprofiles/public/kernels.csv",
            "specplan/validation/shapes/small-cpu.yaml"} <= set(names)
    assert "specplan/py.typed" in names
    assert "specplan/simulator/study/replication_record.csv" in names  # the record beside a plan's answer
    assert not [n for n in names if n.startswith("specplan/validation/results/")]
    assert not [n for n in names if n.startswith(("specplan/tests/", "specplan/benchmarks/"))]


def test_installed_in_a_fresh_environment_it_adds_only_specplan(wheel: Path, tmp_path: Path) -> None:
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    added = {p.name for p in site.iterdir()} - {"__pycache__"}
    assert {a for a in added if not a.endswith(".dist-info")} == {"specplan"}, added
    environ = {**os.environ, "PYTHONPATH": sysconfig.get_path("purelib")}
    probe = ("import specplan, specplan.cli.main as cli\n"
             "from specplan.cli.commands.demo import default_scenario\n"
             f"assert specplan.__file__.startswith({str(site)!r}), specplan.__file__\n"
             "from specplan.simulator.study.replication_record import read_record\n"
             "assert read_record()['sglang/B200/tp'].figures > 0\n"
             "raise SystemExit(cli.main(['check', str(default_scenario())]))\n")
    done = subprocess.run([str(python), "-c", probe], cwd=tmp_path, env=environ, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout
