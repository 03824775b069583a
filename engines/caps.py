"""The limits an engine applies by itself, as data: each cap's value for a deployment, and which binds first.

Place in the data flow: an engine's row carries its `Caps` rule (SGLang's or
vLLM's, each default with its source); a plan (phase 2) hands it the
deployment's `CapFacts` (GPU memory, parallelism, model family, speculation,
all-to-all backend, the KV pool the profile's memory model gives at the
engine's memory fraction, the launch line's overrides) and reads back a
`CapReport`: every cap in its own unit and as the most requests a rank can
run under it, the tightest admission cap, and the graph cap (past it a step
runs eager: specplan.engines.modes).

    report = engine_traits("sglang", "0.5.15").caps.report(facts)
    report.binding(requests_per_rank=64)   # the cap that stops 64 requests per rank, or None

Each engine's caps also carry its `MemoryRule`: what its memory fraction
covers, and so the KV pool it leaves (SGLang: weights and KV; vLLM: its
whole profiled peak), which specplan.simulator.scenario.memory applies to a
profile's memory model.

Units: tokens and requests per attention rank. `query_tokens` (1 + k) turns
a per-rank token cap into requests: a decode step of R requests carries
R x (1 + k) tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from specplan.engines.steps import AllToAllBackend, ModelFamily
from specplan.errors import SpecplanError

GIB_MB = 1024.0


@dataclass(frozen=True)
class CapFacts:
    """A deployment's facts the caps read (per attention rank where a count is per rank).

    `kv_pool_tokens`: the full KV pool of one rank at the engine's memory fraction (the
    profile's memory model; None: unknown); `request_tokens`: the KV one request holds at its
    longest (prompt + output); `overrides`: values the launch line sets (knob -> value).
    """

    gpu_memory_gib: float
    tp: int
    dp: int
    model: ModelFamily
    query_tokens: int = 1
    all_to_all: AllToAllBackend = "none"
    a100: bool = False
    kv_pool_tokens: int | None = None
    request_tokens: int | None = None
    overrides: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gpu_memory_gib <= 0 or self.tp < 1 or self.dp < 1 or self.query_tokens < 1:
            raise SpecplanError("cap facts: GPU memory is positive; tp, dp and query_tokens are at least 1")


@dataclass(frozen=True)
class CapValue:
    """One cap: its value in `unit`, the most requests per rank it admits, and whether it stops
    requests (`admission`) or sends larger steps eager (`graph`)."""

    name: str
    value: float
    unit: str
    requests_per_rank: int
    kind: Literal["admission", "graph"]
    source: str


@dataclass(frozen=True)
class CapReport:
    """Every cap of one deployment, in the order the engine applies them."""

    caps: tuple[CapValue, ...]

    def named(self, name: str) -> CapValue:
        return next(cap for cap in self.caps if cap.name == name)

    def get(self, name: str) -> CapValue | None:
        return next((cap for cap in self.caps if cap.name == name), None)

    @property
    def tightest(self) -> CapValue | None:
        """The admission cap with the fewest requests per rank (the first listed on a tie); None when
        no admission cap is known (an engine whose slots follow an unknown KV pool)."""
        admission = [cap for cap in self.caps if cap.kind == "admission"]
        return min(admission, key=lambda cap: cap.requests_per_rank) if admission else None

    @property
    def graph_cap(self) -> CapValue | None:
        return next((cap for cap in self.caps if cap.kind == "graph"), None)

    def binding(self, requests_per_rank: int) -> CapValue | None:
        """The cap that stops `requests_per_rank` requests on a rank, or None when every cap admits them."""
        tightest = self.tightest
        return tightest if tightest is not None and tightest.requests_per_rank < requests_per_rank else None


class Caps(Protocol):
    """An engine's own caps (module docstring)."""

    @property
    def knobs(self) -> tuple[str, ...]: ...

    def report(self, facts: CapFacts) -> CapReport: ...

    def request_slots(self, facts: CapFacts) -> int | None:
        """A rank's request slots when the launch line leaves them to the engine (None: they follow a KV
        pool the facts do not give)."""
        ...

    def mem_fraction_static(self, facts: CapFacts) -> float: ...

    @property
    def memory_rule(self) -> MemoryRule:
        """What the memory fraction covers (the KV pool it leaves)."""
        ...


def knob(facts: CapFacts, name: str, default: float, knobs: tuple[str, ...]) -> float:
    """A launch-line override of `name`, else its default; an override the engine does not have is refused."""
    unknown = sorted(set(facts.overrides) - set(knobs))
    if unknown:
        raise SpecplanError(f"cap overrides: unknown {', '.join(unknown)} (known: {', '.join(knobs)})")
    return facts.overrides.get(name, default)


def kv_pool_cap(facts: CapFacts, source: str) -> list[CapValue]:
    """The KV pool as requests of `request_tokens` each (none when either is unknown)."""
    if facts.kv_pool_tokens is None or not facts.request_tokens:
        return []
    return [CapValue("kv_pool", facts.kv_pool_tokens, "tokens", facts.kv_pool_tokens // facts.request_tokens,
                     "admission", source)]


@dataclass(frozen=True)
class MemoryRule:
    """What an engine's memory fraction f covers, and so the KV pool it leaves on one GPU (GiB).

    `weights`: f x GPU = weights + KV pool, activations and graphs outside it (SGLang: model_runner
    profile_max_num_token, rest = free after loading - free before x (1 - f));
    `profiled_peak`: f x GPU = weights + the profiled activation peak + non-torch memory + KV pool
    (vLLM: gpu_worker determine_available_memory, requested memory - non-KV memory).
    """

    kv_after: Literal["weights", "profiled_peak"]
    source: str

    def kv_gib(self, fraction: float, gpu_gib: float, weights_gib: float, not_kv_gib: float) -> float:
        """One GPU's KV pool in GiB at memory fraction `fraction` (<= 0: the fraction leaves none)."""
        return fraction * gpu_gib - (weights_gib if self.kv_after == "weights" else not_kv_gib)


PROFILED_PEAK = MemoryRule("profiled_peak", "the fraction less everything that is not KV (weights, activations, "
                           "runtime), as vLLM's profiling run counts it")
