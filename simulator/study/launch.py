"""A planned deployment → the engine launch configuration that serves it (vLLM, SGLang, TensorRT-LLM).

    launch = scenario_launch(scenario)             the winner at its planned size (a `Deployment`), its
                                                   profiles' provenance read here
    launch = launch_config(scenario, provenance)   the same from provenance already read
    launch_files(launch)                           the priced engine's files: launch-sglang.sh (`python -m
                                                   sglang.launch_server` per pool), launch-vllm.sh (`vllm serve`),
                                                   trtllm.yaml (a `length-schedule` policy only); every engine's
                                                   where the plan priced none (`engine.name` none)
    launch_script(launch)                          the priced engine's script (what `specplan plan` prints)

The flags are each engine's own, in its row of the traits table
(specplan.engines: `vllm.args`, `sglang.args`, `trtllm.Launch`); this module
reads the facts from a resolved scenario.

What is read: the engine the plan priced (`engine.name` resolved as the run
resolves it: specplan.simulator.engine.config.serving_traits), the model and
the parallelism (TP / EP / DP) from the decode profile's provenance
(`model:`, `parallelism:` lines of a built-in; DP from `engine.dp_attention`
where it is set), the memory fraction the plan priced the KV pool at (the
summary's engine_mem_fraction_static: `engine.memory_fraction`, else the
engine's own rule), the batch limit (`engine.max_batch_requests`), the
largest CUDA-graph size captured per rank (where `engine.cuda_graph` is set),
the all-to-all, the SWA pool ratio, the serving mode (chunked prefill chunk
size; a prefill pool's replica count), the prefix cache and its host tier
(as a ratio of the GPU cache and in GiB), and the speculation: the drafter
family and its verified length (`params.length` of a fixed-length policy,
else the drafter's block size).

How each engine runs the planned policy, which of its versions has the
flag, and what its line cannot carry, is in its row's launch notes
(specplan.engines.vllm, .sglang, .trtllm).
"""

from __future__ import annotations

from specplan.engines import ENGINE_NAMES, engine_traits
from specplan.engines.launch import (
    SCHEDULE_POLICY,
    AllToAllLaunch,
    Deployment,
    HostTierLaunch,
    Parallelism,
    parallelism,
)
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.kv_layout import kv_layout
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.scenario import Scenario

__all__ = ["Deployment", "launch_config", "launch_files", "launch_script", "launch_text", "parallelism",
           "scenario_launch"]

GIB = float(1 << 30)


def model_id(text: str | None) -> str | None:
    """The checkpoint id a provenance `model:` line starts with ('meta-llama/Meta-Llama-3.1-8B (32 layers…')."""
    first = (text or "").split(" ", 1)[0].strip()
    return first or None


def verified_length(scenario: Scenario) -> int:
    """Draft tokens a step verifies: a fixed-length policy's `length`, else the drafter's block size."""
    if scenario.drafter.family == "none":
        return 0
    length = scenario.policy.params.get("length") if isinstance(scenario.policy.params, dict) else None
    return int(length) if isinstance(length, int | float) else int(scenario.drafter.block_size)


def scenario_launch(scenario: Scenario) -> Deployment:
    """The launch facts of a resolved scenario, its decode (and prefill pool's) profile provenance read here."""
    pool = scenario.cluster.prefill
    prefill = None if pool is None else dict(load_profile(pool.profile).provenance or {})
    return launch_config(scenario, dict(load_profile(scenario.hardware.profile).provenance or {}), prefill)


def launch_config(scenario: Scenario, provenance: dict[str, str],
                  prefill_provenance: dict[str, str] | None = None) -> Deployment:
    """The launch facts of a resolved scenario (its decode profile's provenance gives model and parallelism)."""
    pool = scenario.cluster.prefill
    prefill = scenario.engine.prefill
    params = scenario.policy.params if isinstance(scenario.policy.params, dict) else {}
    schedule = ({int(k): int(v) for k, v in params["schedule"].items()}
                if scenario.policy.name == SCHEDULE_POLICY and "schedule" in params else None)
    config = engine_config(scenario)
    return Deployment(
        model=model_id(provenance.get("model")), parallel=decode_parallelism(scenario, provenance),
        max_batch_requests=scenario.engine.max_batch_requests,
        chunk_tokens=getattr(prefill, "chunk_tokens", None) if prefill.KIND == "chunked" else None,
        prefix_cache=(scenario.engine.prefix_cache is not None) or (pool is not None and pool.prefix_cache is not None),
        decode_replicas=scenario.cluster.replicas, prefill_replicas=pool.replicas if pool is not None else 0,
        prefill_parallel=parallelism((prefill_provenance or provenance).get("parallelism")),
        family=scenario.drafter.family, length=verified_length(scenario), policy=scenario.policy.name,
        schedule=schedule, engine=config.serving.name, memory_fraction=memory_fraction(scenario, config),
        graph_max=graph_max(config), host_tier=host_tier(scenario, config), all_to_all=all_to_all(scenario),
        swa_full_tokens_ratio=scenario.engine.swa_full_tokens_ratio, **rank_limits(scenario))


