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
    engine_kv_pool(...)                one replica's KV tokens at that fraction: the profile's memory model
                                       (`kv_capacity_tokens` at 0.9) re-sized through its `kv_memory` line,
                                       pool(f) = pool(0.9) x (f x GPU - not KV) / (0.9 x GPU - not KV);
                                       the stated pool where the header gives no breakdown (or the engine's
                                       fraction is unknown); None without a memory model

A profile's memory model is the package's (AIConfigurator's estimate_kv_cache:
weights, activations, runtime and communication overheads per GPU), so the
pool moves with the fraction as the engine's does: SGLang's DeepSeek-V4-Flash
on B200 with DP4 attention and DeepEP (the cookbook's balanced cell) runs at
0.806, which leaves 83% of the pool at 0.9; on a B300 at low latency its
fraction passes 0.9 and the pool is 9% larger.
"""

from __future__ import annotations

from specplan.engines import EngineTraits
from specplan.hwprofiles.facts import cap_facts, memory_model
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import ScenarioError, SpecplanError
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


def engine_kv_pool(engine: Engine, serving: EngineTraits, profile: StepProfile, block_size: int) -> int | None:
    """One replica's KV tokens as the engine sizes them (module docstring); None without a memory model."""
    model = memory_model(profile)
    if model is None:
        return None
    fraction = memory_fraction(engine, serving, profile, block_size)
    if fraction is None:
        return model.tokens
    try:
        return model.tokens_at(fraction)
    except SpecplanError as exc:
        raise ScenarioError("engine.memory_fraction", f"{exc} (profile {profile.name})") from None
