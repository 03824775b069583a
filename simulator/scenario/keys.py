"""Every key the scenario loader accepts, read from the dataclasses that validate it: the schema reference.

    sections = schema_sections()     # one Section per dataclass reachable from Scenario, then each policy's Params
    section.paths, section.kind, section.doc, section.keys   # Key: path, type, default, bounds, unit, doc, example

The loader (`specplan.simulator.core.schema.build`) accepts exactly the
init fields of these classes, tagged unions chosen by their `kind` (or
`mode`), and each policy's `Params` under `policy.params`; this module
walks the same classes, so the reference cannot list a key the loader
refuses or miss one it accepts. A key's meaning, unit and example are its
field metadata (`specplan.fields.bounded`); where no unit is given, the
name's suffix says it (`_s`, `_ms`, `_tokens`, `_per_s`, `_usd`, `gbps`).
The markdown page is written by `docs/gen/schema_page.py`.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator
from dataclasses import MISSING, dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from specplan.policies.registry import POLICIES
from specplan.simulator.core.schema import Word, to_plain
from specplan.simulator.scenario.spec import Scenario

SUFFIX_UNITS = (("_per_s", "1/s"), ("_ms", "ms"), ("_s", "s"), ("_tokens", "tokens"), ("_usd", "USD"),
                ("gbps", "Gb/s"), ("_bytes", "bytes"))


@dataclass(frozen=True)
class Key:
    """One accepted key of a section: how it is written and what it means."""

    name: str
    type: str
    default: str
    bounds: str
    unit: str
    doc: str
    example: str

    @property
    def required(self) -> bool:
        return self.default == "required"


@dataclass
class Section:
    """One dataclass of the contract, at every path where a scenario may write it."""

    cls: type
    paths: list[str]
    kind: str | None
    tag: str
    keys: list[Key]
    policies: list[str] = dataclasses.field(default_factory=list)   # policy.params: the policies that take it
    listed: bool = False   # written as the items of a list (search.hardware), not at a dotted path

    @property
    def doc(self) -> str:
        return " ".join((self.cls.__doc__ or "").strip().split("\n\n")[0].split())


def schema_sections() -> list[Section]:
    """Every section of the scenario contract, in the order a reader meets them, then each policy's params."""
    found: dict[type, Section] = {}
    walk(Scenario, "", found)
    for name, policy in POLICIES.items():
        walk(policy.Params, "policy.params", found)
        found[policy.Params].policies.append(name)
    return [section for section in found.values() if section.keys]


def walk(cls: type, path: str, found: dict[type, Section], listed: bool = False) -> None:
    """Record `cls` at `path` (a second path for a class already seen is only added to its paths)."""
    if cls in found:
        if path not in found[cls].paths:
            found[cls].paths.append(path)
        return
    hints = get_type_hints(cls, include_extras=True)
    fields = [f for f in dataclasses.fields(cls) if f.init and not f.metadata.get("internal")]
    found[cls] = Section(cls, [path], getattr(cls, "KIND", None), getattr(cls, "TAG", "kind"),
                         [key_of(f, hints[f.name]) for f in fields], listed=listed)
    for f in fields:
        in_list = get_origin(unwrapped(hints[f.name])) is tuple
        for child in dataclasses_in(hints[f.name]):
            walk(child, join(path, f.name), found, in_list)


def unwrapped(hint: Any) -> Any:
    """A field's hint without Optional and Annotated."""
    if get_origin(hint) is Annotated:
        return unwrapped(get_args(hint)[0])
    if get_origin(hint) in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        return unwrapped(options[0]) if len(options) == 1 else hint
    return hint


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def dataclasses_in(hint: Any) -> Iterator[type]:
    """The dataclasses a field may hold (through Optional, unions, Annotated, lists and mappings)."""
    origin = get_origin(hint)
    if origin is Annotated:
        yield from dataclasses_in(get_args(hint)[0])
    elif origin in (Union, types.UnionType, tuple, dict):
        for arg in get_args(hint):
            yield from dataclasses_in(arg)
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        yield hint


def key_of(f: dataclasses.Field, hint: Any) -> Key:
    meta = f.metadata
    default = field_default(f)
    example = meta.get("example")
    return Key(name=f.name, type=type_text(hint), default=default, bounds=bounds_text(meta),
               unit=meta.get("unit") or suffix_unit(f.name), doc=meta.get("doc", ""),
               example="" if example is None else inline_yaml(example))


def field_default(f: dataclasses.Field) -> str:
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:
        value = f.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "(section defaults)"
    return "none" if value is None else inline_yaml(value)


def inline_yaml(value: Any) -> str:
    value = to_plain(value)
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("\n...").strip()


def bounds_text(meta: Any) -> str:
    signs = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
    parts = [f"{sign} {meta[key]:g}" for key, sign in signs if meta.get(key) is not None]
    if meta.get("verify_length"):
        parts.append("<= drafter.block_size")
    return ", ".join(parts)


def suffix_unit(name: str) -> str:
    return next((unit for suffix, unit in SUFFIX_UNITS if name.endswith(suffix)), "")


def type_text(hint: Any) -> str:
    """How a reader writes the value: 'number', 'one of a | b', 'list of whole numbers', 'mapping', ..."""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *extras = get_args(hint)
        return type_text(inner) + "".join(f" or {e.word}" for e in extras if isinstance(e, Word))
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        kinds = [a for a in options if dataclasses.is_dataclass(a) and hasattr(a, "KIND")]
        if kinds and len(kinds) == len(options):
            tag = getattr(kinds[0], "TAG", "kind")
            return f"mapping by `{tag}`: " + ", ".join(k.KIND for k in kinds)
        texts = [type_text(a) for a in options]
        return " or ".join(dict.fromkeys(texts)) + (" or null" if len(options) < len(get_args(hint)) else "")
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(hint))
    if origin is tuple:
        return f"list of {plural(type_text(get_args(hint)[0]))}"
    if origin is dict:
        return f"mapping of name: {type_text(get_args(hint)[1])}"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return "mapping"
    return {int: "whole number", float: "number", str: "string", bool: "true / false", Any: "any"}.get(hint,
                                                                                                     str(hint))


def plural(text: str) -> str:
    return {"whole number": "whole numbers", "number": "numbers", "string": "strings", "mapping": "mappings"}.get(
        text, text)
