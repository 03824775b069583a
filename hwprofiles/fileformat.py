"""The profile file: a CSV table of step time vs tokens, with provenance in its header.

This is how measured curves enter specplan: `specplan profile` writes one,
the built-ins in `hwprofiles/data/` are such files, and a scenario's
`hardware.profile` may name one by path or as `builtin:NAME`. Layout:

    # format: specplan-profile/1
    # name: cpu-tiny
    # device: AMD EPYC (2 cores)
    # model: tiny-cpu (hidden 256, layers 4, ...)
    # source: specplan profile --model tiny-cpu ...
    # statistic: median of 20 timed runs
    # extrapolation: none
    tokens,step_ms,p10_ms,p90_ms
    1,0.91,0.88,0.95
    ...

Header lines are `# key: value` (provenance; `device`, `model`, `source`
and `statistic` are required). Columns: `tokens` (tokens in the verify
batch, B), optionally `context_tokens` (total KV context of the batch: a
second axis, the table then holds every tokens × context pair, grouped by
context), `step_ms`, and any number of spread columns named `*_ms`
(`p10_ms`, `p90_ms`, `min_ms`, ...). Every error names the file and line.

A file may end with a second table, the step's named parts against tokens
alone (the parts that do not read the KV cache; `StepProfile.extra["parts"]`):

    # table: parts
    tokens,router_ms,routed_experts_ms,...,overlap_hidden_ms
    1,0.18,1.95,...

over the same token counts as the main table; the table is optional.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from specplan.hwprofiles.errors import ProfileError
from specplan.hwprofiles.profile import EXTRAPOLATIONS, StepProfile

FORMAT = "specplan-profile/1"
REQUIRED_PROVENANCE = ("device", "model", "source", "statistic")
# header lines specplan reads beyond the required four (the rest is provenance for the reader)
READ_PROVENANCE = {
    "kv_capacity_tokens": "the KV tokens one replica holds (its leading integer): engine.kv_capacity_tokens's "
                          "default and upper bound",
    "kv_memory": "one GPU's memory and the GiB of it that are not KV ('180.000 GiB per GPU, 25.607 GiB of it not KV "
                 "at memory fraction 0.9 ...'): re-sizes kv_capacity_tokens at the serving engine's memory fraction",
    "source": "an AIConfigurator-derived file (source starting 'NVIDIA AIConfigurator') lets engine.host and "
              "engine.budget resolve `auto` from its backend",
    "backend": "the engine the tables were measured under ('vllm 0.24.0'): sets the host time of speculating "
               "steps and vLLM's truncating budget rule when they are `auto`",
    "phase": "'prefill' marks a prefill-step profile, the only kind cluster.prefill.profile and engine.prefill.profile accept",
    "model": "the checkpoint id the launch lines serve (its first word)",
    "parallelism": "TP / EP / DP degrees the launch lines pass ('TP8 EP8 DP1 (8 GPUs)')",
}
DATA_DIR = Path(__file__).resolve().parent / "data"
RESERVED_KEYS = ("format", "name", "extrapolation")
PARTS_MARKER = "# table: parts"


def builtin_names() -> list[str]:
    """Names usable as `builtin:NAME` (the CSV files shipped in hwprofiles/data/)."""
    return sorted(p.stem for p in DATA_DIR.glob("*.csv"))


BUILTINS_TABLE = "docs/reference/profile-format.md#the-built-ins"  # where the manual lists every built-in


def load_builtin(name: str) -> StepProfile:
    """`builtin:NAME` → the shipped profile; an unknown name is refused with the nearest names."""
    path = DATA_DIR / f"{name}.csv"
    if not name or "/" in name or not path.is_file():
        raise ProfileError(unknown_builtin(name))
    return read_profile_csv(path)


def unknown_builtin(name: str) -> str:
    """One line for a `builtin:NAME` that ships no file: the three nearest names (difflib) and where the manual
    lists all of them (there are over a hundred: the whole list would be one line of thousands of characters)."""
    names = builtin_names()
    nearest = difflib.get_close_matches(name, names, n=3, cutoff=0.0) if name else names[:3]
    return (f"builtin:{name}: no such built-in profile (nearest: {', '.join(nearest)}; all {len(names)}: "
            f"{BUILTINS_TABLE}, or the files in {DATA_DIR})")


def read_profile_csv(path: str | Path) -> StepProfile:
    """Read and validate a profile file; every problem is a ProfileError naming file and line."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc.__class__.__name__
        raise ProfileError(f"{path}: cannot read profile ({reason})") from None
    return parse_profile(text, str(path), default_name=path.stem)


def parse_profile(text: str, where: str, default_name: str = "profile") -> StepProfile:
    """Parse the text of a profile file; `where` prefixes every error message."""
    lines = text.splitlines()
    meta, first_row = _read_header(lines, where)
    if meta.get("format", FORMAT) != FORMAT:
        raise ProfileError(f"{where}:1: unsupported format {meta['format']!r} (expected {FORMAT})")
    name = meta.get("name", default_name)
    provenance = {k: v for k, v in meta.items() if k not in RESERVED_KEYS}
    missing = [k for k in REQUIRED_PROVENANCE if k not in provenance]
    if missing:
        raise ProfileError(f"{where}: provenance is missing: {', '.join(missing)} (as '# key: value' lines)")
    extrapolation = meta.get("extrapolation", "none")
    if extrapolation not in EXTRAPOLATIONS:
        raise ProfileError(f"{where}: extrapolation must be one of {', '.join(EXTRAPOLATIONS)}, got {extrapolation!r}")
    marker = next((i for i, line in enumerate(lines) if line.strip() == PARTS_MARKER), len(lines))
    columns, line_of = _read_columns(lines[:marker], first_row, where)
    tokens, context, tables = _to_grid(columns, line_of, where)
    extra: dict[str, Any] = {"columns": tables}
    if marker < len(lines):
        extra["parts"] = _read_parts(lines, marker + 1, tokens, where)
    return StepProfile(
        name=name, tokens=tokens, step_ms_table=tables.pop("step_ms"), provenance=provenance,
        context_tokens=context, extrapolation=extrapolation, extra=extra,
    )


def _read_parts(lines: list[str], first: int, tokens: np.ndarray, where: str) -> dict[str, np.ndarray]:
    """The parts table after the marker: columns over the main table's token counts."""
    while first < len(lines) and not lines[first].strip():
        first += 1
    if first == len(lines):
        raise ProfileError(f"{where}: '{PARTS_MARKER}' is not followed by a 'tokens,...' header")
    columns, line_of = _read_columns(lines, first, where, required=("tokens",))
    if "context_tokens" in columns:
        raise ProfileError(f"{where}:{first + 1}: the parts table has no context_tokens axis")
    if not np.array_equal(columns["tokens"], tokens):
        raise ProfileError(f"{where}:{line_of[0]}: the parts table must list the main table's token counts")
    return {h: v for h, v in columns.items() if h != "tokens"}


def _read_header(lines: list[str], where: str) -> tuple[dict[str, str], int]:
    meta: dict[str, str] = {}
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return meta, i
        body = stripped.lstrip("#").strip()
        if not body:
            continue
        key, sep, value = body.partition(":")
        if not sep or not key.strip():
            raise ProfileError(f"{where}:{i + 1}: header lines must read '# key: value'")
        meta[key.strip()] = value.strip()
    raise ProfileError(f"{where}: no table (expected a 'tokens,step_ms,...' header after the comments)")


def _read_columns(lines: list[str], first: int, where: str,
                  required: tuple[str, ...] = ("tokens", "step_ms")) -> tuple[dict[str, np.ndarray], np.ndarray]:
    header = [h.strip() for h in lines[first].split(",")]
    for required_column in required:
        if required_column not in header:
            raise ProfileError(f"{where}:{first + 1}: column '{required_column}' is missing")
    for h in header:
        if h not in ("tokens", "context_tokens") and not h.endswith("_ms"):
            raise ProfileError(f"{where}:{first + 1}: unknown column {h!r} (extra columns must end in _ms)")
    if len(set(header)) != len(header):
        raise ProfileError(f"{where}:{first + 1}: a column name is repeated")
    rows, line_no = [], []
    for i in range(first + 1, len(lines)):
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            continue
        cells = next(csv.reader([lines[i]]))
        if len(cells) != len(header):
            raise ProfileError(f"{where}:{i + 1}: expected {len(header)} values, got {len(cells)}")
        rows.append([_cell(c, header[j], where, i + 1) for j, c in enumerate(cells)])
        line_no.append(i + 1)
    if not rows:
        raise ProfileError(f"{where}: the table has no rows")
    values = np.array(rows, dtype=float)
    return {h: values[:, j] for j, h in enumerate(header)}, np.array(line_no)


