"""Host time by engine: what a speculating step pays beyond its kernels (sampling, draft-extend, bookkeeping).

A measured step profile sums GPU kernels; a real engine's speculating
step also runs rejection sampling, the drafter's extend over the accepted
tokens and the host-side bookkeeping of drafts. `engine.host` prices that
as a fraction of the plain decode step (the verify forward at one token
per request, at the step's KV context), paid by every step that drafts:

    host_ms += spec_step_fraction · verify_ms(R)        (drafting steps only)

The defaults are derived from the batch-1 speed-ups each engine's own
MTP pull request reports for DeepSeek-V3/R1 with one MTP module (public
figures, not fitted to any table this project compares against):

    sglang  sgl-project/sglang PR #3582: 1.76x at an accepted length of ~1.9
            → a speculating step costs 1.9 / 1.76 = 1.080 plain steps;
    vllm    vllm-project/vllm PR #12755: 1.63x at QPS 1 with 81–82.3%
            acceptance (accepted length 1.8165) → 1.8165 / 1.63 = 1.114.

specplan's own DeepSeek-V3 built-ins price the MTP module's forward and the
second verified token at +3.06% of the plain step at batch 1
(builtin:h200-deepseek-v3-tp8ep8-vllm and its -mtp drafter), so the rest,
0.049 (SGLang) and 0.084 (vLLM) of a plain step, is host-side speculation
work. vLLM's figure comes from its V0 engine (February 2025) and is likely
an upper bound for vLLM 0.24. Batch-1 figures identify no per-request
part; `engine.host_overhead_per_request_ms` stays the knob for it, and the
scheduling part stays `engine.scheduling_overhead_ms` (hidden by
zero-overhead scheduling as before).

`engine.host.engine: auto` (the default) turns the engine's figure on for
measured built-ins, profiles whose source is NVIDIA AIConfigurator's
database, by the backend the profile was read for; every other profile
(CSV, inline, roofline, a harness measurement) gets none.
"""

from __future__ import annotations

from typing import Any

from specplan.hwprofiles.profile import StepProfile

SPEC_STEP_FRACTION = {"vllm": 0.084, "sglang": 0.049}
AIC_SOURCE = "NVIDIA AIConfigurator"


def profile_engine(profile: StepProfile) -> str | None:
    """The serving engine a measured built-in was read for (None when it is not from AIConfigurator)."""
    provenance = getattr(profile, "provenance", {}) or {}
    if not str(provenance.get("source", "")).startswith(AIC_SOURCE):
        return None
    backend = str(provenance.get("backend", "")).split(" ")[0].lower()
    return backend if backend in SPEC_STEP_FRACTION else None


def resolve_engine(spec: Any, profile: StepProfile) -> str | None:
    """`engine.host.engine` with `auto` resolved from the profile (None: no engine's host time)."""
    if spec.engine == "none":
        return None
    if spec.engine == "auto":
        return profile_engine(profile)
    return str(spec.engine)


def spec_step_fraction(spec: Any, profile: StepProfile) -> float:
    """The fraction of a plain step a speculating step pays in host time."""
    if spec.spec_step_fraction is not None:
        return float(spec.spec_step_fraction)
    engine = resolve_engine(spec, profile)
    return SPEC_STEP_FRACTION[engine] if engine is not None else 0.0
