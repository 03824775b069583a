"""The engine's memory fraction, and the KV pool it leaves one replica.

Place in the data flow: the scenario layer (load.py) asks for the pool
where `engine.kv_capacity_tokens` is silent, and bounds a given one by it;
the engine's config (specplan.simulator.engine.config) hands the same pool,
per rank, to the engine's caps; the summary says which it was.

    launch_knobs(engine, knobs, ...)   what the scenario sets, by the serving engine's own knob names
                                       (max_running_requests, chunked_prefill_size, cuda_graph_max_bs,
                                       mem_fraction_static, gpu_memory_utilization, ...)
    memory_fraction(...)               the fraction of each GPU's memory the engine gives weights and KV:
                                       `engine.memory_fraction`, else the engine's own rule (SGLang's
                                       reserve rule for the GPU, TP, DP, chunk and graphs; vLLM 0.9);
                                       None where the engine's row has no caps or the profile names no
                                       model or GPU
    kv_pool(...) -> KvPool             one replica's KV pool at that fraction under the engine's memory rule
                                       (specplan.engines.caps.MemoryRule): the profile's memory model gives
                                       the KV tokens per GiB (its `kv_capacity_tokens` over the pool its
                                       `kv_memory` line leaves at 0.9) and the GiB per GPU that are weights
                                       and what is not KV; SGLang's pool is f x GPU - weights (activations
                                       and graphs live outside --mem-fraction-static), vLLM's
                                       f x GPU - (weights + activations + runtime), its profiled peak;
                                       the stated pool where the header gives no breakdown (or the engine's
                                       fraction is unknown), and where the model leaves no pool at the
                                       fraction, with a note (a real launch line is never refused)
    engine_kv_pool(...)                its tokens; None without a memory model

A profile's memory model is the package's (AIConfigurator's estimate_kv_cache:
weights, activations, runtime and communication overheads per GPU). SGLang's
DeepSeek-V4-Pro on 8 B200s with DP8 attention at the cookbook's 0.835 keeps
30.4 GiB per GPU for KV (150.3 GiB less 119.9 GiB of weights), where the
package's own count (less activations and runtime too) left none.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.engines import EngineTraits
from specplan.engines.caps import PROFILED_PEAK, MemoryRule
from specplan.hwprofiles.facts import MemoryModel, cap_facts, memory_model
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.scenario.spec import ChunkedPrefill, Engine


def launch_knobs(engine: Engine, knobs: tuple[str, ...], slots: int | None = None, step_tokens: int | None = None,
                 dp: bool = False) -> dict[str, float]:
    """The limits the scenario sets, under the serving engine's own knob names (those in `knobs`); `slots` and
    `step_tokens` are a rank's where `dp`."""
    a2a = engine.all_to_all
    backend = "none" if a2a is None else a2a.backend
    graph_top = None if engine.cuda_graph is None else engine.cuda_graph.max_capture_size
    given: dict[str, float | None] = {
        "max_running_requests": None if slots is None else engine.max_batch_requests, "max_num_seqs": slots,
        "max_num_batched_tokens": step_tokens,
        "chunked_prefill_size": engine.prefill.chunk_tokens if isinstance(engine.prefill, ChunkedPrefill) else None,
        "cuda_graph_max_bs": graph_top, "max_cudagraph_capture_size": graph_top,
        f"{backend}_tokens_per_rank": step_tokens if dp and backend != "none" else None,
        "swa_full_tokens_ratio": engine.swa_full_tokens_ratio,
        "mem_fraction_static": engine.memory_fraction, "gpu_memory_utilization": engine.memory_fraction,
    }
    return {k: float(v) for k, v in given.items() if v is not None and k in knobs}


def memory_fraction(engine: Engine, serving: EngineTraits, profile: StepProfile, block_size: int) -> float | None:
    """The engine's memory fraction for this deployment (module docstring); None where it is not known."""
    if serving.caps is None:
        return engine.memory_fraction
    ranks = 1 if engine.dp_attention is None else engine.dp_attention.ranks
    backend = "none" if engine.all_to_all is None else engine.all_to_all.backend
    facts = cap_facts(profile, ranks, 1 + block_size, backend, None, launch_knobs(engine, serving.caps.knobs))
    return engine.memory_fraction if facts is None else serving.caps.mem_fraction_static(facts)


@dataclass(frozen=True)
class KvPool:
    """One replica's KV pool as the engine sizes it: its tokens, the memory fraction, the rule that turned one into
    the other, and a note where the profile's memory model disagrees with the fraction (the run keeps the
    fraction and the header's stated pool)."""

    tokens: int
    fraction: float | None
    rule: MemoryRule
    note: str | None = None


def kv_pool(engine: Engine, serving: EngineTraits, profile: StepProfile, block_size: int) -> KvPool | None:
    """One replica's KV pool as the engine sizes it (module docstring); None without a memory model."""
    model = memory_model(profile)
    if model is None:
        return None
    fraction = memory_fraction(engine, serving, profile, block_size)
    rule = PROFILED_PEAK if serving.caps is None else serving.caps.memory_rule
    if fraction is None:
        return KvPool(model.tokens, None, rule)
    tokens = model.tokens_at(fraction, rule)
    if tokens is not None:
        return KvPool(tokens, fraction, rule)
    return KvPool(model.tokens, fraction, rule, no_pool_note(model, fraction, rule, profile.name))


def no_pool_note(model: MemoryModel, fraction: float, rule: MemoryRule, name: str) -> str:
    """The one line a run prints where the memory model leaves no pool at a fraction the engine runs with."""
    counted = "the weights" if rule.kv_after == "weights" else "what is not KV"
    held = model.weights if rule.kv_after == "weights" else model.not_kv_gib or 0.0
    gpu = model.gpu_gib or 0.0
    return (f"profile {name}'s memory model puts {counted} ({held:.1f} GiB per GPU) past the memory fraction "
            f"{fraction:g} of {gpu:g} GiB ({fraction * gpu:.1f} GiB); the run keeps the fraction and the header's "
            f"pool ({model.tokens:,} tokens per replica): set engine.kv_capacity_tokens to the #tokens the "
            "engine logs")


def engine_kv_pool(engine: Engine, serving: EngineTraits, profile: StepProfile, block_size: int) -> int | None:
    """One replica's KV tokens as the engine sizes them (module docstring); None without a memory model."""
    pool = kv_pool(engine, serving, profile, block_size)
    return None if pool is None else pool.tokens