def _cell(text: str, column: str, where: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ProfileError(f"{where}:{line}: {column} is not a number: {text.strip()!r}") from None
    if not math.isfinite(value):
        raise ProfileError(f"{where}:{line}: {column} must be finite, got {text.strip()}")
    if column in ("tokens", "step_ms") and value <= 0:
        raise ProfileError(f"{where}:{line}: {column} must be positive, got {text.strip()}")
    if value < 0:
        raise ProfileError(f"{where}:{line}: {column} must not be negative, got {text.strip()}")
    if column in ("tokens", "context_tokens") and value != round(value):
        raise ProfileError(f"{where}:{line}: {column} must be a whole number, got {text.strip()}")
    return value


def _to_grid(
    columns: dict[str, np.ndarray], line_of: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
    """Rows → (tokens, context axis or None, {column: table}); checks order and completeness."""
    ctx_col = columns.get("context_tokens")
    groups = [np.arange(len(line_of))] if ctx_col is None else _context_groups(ctx_col, line_of, where)
    tokens = columns["tokens"][groups[0]]
    for rows in groups:
        _check_tokens(columns["tokens"][rows], line_of[rows], where)
        if not np.array_equal(columns["tokens"][rows], tokens):
            raise ProfileError(
                f"{where}:{line_of[rows[0]]}: every context_tokens group must list the same token counts"
            )
    names = [h for h in columns if h not in ("tokens", "context_tokens")]
    if ctx_col is None:
        return tokens.astype(np.int64), None, {h: columns[h].copy() for h in names}
    context = np.array([ctx_col[rows[0]] for rows in groups], dtype=np.int64)
    return tokens.astype(np.int64), context, {h: np.stack([columns[h][r] for r in groups]) for h in names}


def _context_groups(ctx: np.ndarray, line_of: np.ndarray, where: str) -> list[np.ndarray]:
    change = np.flatnonzero(np.diff(ctx) != 0) + 1
    groups = np.split(np.arange(ctx.size), change)
    starts = ctx[[g[0] for g in groups]]
    bad = np.flatnonzero(np.diff(starts) <= 0)
    if bad.size:
        line = line_of[groups[bad[0] + 1][0]]
        raise ProfileError(
            f"{where}:{line}: rows must be grouped by context_tokens in ascending order, each value once"
        )
    return groups


def _check_tokens(tokens: np.ndarray, lines: np.ndarray, where: str) -> None:
    steps = np.diff(tokens)
    if np.any(steps == 0):
        i = int(np.flatnonzero(steps == 0)[0]) + 1
        raise ProfileError(f"{where}:{lines[i]}: duplicate token count {tokens[i]:g}")
    if np.any(steps < 0):
        i = int(np.flatnonzero(steps < 0)[0]) + 1
        raise ProfileError(
            f"{where}:{lines[i]}: token counts must be sorted ascending ({tokens[i]:g} after {tokens[i - 1]:g})"
        )


def format_profile(profile: StepProfile) -> str:
    """The text of a profile file (the inverse of `parse_profile`)."""
    out = io.StringIO()
    out.write(f"# format: {FORMAT}\n# name: {profile.name}\n")
    for key, value in profile.provenance.items():
        out.write(f"# {key}: {_one_line(value)}\n")
    out.write(f"# extrapolation: {profile.extrapolation}\n")
    spreads: dict[str, np.ndarray] = profile.extra.get("columns", {})
    names = ["step_ms", *spreads]
    tables = [np.atleast_2d(profile.step_ms_table), *(np.atleast_2d(spreads[n]) for n in spreads)]
    contexts: list[int | None] = [None] if profile.context_tokens is None else [int(c) for c in profile.context_tokens]
    has_ctx = contexts != [None]
    out.write(",".join(["tokens", *(["context_tokens"] if has_ctx else []), *names]) + "\n")
    for row, ctx in enumerate(contexts):
        for j, b in enumerate(profile.tokens):
            lead = [str(int(b))] + ([str(int(ctx))] if ctx is not None else [])
            out.write(",".join(lead + [_ms(t[row, j]) for t in tables]) + "\n")
    parts: dict[str, np.ndarray] = profile.extra.get("parts", {})
    if parts:
        out.write(f"{PARTS_MARKER}\n" + ",".join(["tokens", *parts]) + "\n")
        for j, b in enumerate(profile.tokens):
            out.write(",".join([str(int(b)), *(_ms(parts[n][j]) for n in parts)]) + "\n")
    return out.getvalue()


def write_profile_csv(profile: StepProfile, path: str | Path) -> Path:
    """Write `profile` as a profile file (parent folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_profile(profile))
    return path


def _one_line(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return " ".join(str(value).split())


def _ms(value: float) -> str:
    """Milliseconds to the nanosecond, without trailing zeros."""
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"
