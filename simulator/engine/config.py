"""The engine's settings, read once from a scenario: what every decode core runs by.

`EngineConfig.from_scenario(scenario, block_size)` is shared by the
simulator's replicas and the reference engine (validation/), so both take
the same limits from the same keys:

    max_batch_requests   running requests at most
    kv_capacity_tokens   KV-cache tokens at most (the KV rule: specplan.simulator.engine.decode)
    chunk_tokens         chunked prefill: prompt tokens per step at most (None: disaggregated)
    prefill_tokens_per_s disaggregated prefill: the prefill stage's rate (None: chunked)
    max_step_tokens      tokens one forward may hold (the scenario layer fills in the default:
                         the profile's largest measured B)
    block_size           γ, the drafter's block (0 without speculation)
    scheduling_overhead_ms, host_overhead_ms, host_overhead_per_request_ms, padded_attention,
    profiled_queries     padded attention: verify queries per request the profile was measured at
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.simulator.scenario import ChunkedPrefill, Scenario


@dataclass(frozen=True)
class EngineConfig:
    """The decode engine's limits and fixed costs (see the module docstring)."""

    max_batch_requests: int
    kv_capacity_tokens: int
    chunk_tokens: int | None
    prefill_tokens_per_s: float | None
    max_step_tokens: int
    block_size: int
    scheduling_overhead_ms: float
    host_overhead_ms: float
    host_overhead_per_request_ms: float
    padded_attention: bool
    profiled_queries: int | None = None

    @property
    def chunked(self) -> bool:
        return self.chunk_tokens is not None

    @classmethod
    def from_scenario(cls, scenario: Scenario, block_size: int) -> EngineConfig:
        engine = scenario.engine
        prefill = engine.prefill
        chunked = isinstance(prefill, ChunkedPrefill)
        return cls(
            max_batch_requests=engine.max_batch_requests,
            kv_capacity_tokens=engine.kv_capacity_tokens,
            chunk_tokens=prefill.chunk_tokens if isinstance(prefill, ChunkedPrefill) else None,
            prefill_tokens_per_s=None if chunked else getattr(prefill, "tokens_per_s", None),
            max_step_tokens=resolved(engine.max_step_tokens, "engine.max_step_tokens"),
            block_size=block_size,
            scheduling_overhead_ms=engine.scheduling_overhead_ms,
            host_overhead_ms=engine.host_overhead_ms,
            host_overhead_per_request_ms=engine.host_overhead_per_request_ms,
            padded_attention=engine.attention == "padded",
            profiled_queries=engine.attention_profiled_queries if engine.attention == "padded" else None,
        )


def resolved(value: int | None, key: str) -> int:
    """A value the scenario layer fills in when it loads a scenario (a Scenario built otherwise lacks it)."""
    if value is None:
        raise ValueError(f"{key} is not resolved: build the Scenario with scenario_from_mapping")
    return value
