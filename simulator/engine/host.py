"""Host time by engine: what a speculating step pays beyond its kernels (sampling, draft-extend, bookkeeping).

A measured step profile sums GPU kernels; a real engine's speculating
step also runs rejection sampling, the drafter's extend over the accepted
tokens and the host-side bookkeeping of drafts. Each engine's row of the
traits table (specplan.engines, `HostCycle`, with its sources) gives two
figures, and `engine.host` chooses between them:

    host_ms += spec_step_fraction · verify_ms(R)        (drafting steps only)
    host_ms += spec_cycle_ms                            (drafting steps only)

The fraction of the plain decode step (the verify forward at one token per
request, at the step's KV context) comes from the batch-1 speed-ups each
engine's own MTP pull request reports for DeepSeek-V3/R1 (SGLang 0.049,
vLLM 0.084 of a plain step, once the built-in's MTP forward is priced); the
fixed per-cycle figure was measured on one model (DeepSeek-V4: SGLang 1.089
ms, vLLM 0.573 ms, sgl-project/sglang issue #29960) and replaces the
fraction for that model's profiles. Batch-1 figures identify no
per-request part; `engine.host_overhead_per_request_ms` stays the knob for
it, and the scheduling part stays `engine.scheduling_overhead_ms` (hidden
by zero-overhead scheduling as before). Nothing here is fitted to a figure
this project compares against.

`engine.host.engine: auto` (the default) takes the serving engine's row
(`engine.name`, itself `auto`: the engine a measured built-in was read for,
none for a CSV, inline, roofline or harness profile, which pay no host
time); `engine.host.spec_step_fraction` and `spec_cycle_ms` override the
figures.
"""

from __future__ import annotations

from specplan.engines import EngineTraits, engine_traits
from specplan.engines.traits import HostCycle
from specplan.hwprofiles.facts import provenance_of
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.scenario.spec import Host


def host_cycle(host: Host, serving: EngineTraits) -> HostCycle | None:
    """`engine.host.engine` resolved: the serving engine's cycle for `auto` (None: no engine's host time)."""
    if host.engine == "none":
        return None
    return serving.host if host.engine == "auto" else engine_traits(host.engine).host


def cycle_measured(cycle: HostCycle, profile: StepProfile) -> bool:
    """Whether the profile is of the model the per-cycle figure was measured on."""
    return bool(cycle.cycle_model) and cycle.cycle_model in str(provenance_of(profile).get("model", ""))


def spec_step_fraction(host: Host, serving: EngineTraits, profile: StepProfile) -> float:
    """The fraction of a plain step a speculating step pays in host time (none where the cycle is measured)."""
    if host.spec_step_fraction is not None:
        return float(host.spec_step_fraction)
    cycle = host_cycle(host, serving)
    if cycle is None or (host.spec_cycle_ms is None and cycle_measured(cycle, profile)):
        return 0.0
    return cycle.spec_step_fraction


def spec_cycle_ms(host: Host, serving: EngineTraits, profile: StepProfile) -> float:
    """The fixed host time of a speculating step (ms): the measured model's per-cycle figure, or none."""
    if host.spec_cycle_ms is not None:
        return float(host.spec_cycle_ms)
    cycle = host_cycle(host, serving)
    if cycle is None or host.spec_step_fraction is not None or not cycle_measured(cycle, profile):
        return 0.0
    return cycle.spec_cycle_ms
