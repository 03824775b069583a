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

DeepSeek-V4 has a measurement of its own, which replaces the fraction for
its built-ins: a speculating cycle's time beyond the target's verify and
the drafter's forwards (sampling, acceptance, bookkeeping, launches the
graphs leave, the syncs between them), per cycle and fixed:

    host_ms += spec_cycle_ms                            (drafting steps only)

    sglang 1.089 ms, vllm 0.573 ms   sgl-project/sglang issue #29960 (comment of 2026-07-24):
            DeepSeek-V4-Flash on 2 x RTX PRO 6000 Blackwell (TP2), EAGLE/MTP 2 steps, c = 1,
            TP0 medians of 12 cycles: SGLang's cycle 13.720 ms = the target-verify graph's GPU
            busy time 11.204 + the two draft graphs' spans 0.691 + 0.736 + 1.089; vLLM's
            11.184 = 9.349 + 0.646 + 0.616 + 0.573

The GPUs there are not the built-ins' (the host and the launch path are
what the figure measures); nothing is fitted to a figure this project
compares against.

`engine.host.engine: auto` (the default) turns the engine's figure on for
measured built-ins, profiles whose source is NVIDIA AIConfigurator's
database, by the backend the profile was read for; every other profile
(CSV, inline, roofline, a harness measurement) gets none.
`engine.host.spec_step_fraction` and `spec_cycle_ms` override the figures.
"""

from __future__ import annotations

from typing import Any

from specplan.hwprofiles.profile import StepProfile

SPEC_STEP_FRACTION = {"vllm": 0.084, "sglang": 0.049}
SPEC_CYCLE_MS = {"vllm": 0.573, "sglang": 1.089}   # DeepSeek-V4's own (sgl-project/sglang #29960)
CYCLE_MEASURED = "DeepSeek-V4"                      # the model the per-cycle figure is measured on
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


def cycle_measured(profile: StepProfile) -> bool:
    """Whether the profile is of the model the per-cycle figure was measured on."""
    return CYCLE_MEASURED in str((getattr(profile, "provenance", {}) or {}).get("model", ""))


def spec_step_fraction(spec: Any, profile: StepProfile) -> float:
    """The fraction of a plain step a speculating step pays in host time (none where the cycle is measured)."""
    if spec.spec_step_fraction is not None:
        return float(spec.spec_step_fraction)
    engine = resolve_engine(spec, profile)
    if engine is None or (spec.spec_cycle_ms is None and cycle_measured(profile)):
        return 0.0
    return SPEC_STEP_FRACTION[engine]


def spec_cycle_ms(spec: Any, profile: StepProfile) -> float:
    """The fixed host time of a speculating step (ms): the measured model's per-cycle figure, or none."""
    if spec.spec_cycle_ms is not None:
        return float(spec.spec_cycle_ms)
    engine = resolve_engine(spec, profile)
    if engine is None or spec.spec_step_fraction is not None or not cycle_measured(profile):
        return 0.0
    return SPEC_CYCLE_MS[engine]