def rank_limits(scenario: Scenario) -> dict[str, int | None]:
    """One DP rank's request slots and prompt chunk (`engine.dp_attention`, else the totals split evenly), as
    vLLM's per-rank flags take them; None without DP attention."""
    dp, engine = scenario.engine.dp_attention, scenario.engine
    if dp is None or dp.ranks == 1:
        return {"rank_requests": None, "rank_chunk_tokens": None}
    chunk = getattr(engine.prefill, "chunk_tokens", None) if engine.prefill.KIND == "chunked" else None
    return {"rank_requests": dp.max_batch_requests or max(1, engine.max_batch_requests // dp.ranks),
            "rank_chunk_tokens": None if chunk is None else dp.chunk_tokens or max(1, chunk // dp.ranks)}


def engine_config(scenario: Scenario) -> EngineConfig:
    """The engine's settings as the plan's runs resolved them (its serving engine, caps and capture list)."""
    block = scenario.drafter.block_size if scenario.drafter.speculates else 0
    return EngineConfig.from_scenario(scenario, load_profile(scenario.hardware.profile), block)


def decode_parallelism(scenario: Scenario, provenance: dict[str, str]) -> Parallelism:
    """The profile's TP / EP / DP, DP from `engine.dp_attention` where the scenario sets it (what was priced)."""
    par = parallelism(provenance.get("parallelism"))
    dp = scenario.engine.dp_attention
    return par if dp is None else Parallelism(par.tp, par.ep, dp.ranks)


def memory_fraction(scenario: Scenario, config: EngineConfig) -> float | None:
    """The fraction the plan priced the KV pool at (the summary's engine_mem_fraction_static)."""
    caps, facts = config.serving.caps, config.cap_facts
    if caps is None or facts is None:
        return scenario.engine.memory_fraction
    return float(caps.mem_fraction_static(facts))


def graph_max(config: EngineConfig) -> int | None:
    """The largest CUDA-graph size one rank captured (None: no engine.cuda_graph, graphs not modelled)."""
    if config.graphs is None or len(config.graphs.sizes) == 0:
        return None
    ranks = 1 if config.dp is None else config.dp.ranks
    return int(max(config.graphs.sizes)) // ranks


def host_tier(scenario: Scenario, config: EngineConfig) -> HostTierLaunch | None:
    """The host tier the plan priced: its tokens over the GPU prefix cache's, and its GiB per replica."""
    spec = scenario.engine.prefix_cache
    host = None if spec is None else spec.host
    if spec is None or host is None or spec.layout is None:
        return None
    per_token = kv_layout(spec.layout, spec.kv_value_bytes).bytes_per_token
    gpu_tokens = spec.capacity_tokens or int(scenario.engine.kv_capacity_tokens or 0)
    offload = config.serving.kv_offload
    ratio = host.ratio if host.ratio is not None else (offload.host_ratio if offload is not None else None)
    if host.capacity_tokens is not None:
        tokens = float(host.capacity_tokens)
    elif host.capacity_gb is not None:
        tokens = host.capacity_gb * 1e9 / per_token
    else:
        tokens = (ratio or 0.0) * gpu_tokens
    return HostTierLaunch(ratio=tokens / gpu_tokens if gpu_tokens else (ratio or 0.0),
                          gib=tokens * per_token / GIB, gbytes_per_s=host.gbytes_per_s)


def all_to_all(scenario: Scenario) -> AllToAllLaunch | None:
    a2a = scenario.engine.all_to_all
    return None if a2a is None or a2a.backend == "none" else AllToAllLaunch(a2a.backend, a2a.mode)


def launchers(deployment: Deployment) -> list[str]:
    """The engines whose files a deployment gets: the engine the plan priced, or every engine where it priced
    none (ENGINE_NAMES order)."""
    return [deployment.engine] if deployment.engine in ENGINE_NAMES else list(ENGINE_NAMES)


def launch_files(deployment: Deployment) -> dict[str, str]:
    """File name → text: the launch files of the engine the plan priced (its newest row's launcher)."""
    files: dict[str, str] = {}
    for name in launchers(deployment):
        launch = engine_traits(name).launch
        if launch is not None:
            files.update(launch.files(deployment))
    return files


def launch_script(deployment: Deployment, engine: str | None = None) -> tuple[str, str]:
    """(engine label, launch script) of `engine`, default the engine the plan priced (the first in
    ENGINE_NAMES that writes one where it priced none)."""
    for name in (engine,) if engine is not None else launchers(deployment):
        traits = engine_traits(name)
        script = None if traits.launch is None else traits.launch.script(deployment)
        if script is not None:
            return traits.label, script
    raise ValueError(f"no launch script for {engine or deployment.engine}")


def launch_text(deployment: Deployment, what: str = "") -> str:
    """What a plan prints of its winner's launch: the priced engine's script less its header, or one line saying
    the engine takes no script (TensorRT-LLM: its LLM-API options for a length schedule only)."""
    for name in launchers(deployment):
        traits = engine_traits(name)
        script = None if traits.launch is None else traits.launch.script(deployment)
        if script is not None:
            return f"launch ({traits.label}{what}):\n" + script.split("\n", 2)[2].rstrip()
    names = ", ".join(launch_files(deployment)) or "none"
    return (f"launch ({deployment.engine}{what}): no launch script for this engine; its files: {names} (specplan "
            "writes TensorRT-LLM's LLM-API options for a length schedule only)")
