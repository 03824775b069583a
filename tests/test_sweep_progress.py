"""Progress: a bar with an ETA on a terminal, plain lines every ten seconds elsewhere, silent for a short run."""

from __future__ import annotations

import io
import re
import time

from specplan.cli.progress import simulate_with_progress
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.core.progress import Progress, format_duration
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.scenario import scenario_from_mapping
from tests.test_sweep import REPO, tiny


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_eta_comes_from_the_items_done_in_this_run():
    clock, out = Clock(), Terminal()
    with Progress(10, "sweep", stream=out, clock=clock) as bar:
        bar.skip(4)  # cached points do not count towards the rate
        assert bar.eta_s() is None
        clock.now += 6.0
        bar.advance(2)  # 3 s per item, 4 items left
        assert bar.eta_s() == 12.0
        assert bar.line() == "sweep [#################-----------] 6/10 ETA 12s"
        clock.now += 12.0
        bar.advance(4)
    lines = out.getvalue().split("\r")
    assert "10/10 18s elapsed" in lines[-1] and out.getvalue().endswith("\n")


def test_silent_when_the_stream_is_not_a_terminal():
    out = io.StringIO()
    with Progress(3, "sweep", stream=out) as bar:
        bar.advance(3)
    assert out.getvalue() == ""
    forced = io.StringIO()
    with Progress(1, stream=forced, enabled=True) as bar:
        bar.advance()
    assert "1/1" in forced.getvalue()


def test_durations_read_at_a_glance():
    assert [format_duration(s) for s in (0.4, 7, 185, 3720)] == ["0s", "7s", "3m05s", "1h02m"]


def test_sweeps_draw_progress_on_a_terminal_only(tmp_path, monkeypatch):
    from specplan.simulator.study.options import RunOptions
    from specplan.simulator.study.sweep.run import run_sweep
    from tests.test_sweep import tiny

    raw = tiny()
    raw["sweep"]["seeds"] = [1]
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    run_sweep(raw, None, RunOptions(out_dir=tmp_path / "a", workers=1))
    assert "sweep [" in err.getvalue() and "6/6" in err.getvalue()
    plain = io.StringIO()
    monkeypatch.setattr("sys.stderr", plain)
    run_sweep(raw, None, RunOptions(out_dir=tmp_path / "b", workers=1))
    assert plain.getvalue() == ""


def test_a_single_run_with_a_bar_gives_the_same_results():
    raw = tiny()
    del raw["sweep"]
    for horizon in ({"duration_s": 5, "warmup_s": 1}, {"requests": 40, "warmup_s": 0}):
        scenario = scenario_from_mapping({**raw, "horizon": horizon}, REPO)
        plain = simulate(scenario, itl=True)  # `specplan run` measures ITL
        with_bar = simulate_with_progress(scenario, enabled=True)
        summary = clean({k: v for k, v in with_bar.summary.items() if k != "wall_s"})
        assert summary == clean({k: v for k, v in plain.summary.items() if k != "wall_s"})
        assert with_bar.requests.equals(plain.requests)


def test_a_stream_that_is_not_a_terminal_gets_plain_lines_every_period():
    # issue 45, item 13: a 12-minute plan printed nothing to a log until it ended
    out = io.StringIO()
    with Progress(2, "plan", stream=out, period_s=0.02, detail=lambda: "3 probe runs simulated") as bar:
        time.sleep(0.15)
        bar.advance()
        time.sleep(0.1)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines[0].startswith("plan: 0/2 done; ") and lines[0].endswith(" elapsed; 3 probe runs simulated")
    assert any(line.startswith("plan: 1/2 done; ") and "ETA" in line for line in lines)
    assert lines[-1].startswith("plan: 1/2 done; ")  # the closing line: where it ended


def test_a_plan_on_a_log_says_it_is_alive(tmp_path, monkeypatch):
    from specplan.simulator.study.options import PlanOptions, RunOptions
    from specplan.simulator.study.plan.run import plan_capacity
    from specplan.simulator.study.plan.target import Target

    raw = tiny(workload={"arrivals": {"kind": "poisson", "rate_per_s": 4}, "prompt_tokens": {"kind": "fixed",
               "value": 64}, "output_tokens": {"kind": "fixed", "value": 40}}, horizon={"duration_s": 20,
               "warmup_s": 2})
    del raw["sweep"], raw["sla"]
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    monkeypatch.setattr("specplan.simulator.core.progress.PLAIN_PERIOD_S", 0.001)
    plan_capacity(raw, Target("rate_per_s", 4.0, ("ttft_p99_s<=5",), seeds=1),
                  RunOptions(workers=1, out_dir=tmp_path), PlanOptions(max_replicas=2))
    lines = log.getvalue().splitlines()
    assert lines and all(line.startswith("plan: ") for line in lines)
    assert re.fullmatch(r"plan: 1/1 done; \d+s elapsed; [1-9]\d* probe runs? simulated", lines[-1])
