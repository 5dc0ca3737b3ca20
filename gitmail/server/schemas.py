"""The ``outputSchema`` a tool lists: the fields of its typed result, said in as few bytes as they can be.

A tool's return annotation names its result (a :class:`~gitmail.model.results.Result`,
a list of them, or plain JSON types); :func:`output_schema` turns it into the
schema of the JSON object the client receives as ``structuredContent``:
each key of the result under its wire name with its JSON type, and
``required`` for the keys every answer has (a field left out while ``None``
is not required; a field that may be ``null`` is required with ``null``
among its types). A result that is not an object (a list) is wrapped as
``{"result": ...}``, as FastMCP sends it, and the schema describes its items.

Every agent pays for ``tools/list`` in its context window before its first
call, and the profiles' listings have byte budgets (``tests/test_surface.py``),
so the schema carries no titles or descriptions (the tool's description says
what it returns), a key every answer has whose value is a string is named
only in ``required`` (``additionalProperties: {"type": "string"}`` gives
the type of every key not listed under ``properties``; a result has no
other keys), a nullable type or a choice of plain types is a type list
rather than an ``anyOf``, and it describes one level: an object inside the
result (a message inside a delivery, say) is typed ``object`` without its
own fields, which the tool that reads that object describes. Full schemas of every nested shape would
take about three times the bytes, more than the core and default budgets hold.

A result that several tools answer is listed in full by the tool that reads
it, and briefly by the others: a tool declared as answering
``Annotated[Registration, Brief("profile", "name")]`` lists only the ``name``
of the flattened ``profile`` (the other keys follow, as ``whois`` lists
them), so the object is open to them.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, Union

from gitmail.model.results import Result

WRAP = "x-fastmcp-wrap-result"
"""FastMCP's mark of a wrapped result; the server needs it, the listing leaves it out."""

