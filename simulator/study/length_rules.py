"""The lengths a benchmark client drew, as a replication case states them and as its scenario draws them.

Place in the data flow: published.py reads a case's source.yaml and calls
`check_length_rule` on its `length_rule` and `check_scenario_lengths` on its
scenario.yaml, before anything runs; every figure of the case carries the
rule (replication.csv's `length_rule` column).

`sglang.bench_serving --dataset-name random` draws each prompt length from
randint(max(int(L x r), 1), L + 1), and each output length likewise
(python/sglang/benchmark/datasets/common.py, `compute_random_lens`), r being
`--random-range-ratio`: its default 0.0 gives lengths uniform on 1..L, and
1.0 gives exactly L. A case states which one its figures ran with:

    length_rule:
      rule: uniform | fixed
      range_ratio: 0.0 | 1.0     # what gives the rule (uniform: 0.0, fixed: 1.0)
      input_tokens: 8192         # --random-input-len
      output_tokens: 1024        # --random-output-len
      evidence: why this rule (the commands, the PR texts, what the figures show)
      ambiguous: where the figures alone cannot tell (optional)

and its scenario must draw those lengths: fixed as `{kind: fixed, value: L}`;
uniform as `{kind: empirical, values: uniform_values(L)}`, 64 equally likely
values, the midpoints of 64 equal bins of 1..L (mean L/2 + 1, as the
uniform's). A scenario that draws other lengths is refused in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from specplan.simulator.core.errors import SpecplanError

RULES = {"uniform": 0.0, "fixed": 1.0}  # rule -> the --random-range-ratio that gives it
KEYS = ("rule", "range_ratio", "input_tokens", "output_tokens", "evidence", "ambiguous")
BINS = 64


def uniform_values(max_tokens: int, bins: int = BINS) -> list[int]:
    """The midpoints of `bins` equal bins of 1..max_tokens (each bin's upper midpoint where it is a half)."""
    width = max_tokens // bins
    return [width * i + width // 2 + 1 for i in range(bins)]


def check_length_rule(entry: Any, where: str) -> None:
    """A known rule, the range ratio that gives it, whole lengths divisible into the bins, and its evidence."""
    if not isinstance(entry, dict):
        raise SpecplanError(f"{where} must be a mapping ({', '.join(KEYS)})")
    for key in entry:
        if key not in KEYS:
            raise SpecplanError(f"{where}: unknown key '{key}' (valid: {', '.join(KEYS)})")
    for key in ("rule", "range_ratio", "input_tokens", "output_tokens", "evidence"):
        if key not in entry:
            raise SpecplanError(f"{where}: missing '{key}'")
    rule = entry["rule"]
    if rule not in RULES:
        raise SpecplanError(f"{where}: unknown rule {rule!r} (valid: {', '.join(RULES)})")
    if entry["range_ratio"] != RULES[rule]:
        raise SpecplanError(f"{where}: rule {rule} is --random-range-ratio {RULES[rule]:g}, "
                            f"got range_ratio {entry['range_ratio']!r}")
    for key in ("input_tokens", "output_tokens"):
        value = entry[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < BINS or value % BINS:
            raise SpecplanError(f"{where}: {key} must be a whole multiple of {BINS}, got {value!r}")


def expected_lengths(entry: dict[str, Any], role: str) -> dict[str, Any]:
    """The scenario's distribution for `role` (prompt or output) under the rule."""
    tokens = entry["input_tokens" if role == "prompt" else "output_tokens"]
    if entry["rule"] == "fixed":
        return {"kind": "fixed", "value": tokens}
    return {"kind": "empirical", "values": uniform_values(tokens)}


def check_scenario_lengths(entry: dict[str, Any], scenario_path: Path) -> None:
    """The scenario's prompt_tokens and output_tokens are the rule's (module docstring), or one line says not."""
    workload = (yaml.safe_load(scenario_path.read_text()) or {}).get("workload") or {}
    for role in ("prompt", "output"):
        drawn, expected = workload.get(f"{role}_tokens"), expected_lengths(entry, role)
        if not isinstance(drawn, dict) or {k: drawn.get(k) for k in expected} != expected or len(drawn) != 2:
            raise SpecplanError(f"{scenario_path}: workload.{role}_tokens does not draw source.yaml's length rule "
                                f"({entry['rule']}: {describe(expected)}), got {drawn!r}")


def describe(expected: dict[str, Any]) -> str:
    if expected["kind"] == "fixed":
        return f"{{kind: fixed, value: {expected['value']}}}"
    values = expected["values"]
    return f"{{kind: empirical, values: [{values[0]}, {values[1]}, ..., {values[-1]}]}}"
