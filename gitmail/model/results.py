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

A result *is* its wire form, too: a read-only ``dict`` subclass whose items
are the JSON object, filled when it is made. So every reader written
against the JSON (``json.dumps``, the TOON encoder, scripts and tests, a face
whose annotations still say ``dict[str, Any]``) keeps working unchanged,
while new code reads the typed fields. Fields are frozen and the dictionary
refuses changes; ``dataclasses.replace`` makes a changed copy. A field may
not be named as a ``dict`` method (``items``, ``keys`` …): rename it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, Self, TypeVar, dataclass_transform

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


_DICT_NAMES = frozenset(dir(dict))


@dataclass_transform(kw_only_default=True, frozen_default=True, eq_default=False,
                     field_specifiers=(dataclasses.field,))
def result(cls: type[T]) -> type[T]:
    """Declare ``cls`` (a :class:`Result`) a frozen, keyword-only dataclass that equals its wire form."""
    made = dataclasses.dataclass(frozen=True, kw_only=True, eq=False)(cls)
    clashes = sorted(f.name for f in dataclasses.fields(made) if f.name in _DICT_NAMES)  # type: ignore[arg-type]
    if clashes:
        raise TypeError(f"{cls.__name__}: field {', '.join(clashes)} would hide a dict method; rename it")
    return made


def _refuse(self: Result, *args: object, **kwargs: object) -> None:
    raise TypeError(f"{type(self).__name__} is read-only: make a changed copy with dataclasses.replace")


class Result(dict[str, Any]):
    """The base of every typed result; see the module docs."""

    __slots__ = ()

    def __post_init__(self) -> None:
        items: dict[str, Any] = {}
        for name, key, omit_none, flatten in _plan(type(self)):
            value = getattr(self, name)
            if value is None and (omit_none or flatten):
                continue
            if type(value) in _PLAIN and not flatten:  # what :func:`wire` gives back as it is, without the call
                items[key] = value
            elif flatten:
                items.update(wire(value))
            else:
                items[key] = wire(value)
        dict.update(self, items)

    def wire(self) -> dict[str, Any]:
        """The JSON object this result is on the wire, exactly as callers have always received it."""
        return dict(self)

    @classmethod
    def from_wire(cls, view: Mapping[str, Any], **given: Any) -> Self:
        """The result whose JSON object a read built as ``view`` (from the index, a snapshot or another result).

        Each field is read from its key on the wire (``from`` for a renamed
        ``sender``); a field with a default may be missing, and keys that are
        not fields are passed over, so one result is made from another that
        has more. A field that holds one result is made from its object; a
        list is taken as it is. ``given`` sets fields outright (what the view
        does not have, or holds otherwise).
        """
        values: dict[str, Any] = {}
        for name, key, nested, optional in _reading(cls):
            if name in given:
                values[name] = given[name]
            elif key is None:
                raise TypeError(f"{cls.__name__}.from_wire: give the flattened field {name}, it has no key to read")
            elif key in view:
                value = view[key]
                values[name] = nested.from_wire(value) if nested is not None and value is not None else value
            elif not optional:
                raise KeyError(f"{cls.__name__}.from_wire: the view has no {key!r}")
        return cls(**values)

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), {f.name: getattr(self, f.name)
                                       for f in dataclasses.fields(self)})  # type: ignore[arg-type]


def fields_of(value: Result) -> dict[str, Any]:
    """The fields of a result by name, as keyword arguments: to build a result that extends it with more fields."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}  # type: ignore[arg-type]


def _rebuild(cls: type[Result], values: dict[str, Any]) -> Result:
    return cls(**values)


@cache
def _reading(cls: type[Result]) -> tuple[tuple[str, str | None, type[Result] | None, bool], ...]:
    """Each field of ``cls`` as :meth:`Result.from_wire` reads it: name, wire key (None for a flattened field,
    which has no key of its own), the result it holds, whether it may be missing (it has a default)."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = hints[f.name]
        options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        held = [t for t in options if isinstance(t, type) and issubclass(t, Result)]
        optional = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        key = None if f.metadata.get("flatten") else f.metadata.get("serialization_alias", f.name)
        plan.append((f.name, key, held[0] if held else None, optional))
    return tuple(plan)


@cache
def _plan(cls: type[Result]) -> tuple[tuple[str, str, bool, bool], ...]:
    """Each field of ``cls``: its name, its key on the wire, whether None leaves it out, whether it is flattened."""
    return tuple((f.name, f.metadata.get("serialization_alias", f.name), bool(f.metadata.get("omit_none")),
                  bool(f.metadata.get("flatten"))) for f in dataclasses.fields(cls))  # type: ignore[arg-type]


_PLAIN = frozenset({str, int, float, bool, type(None)})  # already JSON-ready: most fields of every result


def wire(value: Any) -> Any:
    """``value`` as plain JSON-ready data: results become dictionaries, inside lists and dictionaries too."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Result):
        return dict(value)
    if isinstance(value, list):
        return [wire(item) for item in value]
    if isinstance(value, dict):
        return {key: wire(item) for key, item in value.items()}
    return value
