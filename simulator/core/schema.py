"""Plain YAML mappings → validated, frozen dataclasses.

The scenario contract (docs/reference/scenario.md) is written as frozen dataclasses with
type annotations; `build(cls, raw, path)` walks a mapping against them and
returns an instance or raises `ScenarioError` naming the key path. Rules:

- unknown keys are errors that name the closest valid key;
- numbers are accepted the way people write them (`1e12`, `1.0e12`,
  `40_000`), although PyYAML reads some of those as strings;
- `Literal[...]` fields list the valid choices in their error;
- a field annotated `Annotated[A | B, Tagged("kind")]` is a tagged union:
  the mapping's `kind` key picks the dataclass (each has `KIND`); so is a
  plain union of dataclasses that all have `KIND` (keyed by their `TAG`,
  default `kind`), how the leaf packages declare theirs;
- per-field bounds come from field metadata (`gt`, `ge`, `lt`, `le`: what
  `num(...)` and the leaf packages' `bounded(...)` write); cross-field
  rules from an optional `validate(self, path)` method, called after
  construction (a leaf package's `KeyedError` becomes a `ScenarioError`);
- a number annotated `Annotated[int, Word("auto")]` also takes that word, which
  loading resolves (specplan.simulator.scenario.load): the field holds a number
  once the scenario is loaded;
- fields marked `path=True` are resolved against the scenario's folder
  (except `builtin:NAME`, a file shipped with the project).

`to_plain(obj)` turns an instance back into plain YAML-able data, which is
how the resolved scenario is written next to every result.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from specplan.errors import KeyedError
from specplan.fields import bounded
from specplan.simulator.core.errors import ScenarioError

BUILTIN_PREFIX = "builtin:"


@dataclass(frozen=True)
class Tagged:
    """Marks a union of dataclasses chosen by the value of the `key` entry."""

    key: str = "kind"


@dataclass(frozen=True)
class Word:
    """Marks a number that may also be given as this word, resolved when the scenario loads."""

    word: str


num = bounded  # the scenario layer's name for specplan.fields.bounded


class Context:
    """What building needs beyond the mapping: the folder relative paths resolve against."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def closest(name: str, valid: typing.Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest valid name, else the list of valid names."""
    valid = sorted(valid)
    match = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    if match:
        return f" (did you mean '{match[0]}'?)"
    return f" (valid: {', '.join(valid)})"


def build(cls: type, raw: Any, path: str, ctx: Context) -> Any:
    """Validate `raw` against dataclass `cls` and return a frozen instance."""
    if not isinstance(raw, dict):
        raise ScenarioError(path, f"expected a mapping, got {describe(raw)}")
    hints = type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    for key in raw:
        if not isinstance(key, str) or key not in names:
            raise ScenarioError(join(path, str(key)), "unknown key" + closest(str(key), names))
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        where = join(path, f.name)
        if f.name in raw:
            values[f.name] = coerce(raw[f.name], hints[f.name], where, ctx, f.metadata)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ScenarioError(where, "required key is missing")
    obj = cls(**values)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        try:
            validate(path)
        except ScenarioError:
            raise
        except KeyedError as exc:  # a leaf package's own error for a bad key
            raise ScenarioError(exc.path, exc.detail) from None
    return obj


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """A dataclass's resolved annotations, once per class (resolving them compiles each one: a sweep's
    check validates dozens of scenarios)."""
    return get_type_hints(cls, include_extras=True)


def coerce(value: Any, hint: Any, path: str, ctx: Context, meta: typing.Mapping[str, Any]) -> Any:
    """Check one value against its annotation, converting where the contract allows."""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *extras = get_args(hint)
        tag = next((e for e in extras if isinstance(e, Tagged)), None)
        if tag is not None:
            return build_tagged(value, inner, tag.key, path, ctx)
        if any(isinstance(e, Word) and value == e.word for e in extras):
            return value
        return coerce(value, inner, path, ctx, meta)
    if origin in (Union, types.UnionType):
        return coerce_union(value, get_args(hint), path, ctx, meta)
    if origin is Literal:
        choices = get_args(hint)
        if value not in choices:
            shown = ", ".join(map(str, choices))
            raise ScenarioError(path, f"must be one of {shown}, got {describe(value)}")
        return value
    if hint is Any:
        return value
    if origin is tuple:
        return coerce_sequence(value, get_args(hint)[0], path, ctx, meta)
    if origin is dict:
        return coerce_mapping(value, get_args(hint)[1], path, ctx, meta)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build(hint, value, path, ctx)
    if hint is bool:
        if not isinstance(value, bool):
            raise ScenarioError(path, f"expected true or false, got {describe(value)}")
        return value
    if hint in (int, float):
        return check_bounds(to_number(value, hint, path), path, meta)
    if hint is str:
        if not isinstance(value, str):
            raise ScenarioError(path, f"expected a string, got {describe(value)}")
        if meta.get("path") and value and not value.startswith(BUILTIN_PREFIX):
            return str((ctx.base_dir / value).resolve())
        return value
    raise TypeError(f"schema annotation not supported at {path}: {hint!r}")


