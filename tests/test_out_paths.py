"""`--out` on every command: a wrong kind of path or an unwritable place is one line and exit 2,
checked before any work; earlier results are never overwritten without --force, except by the
commands whose folder is their resume cache (sweep, demo, tune, plan)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_planner import KNOWN
from tests.test_sweep import tiny, write_yaml

SCRAPE = REPO / "tests" / "data"


def scenario(tmp_path: Path) -> Path:
    raw = tiny()
    raw["horizon"] = {"duration_s": 2, "warmup_s": 0.5}
    raw["sweep"]["seeds"] = [1]
    raw["sweep"]["variants"] = raw["sweep"]["variants"][1:2]
    return write_yaml(tmp_path / "s.yaml", raw)


def scrape() -> Path:
    return next(SCRAPE.rglob("*.prom"))


# command name → its arguments before --out, and whether --out is a folder
COMMANDS = {
    "run": (lambda t: ["run", scenario(t)], True),
    "calibrate": (lambda t: ["calibrate", scenario(t), "--samples", "100"], True),
    "fidelity": (lambda t: ["fidelity", scenario(t)], True),
    "sweep": (lambda t: ["sweep", scenario(t)], True),
    "demo": (lambda t: ["demo"], True),
    "tune": (lambda t: ["tune", scenario(t)], True),
    "plan": (lambda t: ["plan", write_yaml(t / "k.yaml", KNOWN), "--rate", "1", "--sla-tps", "1"], True),
    "acceptance": (lambda t: ["acceptance", "vllm-metrics", scrape()], False),
    "profile": (lambda t: ["profile", "--source", "aiconfigurator", "--model", "m", "--system", "h200_sxm"], False),
    "profile-plot": (lambda t: ["profile-plot", "builtin:h200-llama3.1-8b-vllm"], False),
}


def one_line_error(status: int, out: str, err: str, text: str) -> None:
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and text in lines[0], err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_out_of_the_wrong_kind_is_one_line_and_exit_2(cli, tmp_path, name):
    args, is_folder = COMMANDS[name]
    wrong = tmp_path / "taken"
    if is_folder:
        wrong.write_text("a file")
        one_line_error(*cli(*args(tmp_path), "--out", wrong), "is a file, not a folder")
    else:
        wrong.mkdir()
        one_line_error(*cli(*args(tmp_path), "--out", wrong), "is a folder, not a file")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_out_that_cannot_be_written_is_one_line_and_exit_2(cli, tmp_path, name):
    args, is_folder = COMMANDS[name]
    (tmp_path / "plain").write_text("a file")
    under_a_file = tmp_path / "plain" / ("results" if is_folder else "out.csv")
    one_line_error(*cli(*args(tmp_path), "--out", under_a_file), "a part of the path is a file")
    nowhere = Path("/proc/specplan-nowhere") / ("results" if is_folder else "out.csv")
    one_line_error(*cli(*args(tmp_path), "--out", nowhere), f"--out {nowhere}: cannot")


def test_run_keeps_earlier_results_unless_forced(cli, tmp_path):
    path, out = scenario(tmp_path), tmp_path / "r"
    assert cli("run", path, "--out", out, "--quiet")[0] == 0
    before = (out / "summary.json").read_text()
    one_line_error(*cli("run", path, "--out", out, "--quiet", "--seed", "9"), "already holds results (summary.json")
    assert (out / "summary.json").read_text() == before
    assert cli("run", path, "--out", out, "--quiet", "--seed", "9", "--force")[0] == 0
    assert (out / "summary.json").read_text() != before


def test_acceptance_keeps_an_earlier_fit_unless_forced(cli, tmp_path):
    out = tmp_path / "drafter.yaml"
    out.write_text("earlier fit\n")
    one_line_error(*cli("acceptance", "vllm-metrics", scrape(), "--out", out), "already exists; pass --force")
    assert out.read_text() == "earlier fit\n"
    assert cli("acceptance", "vllm-metrics", scrape(), "--out", out, "--force")[0] == 0
    assert "drafter:" in out.read_text()


def test_sweep_resumes_into_its_own_folder_without_force(cli, tmp_path):
    path, out = scenario(tmp_path), tmp_path / "sw"
    assert cli("sweep", path, "--out", out, "--quiet", "--workers", "1", "--no-report")[0] == 0
    status, text, _ = cli("sweep", path, "--out", out, "--workers", "1", "--no-report")
    assert status == 0 and "(0 simulated, 2 reused)" in text
