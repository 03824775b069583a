"""The operator walk: the estimator's operator list (JSON) read as the verify pricing needs it.

`walk` visits every operator, the ones nested in composites included; the
attention helpers find the modules whose time depends on the KV length and
give them q query tokens folded into heads; `flatten_overlaps` opens the
estimator's one composite that nests other operators (`Overlap`, DeepSeek's
routed experts beside its shared expert) so that each member is priced, and
named (`parts.py`), on its own.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

MODULE_KINDS = ("MlaModuleGeneration", "Dsv4Generation")


def kind_of(op: dict[str, Any]) -> str:
    return next(iter(op))


def walk(ops: Any) -> Iterator[dict[str, Any]]:
    """Every operator, nested ones (Overlap groups, Fallback branches) included."""
    if isinstance(ops, list):
        for item in ops:
            yield from walk(item)
    elif isinstance(ops, dict):
        if len(ops) == 1 and isinstance(next(iter(ops.values())), dict) and kind_of(ops)[0].isupper():
            yield ops
        for value in ops.values():
            if isinstance(value, (list, dict)):
                yield from walk(value)


def is_module(op: dict[str, Any]) -> bool:
    """An MLA or DeepSeek-V4 attention module (or a Fallback whose primary is one): one table each."""
    kind = kind_of(op)
    if kind == "Fallback":
        return kind_of(op[kind]["primary"]) in MODULE_KINDS
    return kind in MODULE_KINDS


def with_query_heads(op: dict[str, Any], q: int) -> dict[str, Any]:
    """The same attention operator with q times the query heads (q query tokens per request).

    A DeepSeek-V4 module stops at its native head count (the table's largest);
    `head_overflow` gives the linear factor for the rest.
    """
    out = copy.deepcopy(op)
    for inner in walk(out):
        body = inner[kind_of(inner)]
        if kind_of(inner) == "GenerationAttention":
            body["n"] = body["n"] * q
        elif kind_of(inner) == "MlaModuleGeneration":
            body["num_heads"] = body["num_heads"] * q
        elif kind_of(inner) == "Dsv4Generation":
            body["num_heads"] = min(body["num_heads"] * q, body["native_heads"])
    return out


def head_overflow(op: dict[str, Any], q: int) -> float:
    """q·h / native for a DeepSeek-V4 module asked for more heads than its native count, else 1."""
    for inner in walk(op):
        body = inner[kind_of(inner)]
        if kind_of(inner) == "Dsv4Generation" and body["num_heads"] * q > body["native_heads"]:
            return body["num_heads"] * q / body["native_heads"]
    return 1.0


def dsv4_body(op: dict[str, Any]) -> dict[str, Any] | None:
    """The DeepSeek-V4 module inside `op` (itself or a Fallback's primary), or None."""
    return next((inner["Dsv4Generation"] for inner in walk(op) if kind_of(inner) == "Dsv4Generation"), None)


def is_csa(op: dict[str, Any]) -> bool:
    body = dsv4_body(op)
    return body is not None and body["attn_kind"] == "Csa"


def csa_layers(op: dict[str, Any]) -> float:
    """How many CSA layers this module stands for (its scale factor), else 0."""
    body = dsv4_body(op)
    return float(body["scale_factor"]) if body is not None and body["attn_kind"] == "Csa" else 0.0


def flatten_overlaps(ops: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[list[int], list[int]]]]:
    """(leaves, overlaps): each Overlap op replaced by its members; overlaps index its two groups in leaves."""
    leaves: list[dict[str, Any]] = []
    overlaps: list[tuple[list[int], list[int]]] = []
    for op in ops:
        if kind_of(op) != "Overlap":
            leaves.append(op)
            continue
        body = op["Overlap"]
        start = len(leaves)
        leaves += [*body["group_a"], *body["group_b"]]
        middle = start + len(body["group_a"])
        overlaps.append((list(range(start, middle)), list(range(middle, len(leaves)))))
    return leaves, overlaps
