"""Typed results of domain operations, and the JSON objects they are on the wire.

Every operation of ``coord`` and ``mail`` returns a dataclass declared with
:func:`result` (or a list of them) instead of a loose dictionary: the faces
read its fields by name (mypy checks them), and a schema can be derived from
its annotations. What a caller of the MCP server or the web view receives is
still the JSON object it always was; :func:`wire` produces it:

- the fields in the order they are declared, under their own names, unless
  ``field(metadata=renamed("from"))`` gives the key another name (a Python
  keyword, for instance);
- a field declared with ``metadata=OMIT_NONE`` is left out while it is
  ``None`` (a key that some answers have and others do not);
- a field declared with ``metadata=FLATTEN`` holds another result whose keys
  stand at its place in this one (a reply is the message plus its delivery);
- results inside fields, lists and dictionaries become objects too.

A result is also a read-only mapping of its wire form (``result["count"]``,
``dict(result)``, equality with a dictionary), for code written against the
JSON: scripts, tests, and the faces' glue until they read fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any, TypeVar, dataclass_transform

OMIT_NONE: Mapping[str, Any] = {"omit_none": True}
FLATTEN: Mapping[str, Any] = {"flatten": True}

T = TypeVar("T")


def renamed(key: str) -> Mapping[str, Any]:
    """Field metadata: the key the field has on the wire, when its name cannot be that key.

    It is stored as ``serialization_alias``, the name pydantic reads from a
    dataclass field's metadata, so a schema derived from the class uses the
    key too.
    """
    return {"serialization_alias": key}


@dataclass_transform(kw_only_default=True, frozen_default=True, eq_default=False,
                     field_specifiers=(dataclasses.field,))
def result(cls: type[T]) -> type[T]:
    """Declare ``cls`` (a :class:`Result`) a frozen, keyword-only dataclass that compares by its wire form."""
    return dataclasses.dataclass(frozen=True, kw_only=True, eq=False)(cls)


class Result(Mapping[str, Any]):
    """The base of every typed result; see the module docs."""

    __slots__ = ()

    def wire(self) -> dict[str, Any]:
        """The JSON object this result is on the wire, exactly as callers have always received it."""
        out: dict[str, Any] = {}
        for name, key, omit_none, flatten in _plan(type(self)):
            value = getattr(self, name)
            if value is None and (omit_none or flatten):
                continue
            if flatten:
                out.update(wire(value))
            else:
                out[key] = wire(value)
        return out

    def __getitem__(self, key: str) -> Any:
        return self.wire()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.wire())

    def __len__(self) -> int:
        return len(self.wire())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Result):
            return self.wire() == other.wire()
        if isinstance(other, Mapping):
            return self.wire() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a dictionary, so never a key

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wire()!r})"


@cache
def _plan(cls: type[Result]) -> tuple[tuple[str, str, bool, bool], ...]:
    """Each field of ``cls``: its name, its key on the wire, whether None leaves it out, whether it is flattened."""
    return tuple((f.name, f.metadata.get("serialization_alias", f.name), bool(f.metadata.get("omit_none")),
                  bool(f.metadata.get("flatten"))) for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def wire(value: Any) -> Any:
    """``value`` as JSON-ready data: results become their wire objects, inside lists and dictionaries too."""
    if isinstance(value, Result):
        return value.wire()
    if isinstance(value, list):
        return [wire(item) for item in value]
    if isinstance(value, dict):
        return {key: wire(item) for key, item in value.items()}
    return value
