"""Pictures of step-time curves: step time and steps/s against tokens in the batch.

`plot_profiles(profiles, (ax_ms, ax_sps))` draws what the simulator will
look up (the profile evaluated at every integer B, so padding staircases and
cliffs show as vertical jumps) with the measured points as markers, and each
cliff (a jump of more than 2% of the step in one token, `find_cliffs`)
marked with a red tick. Used by
`specplan profile-plot` and by the report figures. With `scale="auto"`
(the default of `save_profile_plot`, hence of `specplan profile-plot`) the
axes turn logarithmic over more than 1,024 tokens, so a tile edge at 64/65
stays as visible as one at 4096/4097.

`plot_parts(profile, axes)` (`specplan profile-plot --parts`) draws a
profile's named parts (its parts table, plus the attention columns at the
context asked; or the parts the torch harness timed alone, `gemm_ms` and
`attention_ms`, with the rest of the step) stacked against tokens, each at
its own time, and the step the engine is charged as a black line: where the
stack rises above the line, that much is hidden by parts running beside
each other (the estimator's Overlap). Two panels: B ≤ 256 (the decode
batches) on their own scale, and the whole range.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.profile import StepProfile, find_cliffs


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
        mark_cliffs(axes[0], b, ms, label if len(profiles) > 1 else "")
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


def mark_cliffs(ax: Any, b: np.ndarray, ms: np.ndarray, label: str) -> None:
    """A red tick at every cliff of a dense curve, at the step time after the jump."""
    cliffs = find_cliffs(b, ms)
    if cliffs.size:
        name = "cliff (> 2% of the step in one token)" + (f": {label}" if label else "")
        ax.plot(b[cliffs], ms[cliffs], "v", ms=4, color="#c53030", label=name)


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


CONTEXT_PARTS = ("attention_ms", "indexer_ms")
HARNESS_PARTS = ("gemm_ms", "attention_ms")  # what `specplan profile --parts` times alone
ZOOM_TOKENS = 256  # the decode batches, drawn on their own scale beside the whole range


def column_at(profile: StepProfile, table: np.ndarray, b: np.ndarray, context_tokens: float | None) -> np.ndarray:
    """A main-table column at every B, at `context_tokens` (rows interpolated linearly, clamped; None: first row)."""
    rows = np.atleast_2d(table)
    at = [np.interp(b, profile.tokens, row) for row in rows]
    if profile.context_tokens is None or context_tokens is None or len(at) == 1:
        return at[0]
    pos = float(np.interp(context_tokens, profile.context_tokens, np.arange(len(at))))
    lo, w = int(np.floor(pos)), pos - np.floor(pos)
    return at[lo] if w == 0 else (1 - w) * at[lo] + w * at[lo + 1]


def part_curves(profile: StepProfile, max_tokens: int, context_tokens: float | None) -> tuple[np.ndarray, dict]:
    """(B, {part: ms at every B}) with the attention parts at `context_tokens`: a parts table (AIConfigurator), or
    the parts the torch harness timed alone and the rest of the step; ProfileError with neither."""
    parts: dict[str, np.ndarray] = profile.extra.get("parts", {})
    columns: dict[str, np.ndarray] = profile.extra.get("columns", {})
    b = np.arange(1, min(max_tokens, profile.max_tokens) + 1)
    if not parts:
        return b, harness_part_curves(profile, columns, b, context_tokens)
    curves = {name: column_at(profile, columns[name], b, context_tokens) for name in CONTEXT_PARTS if name in columns}
    curves.update({name: np.interp(b, profile.tokens, v) for name, v in parts.items()})
    return b, {name.removesuffix("_ms"): v for name, v in curves.items()}


def harness_part_curves(profile: StepProfile, columns: dict[str, np.ndarray], b: np.ndarray,
                        context_tokens: float | None) -> dict[str, np.ndarray]:
    """`specplan profile --parts`: gemm_ms and attention_ms timed alone, and what the step adds to them."""
    timed = [name for name in HARNESS_PARTS if name in columns]
    if not timed:
        raise ProfileError(f"profile {profile.name}: no parts (a parts table, as AIConfigurator profiles carry, or "
                           "the gemm_ms and attention_ms columns `specplan profile --parts` writes)")
    curves = {name.removesuffix("_ms"): column_at(profile, columns[name], b, context_tokens) for name in timed}
    rest = profile.step_ms(b, context_tokens) - sum(curves.values())
    curves["rest of the step"] = np.maximum(rest, 0.0)
    return curves


def plot_parts(profile: StepProfile, axes: Sequence[Any], max_tokens: int | None = None,
               context_tokens: float | None = None, scale: str = "auto") -> None:
    """Stack `profile`'s parts against tokens (own times) with the charged step as a line: axes[0] up to
    ZOOM_TOKENS on a scale of its own, axes[1] the whole range."""
    b, curves = part_curves(profile, max_tokens or profile.max_tokens, context_tokens)
    curves.pop("overlap_hidden", None)
    zoom = b <= ZOOM_TOKENS
    stack_parts(axes[0], b[zoom], {k: v[zoom] for k, v in curves.items()}, profile.step_ms(b[zoom], context_tokens))
    stack_parts(axes[1], b, curves, profile.step_ms(b, context_tokens))
    ctx = "" if context_tokens is None else f", KV context {context_tokens:g}"
    axes[0].set_title(f"{profile.name}: parts, B ≤ {min(ZOOM_TOKENS, int(b[-1]))}{ctx}")
    axes[1].set_title(f"{profile.name}: parts, B ≤ {int(b[-1])}{ctx}")
    if scale == "log" or (scale == "auto" and b[-1] > LOG_ABOVE_TOKENS):
        axes[1].set_xscale("log", base=2)
    axes[0].legend(fontsize=6, ncol=2, loc="upper left")


def stack_parts(ax: Any, b: np.ndarray, curves: dict[str, np.ndarray], step_ms: np.ndarray) -> None:
    # matplotlib loads only when a plot is drawn
    from matplotlib import colormaps

    colors = colormaps["tab20"](np.arange(len(curves)) % 20)
    ax.stackplot(b, *curves.values(), labels=list(curves), colors=colors, alpha=0.9)
    ax.plot(b, step_ms, color="black", lw=1.4, label="step (charged)")
    ax.set(xlabel="tokens in the verify batch B", ylabel="ms")
    ax.set_xlim(b[0], b[-1])
    stacked = np.sum(list(curves.values()), axis=0)
    ax.set_ylim(0, max(float(step_ms.max()), float(stacked.max())) * 1.05)
    ax.grid(alpha=0.3)


def save_parts_plot(profiles: Sequence[StepProfile], out: str | Path, max_tokens: int | None = None,
                    context_tokens: float | None = None, scale: str = "auto") -> Path:
    """Render `plot_parts` for each profile, one panel each, into a PNG file."""
    # matplotlib loads only when a plot is drawn
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 4.5 * len(profiles)))
    axes = np.atleast_2d(fig.subplots(len(profiles), 2))
    for profile, pair in zip(profiles, axes, strict=True):
        plot_parts(profile, pair, max_tokens, context_tokens, scale)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out
