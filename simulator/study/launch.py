"""A planned deployment → the engine launch configuration that serves it (vLLM, SGLang, TensorRT-LLM).

    launch = launch_config(scenario, provenance)   the winner at its planned size (a `Deployment`)
    launch_files(launch)                           every engine's files: launch-vllm.sh (a `vllm serve` line
                                                   per pool), launch-sglang.sh (`python -m sglang.launch_server`),
                                                   trtllm.yaml (a `length-schedule` policy only)
    launch_script(launch)                          the first engine's script (what `specplan plan` prints)

The flags are each engine's own, in its row of the traits table
(specplan.engines: `vllm.args`, `sglang.args`, `trtllm.Launch`); this module
reads the facts from a resolved scenario.

What is read: the model and the parallelism (TP / EP / DP) from the decode
profile's provenance (`model:`, `parallelism:` lines of a built-in), the
batch limit (`engine.max_batch_requests`), the serving mode (chunked prefill
chunk size; a prefill pool's replica count), the prefix cache, and the
speculation: the drafter family and its verified length (`params.length`
of a fixed-length policy, else the drafter's block size).

How each engine runs the planned policy, and which of its versions has the
flag, is in its row's launch notes (specplan.engines.vllm, .sglang, .trtllm).
"""

from __future__ import annotations

from specplan.engines import ENGINE_NAMES, engine_traits
from specplan.engines.launch import SCHEDULE_POLICY, Deployment, parallelism
from specplan.simulator.scenario import Scenario

__all__ = ["Deployment", "launch_config", "launch_files", "launch_script", "parallelism"]


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


def launch_config(scenario: Scenario, provenance: dict[str, str],
                  prefill_provenance: dict[str, str] | None = None) -> Deployment:
    """The launch facts of a resolved scenario (its decode profile's provenance gives model and parallelism)."""
    pool = scenario.cluster.prefill
    prefill = scenario.engine.prefill
    params = scenario.policy.params if isinstance(scenario.policy.params, dict) else {}
    schedule = ({int(k): int(v) for k, v in params["schedule"].items()}
                if scenario.policy.name == SCHEDULE_POLICY and "schedule" in params else None)
    return Deployment(
        model=model_id(provenance.get("model")), parallel=parallelism(provenance.get("parallelism")),
        max_batch_requests=scenario.engine.max_batch_requests,
        chunk_tokens=getattr(prefill, "chunk_tokens", None) if prefill.KIND == "chunked" else None,
        prefix_cache=(scenario.engine.prefix_cache is not None) or (pool is not None and pool.prefix_cache is not None),
        decode_replicas=scenario.cluster.replicas, prefill_replicas=pool.replicas if pool is not None else 0,
        prefill_parallel=parallelism((prefill_provenance or provenance).get("parallelism")),
        family=scenario.drafter.family, length=verified_length(scenario), policy=scenario.policy.name,
        schedule=schedule)


def launch_files(deployment: Deployment) -> dict[str, str]:
    """File name → text: each engine's launch files (its newest row's launcher), in ENGINE_NAMES order."""
    files: dict[str, str] = {}
    for name in ENGINE_NAMES:
        launch = engine_traits(name).launch
        if launch is not None:
            files.update(launch.files(deployment))
    return files


def launch_script(deployment: Deployment, engine: str | None = None) -> tuple[str, str]:
    """(engine label, launch script) of `engine`, default the first engine in ENGINE_NAMES that writes one."""
    for name in (engine,) if engine is not None else ENGINE_NAMES:
        traits = engine_traits(name)
        script = None if traits.launch is None else traits.launch.script(deployment)
        if script is not None:
            return traits.label, script
    raise ValueError(f"no launch script for {engine or 'any engine'}")
