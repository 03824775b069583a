"""What a printed answer cannot show by itself: how well public figures validate it, and whether its window is
steady state.

`plan` and `run` print these lines under their answer (`answer_caveats`;
`source_caveats` for a scenario file and its overrides, `search_caveats`
for a search's winning deployment):

- validation (replication_record.validation_lines): the replication
  record's predicted error for the deployment's engine / GPU / layout, or
  that no public figure covers it; prompts priced on the decode table;
- steady state, for agent sessions (`steady_state_lines`): a session adds
  its answer and new tokens to its context every turn, and lanes play a
  session from its start turn to its end, so a window only a few sessions
  long sees few of them whole and its statistics still move as it
  lengthens (scenarios/agentic.yaml, one seed: TTFT p90 0.31 s over 600 s,
  0.20 s over 6,000 s; issue 45's 400-lane plan: TPOT p50 16.9 ms, then
  18.7 ms). The line gives the mean session's length in tool gaps alone (a
  lower bound: answers and prefills add to it) against the measured window,
  and says the window is not steady state where a session outlasts a fifth
  of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.scenario.spec import Scenario
from specplan.simulator.study.points import read_source, validated
from specplan.simulator.study.replication_record import validation_lines
from specplan.traces.session_load import lognormal_mean, session_load
from specplan.traces.sessions import read_sessions
from specplan.traces.spec import SessionArrivals

STEADY_SHARE = 0.2   # a mean session longer than this share of the window: the window is not steady state


def source_caveats(source: str | Path, overrides: tuple[str, ...] | list[str] = ()) -> list[str]:
    """answer_caveats of a scenario file with its overrides (the base scenario a plan sizes)."""
    raw, folder, name = read_source(source, overrides)
    scenario = validated(raw, folder, name, "")
    return answer_caveats(scenario, load_profile(scenario.hardware.profile))


class SearchAnswer(Protocol):
    """What search_caveats reads of a search's plan (plan.search.DeploymentPlan, not imported: it needs pandas,
    which `check` and `run`, importing this module, do not)."""

    @property
    def winner(self) -> Any: ...

    def point_scenario(self, point: Any, replicas: int, /) -> Scenario: ...


def search_caveats(plan: SearchAnswer) -> list[str]:
    """answer_caveats of a search's winner at its replicas (none when no deployment meets the SLA)."""
    winner = plan.winner
    if winner is None or winner.sizing.replicas is None:
        return []
    scenario = plan.point_scenario(winner, winner.sizing.replicas)
    return answer_caveats(scenario, load_profile(scenario.hardware.profile))


def answer_caveats(scenario: Scenario, profile: StepProfile) -> list[str]:
    """The validation lines, then the steady-state line of agent sessions (module docstring)."""
    return [*validation_lines(scenario, profile), *steady_state_lines(scenario)]


def steady_state_lines(scenario: Scenario) -> list[str]:
    """One line for agent sessions: the mean session's length in tool gaps against the measured window."""
    arrivals = scenario.workload.arrivals
    if not isinstance(arrivals, SessionArrivals) or scenario.horizon.duration_s is None:
        return []
    turns = mean_turns(arrivals)
    load = session_load(arrivals, read_files=True)
    span_s = turns * (load.gap_s if load is not None else 0.0)
    window_s = scenario.horizon.duration_s
    length = f"a mean session runs {turns:.0f} turns, {span_s:,.0f} s of tool gaps alone"
    if span_s > STEADY_SHARE * window_s:
        return [f"steady state: not reached: {length}, against the {window_s:,.0f} s window: it sees few sessions "
                "whole while their contexts grow, so its statistics still move as it lengthens "
                "(docs/guides/agentic.md); check the answer at a horizon several sessions long "
                "(--set horizon.duration_s=...)"]
    return [f"steady state: {length}, under a fifth of the {window_s:,.0f} s window: lanes hold sessions of every "
            "age"]


def mean_turns(arrivals: SessionArrivals) -> float:
    """The mean main-agent turns of a session: the generator's lognormal mean, or a trace's own."""
    shape = arrivals.generate
    if shape is not None:
        return lognormal_mean(shape.turns_median, shape.turns_sigma, shape.turns_max)
    traces = read_sessions(arrivals.path, arrivals.format, arrivals.block_tokens)
    return sum(len(trace.root.turns()) for trace in traces) / len(traces)