def coerce_union(value: Any, options: tuple, path: str, ctx: Context, meta: Any) -> Any:
    if value is None and type(None) in options:
        return None
    kinds = [o for o in options if o is not type(None)]
    if len(kinds) == 1:
        return coerce(value, kinds[0], path, ctx, meta)
    if all(dataclasses.is_dataclass(o) and hasattr(o, "KIND") for o in kinds):
        tag = {getattr(o, "TAG", "kind") for o in kinds}
        if len(tag) == 1:
            return build_tagged(value, Union[tuple(kinds)], tag.pop(), path, ctx)  # noqa: UP007
    for option in kinds:
        if matches_shape(value, option):
            return coerce(value, option, path, ctx, meta)
    names = " or ".join(type_name(o) for o in kinds)
    raise ScenarioError(path, f"expected {names}, got {describe(value)}")


def matches_shape(value: Any, hint: Any) -> bool:
    origin = get_origin(hint) or hint
    if origin in (dict,) or dataclasses.is_dataclass(origin):
        return isinstance(value, dict)
    if origin is tuple:
        return isinstance(value, list)
    if origin is str:
        return isinstance(value, str)
    if origin in (int, float):
        return isinstance(value, (int, float, str)) and not isinstance(value, bool)
    return True


def build_tagged(value: Any, union: Any, key: str, path: str, ctx: Context) -> Any:
    members = get_args(union) if get_origin(union) in (Union, types.UnionType) else (union,)
    classes = {c.KIND: c for c in members}
    if not isinstance(value, dict):
        raise ScenarioError(path, f"expected a mapping with '{key}', got {describe(value)}")
    if key not in value:
        raise ScenarioError(join(path, key), f"required key is missing (one of {', '.join(classes)})")
    kind = value[key]
    if kind not in classes:
        raise ScenarioError(join(path, key), f"unknown {key} '{kind}'" + closest(str(kind), classes))
    rest = {k: v for k, v in value.items() if k != key}
    return build(classes[kind], rest, path, ctx)


def coerce_sequence(value: Any, item: Any, path: str, ctx: Context, meta: Any) -> tuple:
    if not isinstance(value, list):
        raise ScenarioError(path, f"expected a list, got {describe(value)}")
    return tuple(coerce(v, item, join(path, i), ctx, meta) for i, v in enumerate(value))


def coerce_mapping(value: Any, item: Any, path: str, ctx: Context, meta: Any) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(path, f"expected a mapping, got {describe(value)}")
    return {str(k): coerce(v, item, join(path, str(k)), ctx, meta) for k, v in value.items()}


def to_number(value: Any, kind: type, path: str) -> int | float:
    """A number from YAML, accepting `1e12`, `1.0e12` and `40_000` written as strings."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ScenarioError(path, f"expected a number, got {describe(value)}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ScenarioError(path, f"expected a number, got {describe(value)}") from None
    if not math.isfinite(value):
        raise ScenarioError(path, f"must be finite, got {value}")
    if kind is int:
        if float(value) != int(value):
            raise ScenarioError(path, f"expected a whole number, got {value}")
        return int(value)
    return float(value)


def check_bounds(x: float, path: str, meta: typing.Mapping[str, Any]) -> float:
    tests = (("gt", lambda b: x > b, ">"), ("ge", lambda b: x >= b, ">="),
             ("lt", lambda b: x < b, "<"), ("le", lambda b: x <= b, "<="))
    for key, ok, sign in tests:
        bound = meta.get(key)
        if bound is not None and not ok(bound):
            raise ScenarioError(path, f"must be {sign} {bound:g}, got {x:g}")
    return x


def describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{value!r}"


def type_name(hint: Any) -> str:
    origin = get_origin(hint) or hint
    if dataclasses.is_dataclass(origin) or origin is dict:
        return "a mapping"
    if origin is tuple:
        return "a list"
    return {str: "a string", int: "a whole number", float: "a number"}.get(origin, str(origin))


def to_plain(obj: Any) -> Any:
    """Dataclasses, tuples and dicts → plain data; tagged unions get their `kind` back."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        kind = getattr(type(obj), "KIND", None)
        if kind is not None:
            out[getattr(type(obj), "TAG", "kind")] = kind
        for f in dataclasses.fields(obj):
            if f.init:
                out[f.name] = to_plain(getattr(obj, f.name))
        return out
    if isinstance(obj, (tuple, list)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj
