"""The `sweep:` and `sla:` blocks of a scenario: a study over variants, loads and seeds, and its SLA.

    sweep:
      load: {users: [1, 4, 16]}          # closed loop; or {rate_per_s: [...]}, {rate_scale: [...]},
                                         # {lanes: [...]} (agent sessions)
      variants:                          # deep-merged over the base scenario (specplan.simulator.scenario.merge)
        - {label: MTP-1, drafter: {family: mtp, block_size: 1}, policy: {name: mtp-1}}
      seeds: [1, 2, 3]                   # default: the scenario's own seed
    sla: {tps_user: [80, 120], statistic: p50, ttft_s: 2.0}
    sla: {bounds: ["ttft_p99_s<=2", "tps_user_p10>=30", "itl_p99_ms<=80"]}   # what `specplan plan` meets

A bound is `KEY<=VALUE` or `KEY>=VALUE` on a summary.json key (`Bound`,
`parse_bound`): an upper bound on a latency (TTFT p50/p90/p99 in seconds,
inter-token latency and TPOT mean/p50/p90/p99 in ms, an agent session's
wall time mean/p50/p90 in seconds), a lower bound on a tokens/s/user
statistic or on a session's output tokens per second of wall time, the
directions in which more replicas help. The session keys (`SESSION_KEYS`)
exist only on agent-session workloads.

The load axis scales the workload the scenario wrote (users of a closed
loop; the mean rate of poisson / gamma / mmpp / piecewise arrivals; a
multiple of any open-loop or trace workload's own rate; the lanes of agent
sessions), never replacing its kind or its lengths
(`specplan.simulator.scenario.scaling`).
Only the structure is checked here; each variant is validated as a whole
scenario when the sweep expands its points (`specplan.simulator.study.points.design_sweep`).
These dataclasses never import the scenario module (the scenario imports them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.schema import num

STATISTICS = ("p10", "p50", "p90", "mean")
LOAD_AXES = ("users", "rate_per_s", "rate_scale", "lanes")  # the axes of specplan.simulator.scenario.scaling
COUNTED_AXES = ("users", "lanes")  # axes whose values are whole numbers
SESSION_UPPER = ("session_wall_mean_s", "session_wall_p50_s", "session_wall_p90_s")
SESSION_LOWER = ("session_output_tokens_per_s_mean", "session_output_tokens_per_s_p50")
SESSION_KEYS = SESSION_UPPER + SESSION_LOWER  # job-level figures of agent sessions (traces.lanes.session_fields)
UPPER_BOUNDED = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "itl_mean_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms",
                 "tpot_mean_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", *SESSION_UPPER)
LOWER_BOUNDED = ("tps_user_p10", "tps_user_p50", "tps_user_p90", "tps_user_mean", *SESSION_LOWER)
BOUND_FORM = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=)\s*([^\s]+)\s*$")


@dataclass(frozen=True)
class Bound:
    """One SLA term: summary[key] <= value (a latency) or summary[key] >= value (tokens/s/user)."""

    key: str
    op: Literal["<=", ">="]
    value: float

    def holds(self, observed: float | None) -> bool:
        """Whether an observed statistic meets the bound (a missing or NaN one never does)."""
        if observed is None or not math.isfinite(observed):
            return False
        return observed <= self.value if self.op == "<=" else observed >= self.value

    def text(self) -> str:
        return f"{self.key}{self.op}{self.value:g}"


def parse_bound(text: str, where: str = "--sla") -> Bound:
    """'ttft_p99_s<=2' → Bound; one-line errors naming the form, the keys and the direction."""
    match = BOUND_FORM.match(str(text))
    if match is None:
        raise SpecplanError(f"{where}: {text!r} is not KEY<=VALUE or KEY>=VALUE (e.g. ttft_p99_s<=2)")
    key, op, raw = match.groups()
    if key not in UPPER_BOUNDED + LOWER_BOUNDED:
        raise SpecplanError(f"{where}: unknown SLA key {key!r}; one of {', '.join(UPPER_BOUNDED + LOWER_BOUNDED)}")
    try:
        value = float(raw)
    except ValueError:
        raise SpecplanError(f"{where}: {text!r}: {raw!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise SpecplanError(f"{where}: {text!r}: the bound must be a positive number")
    wanted: Literal["<=", ">="] = "<=" if key in UPPER_BOUNDED else ">="
    if op != wanted:
        kind = "an upper" if wanted == "<=" else "a lower"
        raise SpecplanError(f"{where}: {key} takes {kind} bound ({key}{wanted}{value:g}): more replicas must help")
    return Bound(key, wanted, value)


@dataclass(frozen=True)
class LoadSpec:
    """The load axis of a sweep: closed-loop users, a mean arrival rate, a scale of the workload's rate, or the
    lanes of agent sessions."""

    users: tuple[int, ...] | None = num(None, ge=1, doc="closed-loop users at each load (fits closed_loop)",
                                        unit="users")
    rate_per_s: tuple[float, ...] | None = num(None, gt=0, doc="mean arrival rate at each load (fits poisson, "
                                               "gamma, mmpp, piecewise)", unit="requests/s")
    rate_scale: tuple[float, ...] | None = num(None, gt=0, doc="the workload's own rate times each value (fits "
                                               "those and trace)", unit="factor")
    lanes: tuple[int, ...] | None = num(None, ge=1, doc="agent session lanes at each load (fits sessions)",
                                        unit="lanes")

    def validate(self, path: str) -> None:
        given = [k for k in LOAD_AXES if getattr(self, k) is not None]
        if len(given) != 1:
            raise ScenarioError(path, f"give exactly one of {', '.join(repr(k) for k in LOAD_AXES)}")
        if not getattr(self, given[0]):
            raise ScenarioError(f"{path}.{given[0]}", "needs at least one value")

    @property
    def kind(self) -> str:
        return next(k for k in LOAD_AXES if getattr(self, k) is not None)

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(getattr(self, self.kind) or ())


@dataclass(frozen=True)
class SweepSpec:
    """Variants × loads × seeds; each variant is a partial scenario with a `label`."""

    load: LoadSpec | None = num(None, doc="the load axis: exactly one of users, rate_per_s, rate_scale, lanes")
    variants: tuple[dict[str, Any], ...] = num((), doc="partial scenarios, each with a label, deep-merged over the "
                                               "base scenario")
    seeds: tuple[int, ...] | None = num(None, ge=0, doc="the seeds every point runs (default: the scenario's "
                                        "seed)")

    def validate(self, path: str) -> None:
        seen: set[str] = set()
        for i, variant in enumerate(self.variants):
            label = variant.get("label")
            if not isinstance(label, str) or not label.strip():
                raise ScenarioError(f"{path}.variants[{i}].label", "every variant needs a text label")
            if label in seen:
                raise ScenarioError(f"{path}.variants[{i}].label", f"duplicate label '{label}'")
            seen.add(label)
        if self.seeds is not None and not self.seeds:
            raise ScenarioError(f"{path}.seeds", "needs at least one seed")
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ScenarioError(f"{path}.seeds", "seeds must be distinct")


@dataclass(frozen=True)
class SlaSpec:
    """Service-level targets: tokens/s/user thresholds on a statistic, optional TTFT p99 bound."""

    tps_user: tuple[float, ...] = num((), gt=0, doc="tokens/s/user levels a sweep's comparisons read throughput "
                                      "at", unit="tokens/s")
    statistic: Literal["p10", "p50", "p90", "mean"] = num("p50", doc="which statistic of per-request "
                                                          "tokens/s/user the levels bound")
    ttft_s: float | None = num(None, gt=0, doc="also require TTFT p99 at most this")
    bounds: tuple[str, ...] = num((), doc="SLA terms on summary.json keys, all required at once "
                                  "(`ttft_p99_s<=2`, `tps_user_p10>=30`, `itl_p99_ms<=80`)")

    def validate(self, path: str) -> None:
        for i, text in enumerate(self.bounds):
            try:
                parse_bound(text, f"{path}.bounds[{i}]")
            except SpecplanError as exc:
                raise ScenarioError(f"{path}.bounds[{i}]", str(exc).split(": ", 1)[1]) from None

    @property
    def parsed_bounds(self) -> tuple[Bound, ...]:
        return tuple(parse_bound(text, "sla.bounds") for text in self.bounds)

    @property
    def column(self) -> str:
        """The summary column the SLA reads: tps_user_p10 / _p50 / _p90 / _mean."""
        return tps_column(self.statistic)


def tps_column(statistic: str) -> str:
    if statistic not in STATISTICS:
        raise SpecplanError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    return f"tps_user_{statistic}"
