"""Pictures of step-time curves: step time and steps/s against tokens in the batch.

`plot_profiles(profiles, (ax_ms, ax_sps))` draws what the simulator will
look up (the profile evaluated at every integer B, so padding staircases and
cliffs show as vertical jumps) with the measured points as markers. Used by
`specplan profile-plot` and by the report figures. With `scale="auto"`
(the default of `save_profile_plot`, hence of `specplan profile-plot`) the
axes turn logarithmic over more than 1,024 tokens, so a tile edge at 64/65
stays as visible as one at 4096/4097.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles.profile import StepProfile


def lookup_curve(profile: StepProfile, max_tokens: int, context_tokens: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(B, step_ms) at every integer B from 1 to min(max_tokens, the profile's last point)."""
    b = np.arange(1, min(max_tokens, profile.max_tokens) + 1)
    return b, profile.step_ms(b, context_tokens)


def measured_points(profile: StepProfile, max_tokens: int, context_tokens: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    b = profile.tokens[profile.tokens <= max_tokens]
    return b, profile.step_ms(b, context_tokens)


SCALES = ("auto", "linear", "log")
LOG_ABOVE_TOKENS = 1024


def plot_profiles(
    profiles: Sequence[StepProfile], axes: Sequence[Any], max_tokens: int | None = None,
    context_tokens: float | None = None, labels: Sequence[str] | None = None, scale: str = "linear",
) -> None:
    """Draw step time (axes[0]) and steps/s (axes[1]) vs tokens for each profile (`scale`: one of SCALES)."""
    limit = max_tokens or max(p.max_tokens for p in profiles)
    for i, profile in enumerate(profiles):
        label = labels[i] if labels else profile.name
        b, ms = lookup_curve(profile, limit, context_tokens)
        mb, mms = measured_points(profile, limit, context_tokens)
        line = axes[0].plot(b, ms, lw=1.2, label=label)[0]
        axes[0].plot(mb, mms, ".", ms=3, color=line.get_color())
        axes[1].plot(b, 1000.0 / ms, lw=1.2, color=line.get_color(), label=label)
        axes[1].plot(mb, 1000.0 / mms, ".", ms=3, color=line.get_color())
    ctx = "" if context_tokens is None else f" (KV context {context_tokens:g} tokens where the profile has that axis)"
    axes[0].set(xlabel="tokens in the verify batch B", ylabel="step time (ms)", title=f"step time{ctx}")
    axes[1].set(xlabel="tokens in the verify batch B", ylabel="steps per second", title="SPS(B) = 1000 / step_ms")
    if scale == "log" or (scale == "auto" and limit > LOG_ABOVE_TOKENS):
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.grid(which="minor", alpha=0.1)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)


def save_profile_plot(profiles: Sequence[StepProfile], out: str | Path, max_tokens: int | None = None,
                      context_tokens: float | None = None, scale: str = "auto") -> Path:
    """Render `plot_profiles` side by side into a PNG file."""
    # matplotlib loads only when a plot is drawn
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5))
    axes = fig.subplots(1, 2)
    plot_profiles(profiles, axes, max_tokens, context_tokens, scale=scale)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out
