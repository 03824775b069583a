"""What deployment a profile was measured on: its model, GPU type and topology, read from its provenance.

    deployment_of(profile) -> Deployment(model, gpu, topology)   (None where the header does not say)
    differences(target, drafter) -> ["GPU H200 vs B200", ...]    (only what both headers state)

A drafter profile prices drafting on one deployment; the scenario layer
(`specplan.simulator.scenario.drafter_profile`) compares it with the
target's profile so that a B200 plan is never drafted at H200 speed. The
facts come from the `model`, `device` and `parallelism` header lines that
every measured and AIConfigurator-derived profile carries; an inline
profile, or a header missing a line, states nothing and is compared on what
it does state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specplan.hwprofiles.profile import StepProfile

# GPU families as device lines and AIConfigurator system names spell them (h200_sxm, NVIDIA H200 SXM 141GB)
GPU_PATTERN = re.compile(r"(?<![a-z0-9])(gb\d{3}|b\d{3}|h\d{3}|a\d{3,4}|l40s?|l4|mi\d{3}x?)(?![0-9])")
PARALLEL_PATTERN = re.compile(r"\b(TP|EP|DP)(\d+)\b")


@dataclass(frozen=True)
class Deployment:
    """The model, GPU type and parallelism a profile prices (each None where its header is silent)."""

    model: str | None
    gpu: str | None
    topology: str | None


def deployment_of(profile: StepProfile) -> Deployment:
    provenance = profile.provenance
    return Deployment(model=model_name(str(provenance.get("model", ""))),
                      gpu=gpu_name(str(provenance.get("device", ""))),
                      topology=topology_name(str(provenance.get("parallelism", "")),
                                             str(provenance.get("device", ""))))


def model_name(line: str) -> str | None:
    """The checkpoint named first on a `model:` line (`deepseek-ai/DeepSeek-V4-Flash (43 layers ...)`)."""
    words = line.split()
    return words[0] if words else None


def gpu_name(device: str) -> str | None:
    """`H200` from `NVIDIA H200 SXM 141GB x 1 (...)`, `h200_sxm` or `h100-80gb x 4`; the device text otherwise."""
    text = device.lower()
    match = GPU_PATTERN.search(text)
    if match:
        return match.group(1).upper()
    if text.startswith("cpu"):
        return "CPU"
    head = re.split(r" x \d| \(|;", device, maxsplit=1)[0].strip()
    return head or None


def topology_name(parallelism: str, device: str) -> str | None:
    """`TP8 EP8 DP1` from a parallelism line; `TP4 EP1 DP1` from a device's `(tensor parallel 4)`."""
    degrees = {kind: int(n) for kind, n in PARALLEL_PATTERN.findall(parallelism)}
    if not degrees:
        match = re.search(r"tensor parallel (\d+)", device)
        degrees = {"TP": int(match.group(1))} if match else {}
    if not degrees:
        return None
    return " ".join(f"{kind}{degrees.get(kind, 1)}" for kind in ("TP", "EP", "DP"))


def differences(target: Deployment, drafter: Deployment) -> list[str]:
    """Each fact both profiles state and state differently, as `what target-value vs drafter-value`.

    A drafter's model matches its target's when it is the same checkpoint (AIConfigurator's drafters name the
    target) or a shape derived from it (the harness names a drafter `TARGET-...-drafter-1l`).
    """
    out = []
    for what, mine, theirs in (("model", target.model, drafter.model), ("GPU", target.gpu, drafter.gpu),
                               ("topology", target.topology, drafter.topology)):
        if mine is None or theirs is None:
            continue
        same = mine.lower() == theirs.lower() or (what == "model" and theirs.lower().startswith(f"{mine.lower()}-"))
        if not same:
            out.append(f"{what} {mine} vs {theirs}")
    return out