_SCALARS: Mapping[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_STRING: Mapping[str, str] = {"type": "string"}


UNLISTED = "x-unlisted"
"""The mark of an argument the server takes but does not list (one kept only so older calls keep working)."""


def type_list(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with an ``anyOf`` of bare types said as one type list: ``{"type": ["string", "integer"]}``.

    The two say the same, and the list is half the bytes.
    """
    options = schema.get("anyOf")
    if not isinstance(options, list) or not options:
        return schema
    if not all(isinstance(o, dict) and set(o) == {"type"} and isinstance(o["type"], str) for o in options):
        return schema
    return {"type": [o["type"] for o in options], **{k: v for k, v in schema.items() if k != "anyOf"}}


@dataclass(frozen=True)
class Brief:
    """How a tool lists a result part another tool lists in full: of the flattened ``field``, only ``keys``."""

    field: str
    keys: tuple[str, ...]

    def __init__(self, field: str, *keys: str) -> None:
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "keys", keys)


class Unschemable(TypeError):
    """A return annotation this module cannot describe (a tool must declare what it answers)."""


def output_schema(annotation: Any) -> dict[str, Any]:
    """The listed schema of a tool answering ``annotation`` (a result class, a list, a JSON type).

    ``Annotated[ResultClass, Brief(...)]`` lists that result briefly (see the module docs).
    """
    brief = None
    if typing.get_origin(annotation) is Annotated:
        annotation, *extras = typing.get_args(annotation)
        brief = next((extra for extra in extras if isinstance(extra, Brief)), None)
    if brief is not None and not (_is_result(annotation) and any(
            key == brief.field and flatten for key, _, _, flatten in _fields(annotation))):
        raise Unschemable(f"{brief} names no flattened field of {annotation!r}")
    schema = _object(annotation, brief) if brief is not None else _schema(annotation, outer=True)
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"], WRAP: True}
    return schema


def listed(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as ``tools/list`` shows it: without FastMCP's own wrapping mark (its results say so in _meta)."""
    return {key: value for key, value in schema.items() if key != WRAP}


@cache
def _fields(cls: type[Result]) -> tuple[tuple[str, Any, bool, bool], ...]:
    """Each wire field of ``cls``: its key, its annotation, whether None leaves it out, whether it is flattened."""
    hints = typing.get_type_hints(cls)
    return tuple((f.metadata.get("serialization_alias", f.name), hints[f.name], bool(f.metadata.get("omit_none")),
                  bool(f.metadata.get("flatten"))) for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def _is_result(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Result)


def _split_none(annotation: Any) -> tuple[Any, bool]:
    """``annotation`` without ``None``, and whether it allowed ``None``."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        rest = options[0] if len(options) == 1 else Union[tuple(options)]  # noqa: UP007 - rebuilt at run time
        return rest, len(options) < len(typing.get_args(annotation))
    return annotation, False


def _schema(annotation: Any, *, outer: bool) -> dict[str, Any]:
    """The schema of ``annotation``; results inside it are described (``outer``) or only typed as objects."""
    inner, nullable = _split_none(annotation)
    schema = _plain(inner, outer=outer)
    if not nullable:
        return schema
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        return {**schema, "type": [*kinds, "null"]}
    return {"anyOf": [schema, {"type": "null"}]} if schema else schema


def _plain(annotation: Any, *, outer: bool) -> dict[str, Any]:
    if annotation is Any:
        return {}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if _is_result(annotation):
        return _object(annotation) if outer else {"type": "object"}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list or origin is tuple or annotation is list:
        items = _schema(args[0], outer=outer) if args else {}
        described = items and items != {"type": "object"}  # a list of results inside a result: only its type
        return {"type": "array", "items": items} if described else {"type": "array"}
    if origin is dict or annotation is dict:
        values = _schema(args[1], outer=outer) if args else {}
        return {"type": "object", "additionalProperties": values} if values else {"type": "object"}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):  # options that list alike (two results inside one) are listed once
        options: list[dict[str, Any]] = []
        for option in (_schema(a, outer=outer) for a in args):
            if option not in options:
                options.append(option)
        return options[0] if len(options) == 1 else type_list({"anyOf": options})
    raise Unschemable(f"no JSON schema for {annotation!r}: declare the tool's result as a Result or JSON types")


def _object(cls: type[Result], brief: Brief | None = None) -> dict[str, Any]:
    """The schema of ``cls``'s JSON object, results inside it only typed (see the module docs)."""
    properties, required = _keys(cls, brief)
    # A key every answer has whose value is a string is named in ``required`` alone: "additionalProperties:
    # string" gives its type. Most of a result's keys are such strings, and each said once is 25-40 bytes less.
    # A brief listing leaves keys out, so its object stays open to them and each key it lists is typed.
    implied = [key for key in required if properties[key] == _STRING] if brief is None else []
    schema: dict[str, Any] = {"type": "object",
                              "properties": {k: v for k, v in properties.items() if k not in implied}}
    if required:
        schema["required"] = required
    if implied:
        schema["additionalProperties"] = _STRING
    return schema


def _keys(cls: type[Result], brief: Brief | None = None) -> tuple[dict[str, Any], list[str]]:
    """Each key of ``cls``'s JSON object with its schema (flattened fields at their place), and the required ones.

    Of the flattened field ``brief`` names, only its keys.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, annotation, omit_none, flatten in _fields(cls):
        if flatten:
            inner, nullable = _split_none(annotation)
            flat, flat_required = _keys(inner)
            if brief is not None and key == brief.field:
                flat = {name: schema for name, schema in flat.items() if name in brief.keys}
                flat_required = [name for name in flat_required if name in brief.keys]
            properties.update(flat)
            required += [] if nullable else flat_required
            continue
        optional = omit_none and _split_none(annotation)[1]
        properties[key] = _schema(_split_none(annotation)[0] if omit_none else annotation, outer=False)
        if not optional:
            required.append(key)
    return properties, required
