"""A refused command leaves nothing behind (issue 32, item 5).

`--out` is checked before any work and created only when the first result
is written: a command refused on a malformed scenario, a bad flag, a bad SLA
or a bad trace exits 2 with one line and leaves no folder (it used to leave
an empty one, which a re-run then took for a resume cache).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_sweep import tiny, write_yaml

DEFAULT = REPO / "scenarios" / "default.yaml"


def bad_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nnot-a-time,10,20\n")
    raw = tiny(workload={"arrivals": {"kind": "trace", "path": str(trace), "format": "azure"}})
    del raw["sweep"]
    return write_yaml(tmp_path / "trace.yaml", raw)


def malformed(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text("name: [\n")
    return path


# a refused command: its arguments before --out, and a part of its one-line refusal
REFUSED = {
    "sweep on malformed YAML": (lambda t: ["sweep", malformed(t)], "not valid YAML"),
    "sweep --workers 0": (lambda t: ["sweep", DEFAULT, "--workers", "0"], "--workers must be >= 1"),
    "plan --users 0": (lambda t: ["plan", DEFAULT, "--users", "0", "--sla-tps", "5"], "--users must be a positive"),
    "plan with a bad --sla": (lambda t: ["plan", DEFAULT, "--users", "4", "--sla", "foo<=3"], "unknown SLA key"),
    "tune with a bad --lengths": (lambda t: ["tune", DEFAULT, "--lengths", "1,20"], "must lie in 0..7"),
    "run on a bad trace": (lambda t: ["run", bad_trace(t)], "malformed azure line"),
    "calibrate with too few samples": (lambda t: ["calibrate", DEFAULT, "--samples", "5"], "at least 100"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_command_leaves_no_out_folder(cli, tmp_path, name):
    args, message = REFUSED[name]
    out = tmp_path / "results" / "here"
    status, _, err = cli(*args(tmp_path), "--out", out)
    assert status == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists() and not out.parent.exists()


def test_a_command_that_answers_creates_its_folder_and_parents(cli, tmp_path):
    raw = tiny(horizon={"duration_s": 2, "warmup_s": 0.5})
    del raw["sweep"]
    out = tmp_path / "a" / "b"
    status, _, _ = cli("run", write_yaml(tmp_path / "s.yaml", raw), "--out", out, "--quiet")
    assert status == 0 and (out / "summary.json").is_file()
