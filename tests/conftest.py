"""Shared fixtures: paths, a small base scenario, and a CLI runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from specplan.cli.main import main
from specplan.simulator.scenario import scenario_from_mapping
from specplan.simulator.scenario.merge import deep_merge

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

BASE = {
    "name": "test-base",
    "seed": 7,
    "horizon": {"duration_s": 20, "warmup_s": 2},
    "hardware": {"profile": {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.05}},
    "cluster": {"replicas": 1, "router": "round_robin"},
    "engine": {"max_batch_requests": 16, "kv_capacity_tokens": 1_000_000,
               "prefill": {"mode": "disaggregated", "tokens_per_s": 20_000}},
    "drafter": {"family": "mtp", "block_size": 3,
                "acceptance": {"per_position": {"chat": [0.8, 0.7, 0.6]}, "domains": {"chat": 1.0},
                               "request_sigma": 0.0, "token_sigma": 0.0},
                "latency": {"kind": "fixed", "ms": 0.5}},
    "policy": {"name": "static", "params": {"length": 3}},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 4},
                 "prompt_tokens": {"kind": "fixed", "value": 200},
                 "output_tokens": {"kind": "fixed", "value": 50}},
}


def merged(base: dict, changes: dict) -> dict:
    """`changes` merged over `base` the way a sweep merges a variant (specplan.simulator.scenario.merge)."""
    return deep_merge(base, changes)


def make_scenario(**changes):
    return scenario_from_mapping(merged(BASE, changes), REPO)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every slow mark says why the test is slow (`make test-fast` leaves them out)."""
    for item in items:
        for mark in item.iter_markers("slow"):
            if not (mark.args and isinstance(mark.args[0], str) and mark.args[0].strip()):
                raise pytest.UsageError(f"{item.nodeid}: give @pytest.mark.slow its reason, "
                                        'e.g. @pytest.mark.slow("starts a local Ray")')


@pytest.fixture(autouse=True)
def no_plain_progress(monkeypatch):
    """In-process commands write no plain progress line (stderr is captured, not a terminal): a test that reads
    stderr whole does not depend on how long the machine takes; the progress tests set their own period."""
    monkeypatch.setattr("specplan.simulator.core.progress.PLAIN_PERIOD_S", float("inf"))


@pytest.fixture
def cli(capsys):
    """Run `specplan ARGS...` in-process; returns (status, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        status = main([str(a) for a in args])
        out = capsys.readouterr()
        return status, out.out, out.err

    return run
