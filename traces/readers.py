"""Trace files → a lazy stream of requests (time, prompt tokens, output tokens, domain).

The first stage of trace replay (replay.py), of empirical lengths
(lengths.py) and of `specplan trace-stats` (stats.py). A `TraceReader`
reads one file line by line (plain or .gz) and yields `TraceRow`s with times
in seconds from the file's first request; nothing is held but the current
line, so a file of millions of rows streams in constant memory.

Formats:
- azure: `TIMESTAMP,ContextTokens,GeneratedTokens`; timestamps as in the
  2023 release (`2023-11-16 18:15:46.6805900`, 7 fractional digits) or the
  2024 style with a UTC offset (`2024-05-10 00:00:00.009930+00:00`);
- mooncake: JSON lines with `timestamp` (ms), `input_length`, `output_length`;
- burstgpt: `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`
  (Timestamp in seconds);
- csv: any CSV with a header, given a column mapping
  (`timestamp`, `prompt_tokens`, `output_tokens`, optional `domain`) and a `time_unit`.

A malformed line (missing field, not a number, negative tokens, time going
backwards) is a `TraceError` naming the file and line, or, with
`skip_bad_lines`, skipped and counted in `bad_lines`. A request with zero
output tokens (a failed request, as BurstGPT records them) is skipped and
counted in `failed_requests`.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import gzip
import io
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from specplan.traces.errors import TraceError

AZURE_COLUMNS = {"timestamp": "TIMESTAMP", "prompt_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}
BURSTGPT_COLUMNS = {"timestamp": "Timestamp", "prompt_tokens": "Request tokens", "output_tokens": "Response tokens"}
CSV_DEFAULT_COLUMNS = {"timestamp": "timestamp", "prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens"}
UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


class TraceRow(NamedTuple):
    """One request of a trace: seconds from the trace's first request, lengths, domain, line number,
    and its prompt's block hashes where the format has them (Mooncake's `hash_ids`)."""

    time_s: float
    prompt_tokens: int
    output_tokens: int
    domain: str | None
    line: int
    blocks: tuple[int, ...] | None = None


class BadLine(ValueError):
    """A line that does not parse; the reader adds the file and line number."""


@dataclass(frozen=True)
class TraceFile:
    """Which file, in which format, with which options (hashable: a cache key)."""

    path: str
    format: str
    columns: tuple[tuple[str, str], ...] = ()
    time_unit: str = "s"
    delimiter: str = ","
    skip_bad_lines: bool = False

    @classmethod
    def of(cls, spec: Any) -> TraceFile:
        """From a TraceArrivals or EmpiricalLength spec (same option names)."""
        return cls(spec.path, spec.format, tuple(sorted(spec.columns.items())), spec.time_unit,
                   spec.delimiter, spec.skip_bad_lines)

    def column_map(self) -> dict[str, str]:
        if self.format == "azure":
            return dict(AZURE_COLUMNS)
        if self.format == "burstgpt":
            return dict(BURSTGPT_COLUMNS)
        return {**CSV_DEFAULT_COLUMNS, **dict(self.columns)}


class TraceReader:
    """Iterating yields the file's requests in order, lazily; counts what it skipped.

    Each iteration reads the file again from the top (counters restart).
    Times are non-decreasing; the first request is at 0.
    """

    def __init__(self, file: TraceFile) -> None:
        if file.format not in ("azure", "mooncake", "burstgpt", "csv"):
            raise TraceError(f"{file.path}: unknown trace format '{file.format}' (valid: azure, mooncake, burstgpt, csv)")
        self.file = file
        self.bad_lines = 0
        self.failed_requests = 0

    def __iter__(self) -> Iterator[TraceRow]:
        self.bad_lines = 0
        self.failed_requests = 0
        origin: float | None = None
        previous = -math.inf
        with open_text(self.file.path) as handle:
            for line, parse in self.raw_rows(handle):
                try:
                    time_raw, prompt, output, domain, *blocks = parse()
                    if time_raw < previous:
                        raise BadLine(f"time goes backwards ({time_raw - previous:.6g} s); sort the trace by time")
                except (BadLine, ValueError, KeyError, IndexError, TypeError) as exc:
                    self.bad_line(line, exc)
                    continue
                previous = time_raw
                if output == 0:
                    self.failed_requests += 1
                    continue
                origin = time_raw if origin is None else origin
                yield TraceRow(time_raw - origin, prompt, output, domain, line, blocks[0] if blocks else None)

    def raw_rows(self, handle: io.TextIOBase) -> Iterator[tuple[int, Callable[[], tuple]]]:
        if self.file.format == "mooncake":
            return jsonl_rows(handle)
        return csv_rows(handle, self.file)

    def bad_line(self, line: int, exc: Exception) -> None:
        if not self.file.skip_bad_lines:
            reason = str(exc) or exc.__class__.__name__
            raise TraceError(f"{self.file.path}:{line}: malformed {self.file.format} line ({reason}); "
                                "fix it or set skip_bad_lines: true") from None
        self.bad_lines += 1

    def first(self) -> TraceRow:
        """The first request (checks the file opens and its header fits the format)."""
        for row in self:
            return row
        raise TraceError(f"{self.file.path}: no requests in the trace")


def open_text(path: str) -> io.TextIOBase:
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8", newline="")
        return open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read trace ({exc.strerror or exc})") from None


def jsonl_rows(handle: io.TextIOBase) -> Iterator[tuple[int, Callable[[], tuple]]]:
    for number, text in enumerate(handle, start=1):
        if text.strip():
            yield number, functools.partial(parse_mooncake, text)


def parse_mooncake(text: str) -> tuple[float, int, int, None, tuple[int, ...] | None]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadLine(f"not JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise BadLine("expected a JSON object")
    for key in ("timestamp", "input_length", "output_length"):
        if key not in obj:
            raise BadLine(f"no '{key}'")
    return (to_float(obj["timestamp"], "timestamp") * 1e-3, to_tokens(obj["input_length"], "input_length"),
            to_tokens(obj["output_length"], "output_length"), None, block_hashes(obj.get("hash_ids")))


def block_hashes(value: Any) -> tuple[int, ...] | None:
    """Mooncake's `hash_ids`: the prompt's block hashes, in order (None when the line has none)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise BadLine("'hash_ids' must be a list of integers")
    return tuple(value)


