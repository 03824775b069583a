"""Same scenario and seed → byte-identical results; another seed → different results."""

from __future__ import annotations

import json

import pytest
import yaml

from specplan.simulator.core.streams import stream
from specplan.traces.draws import ScalarDraws
from tests.conftest import BASE, merged

SCENARIO = merged(BASE, {
    "cluster": {"replicas": 2, "router": "random"},
    "drafter": {"acceptance": {"request_sigma": 0.5, "token_sigma": 0.5}},
    "workload": {"prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.7, "max": 4000},
                 "output_tokens": {"kind": "lognormal", "median": 60, "sigma": 0.8, "max": 600}},
})


def run_twice(cli, tmp_path, *extra):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert cli("run", path, "--out", out, "--quiet", *extra)[0] == 0
        outs.append(out)
    return outs


def summary_without_wall(out):
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("wall_s")
    return summary


def test_same_seed_is_byte_identical(cli, tmp_path):
    a, b = run_twice(cli, tmp_path)
    assert summary_without_wall(a) == summary_without_wall(b)
    assert (a / "requests.csv").read_bytes() == (b / "requests.csv").read_bytes()
    assert (a / "steps.csv").read_bytes() == (b / "steps.csv").read_bytes()


def test_another_seed_differs(cli, tmp_path):
    a, _ = run_twice(cli, tmp_path)
    c = tmp_path / "c"
    assert cli("run", tmp_path / "s.yaml", "--out", c, "--quiet", "--seed", "8")[0] == 0
    assert (a / "requests.csv").read_bytes() != (c / "requests.csv").read_bytes()
    assert summary_without_wall(a) != summary_without_wall(c)


@pytest.mark.parametrize("draw", ["gamma", "normal", "random"])
def test_block_drawn_scalars_equal_one_call_per_value(draw):
    """ScalarDraws (think times, domains, request offsets) changes no value, across block boundaries."""
    calls = {"gamma": lambda rng, n=None: rng.gamma(0.49, 2.04, n), "normal": lambda rng, n=None: rng.normal(0.0, 0.3, n),
             "random": lambda rng, n=None: rng.random(n)}[draw]
    one_by_one, blocked = stream(7, "test.scalar"), stream(7, "test.scalar")
    expected = [float(calls(one_by_one)) for _ in range(100)]
    draws = ScalarDraws(lambda n: calls(blocked, n), block=16)
    assert [draws.next() for _ in range(100)] == expected