def csv_rows(handle: io.TextIOBase, file: TraceFile) -> Iterator[tuple[int, Callable[[], tuple]]]:
    reader = csv.reader(handle, delimiter=file.delimiter)
    header = next(reader, None)
    if header is None:
        raise TraceError(f"{file.path}: empty file (expected a header line)")
    if header and header[0].lstrip().startswith("{"):
        raise TraceError(f"{file.path}: the file is JSON lines, not a CSV with a header ({file.format} format); "
                         "a Mooncake trace is read with format: mooncake (trace-stats --format mooncake)")
    index = header_index(header, file)
    parse_time = time_parser(file)
    for row in reader:
        if not row or not any(cell.strip() for cell in row):
            continue
        yield reader.line_num, functools.partial(parse_csv_row, row, index, parse_time)


def header_index(header: list[str], file: TraceFile) -> dict[str, int]:
    """Column role → position, matching names case-insensitively and ignoring spaces around them."""
    names = {h.strip().lower(): i for i, h in enumerate(header)}
    index = {}
    for role, name in file.column_map().items():
        position = names.get(name.strip().lower())
        if position is None:
            raise TraceError(f"{file.path}: no column '{name}' ({role}) in the header "
                                f"(columns: {', '.join(h.strip() for h in header)})")
        index[role] = position
    return index


def parse_csv_row(row: list[str], index: dict[str, int], parse_time: Callable[[str], float]) -> tuple:
    if len(row) <= max(index.values()):
        raise BadLine(f"{len(row)} fields, expected at least {max(index.values()) + 1}")
    domain = row[index["domain"]].strip() if "domain" in index else None
    return (parse_time(row[index["timestamp"]]), to_tokens(row[index["prompt_tokens"]], "prompt tokens"),
            to_tokens(row[index["output_tokens"]], "output tokens"), domain or None)


def time_parser(file: TraceFile) -> Callable[[str], float]:
    """The function turning a timestamp cell into seconds (any origin: the reader subtracts the first)."""
    if file.format == "azure" or (file.format == "csv" and file.time_unit == "datetime"):
        return DatetimeClock().seconds
    scale = 1.0 if file.format == "burstgpt" else UNIT_S[file.time_unit]
    return lambda text: to_float(text, "timestamp") * scale


DATETIME = re.compile(
    r"\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2}(?:\.\d*)?)\s*(Z|[+-]\d{2}(?::?\d{2})?)?\s*$"
)


class DatetimeClock:
    """`YYYY-MM-DD HH:MM:SS[.fffffff][±HH:MM|Z]` → seconds from the first date seen.

    Any number of fractional digits (the Azure 2023 trace has 7, beyond what
    `datetime` parses); offsets convert to UTC. Counting days from the first
    date keeps sub-microsecond precision that epoch seconds in a float lose.
    """

    def __init__(self) -> None:
        self.origin_day: int | None = None
        self.days: dict[str, int] = {}

    def seconds(self, text: str) -> float:
        m = DATETIME.match(text)
        if m is None:
            raise BadLine(f"timestamp {text.strip()!r} is not YYYY-MM-DD HH:MM:SS[.f][±HH:MM]")
        year, month, day, hour, minute, second, offset = m.groups()
        day_number = self.day_number(year, month, day)
        if int(hour) > 23 or int(minute) > 59 or float(second) >= 61:
            raise BadLine(f"timestamp {text.strip()!r} has an impossible time of day")
        return (day_number * 86400.0 + int(hour) * 3600 + int(minute) * 60 + float(second)
                - offset_seconds(offset))

    def day_number(self, year: str, month: str, day: str) -> int:
        key = year + month + day
        number = self.days.get(key)
        if number is None:
            try:
                ordinal = dt.date(int(year), int(month), int(day)).toordinal()
            except ValueError as exc:
                raise BadLine(f"bad date {year}-{month}-{day} ({exc})") from None
            self.origin_day = ordinal if self.origin_day is None else self.origin_day
            number = self.days[key] = ordinal - self.origin_day
        return number


def offset_seconds(offset: str | None) -> float:
    if not offset or offset == "Z":
        return 0.0
    sign = -1.0 if offset[0] == "-" else 1.0
    digits = offset[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    return sign * (hours * 3600 + minutes * 60)


def to_float(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise BadLine(f"{what} {value!r} is not a number") from None
    if not math.isfinite(x):
        raise BadLine(f"{what} is {x}")
    return x


def to_tokens(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise BadLine(f"{what} {value!r} is not a token count")
    x = to_float(value, what)
    if x < 0 or x != int(x):
        raise BadLine(f"{what} {value!r} is not a whole number >= 0")
    return int(x)
