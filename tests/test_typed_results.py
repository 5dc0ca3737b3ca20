"""Domain operations answer typed values, and those values are the same JSON on the wire as before.

The base (:mod:`gitmail.model.results`) is checked on its own here; what each
operation sends is held by the MCP tests (``test_seed_surface.py``, the
drop-in tests) against a real server. The scan at the end keeps loose
``dict[str, Any]`` answers out of ``coord`` and ``mail``.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import pickle
from dataclasses import field

import pytest

from gitmail.model.results import FLATTEN, OMIT_NONE, Result, renamed, result, wire

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@result
class _Item(Result):
    id: str
    sender: str = field(metadata=renamed("from"))
    topic: str | None = field(default=None, metadata=OMIT_NONE)
    note: str | None = None


@result
class _Batch(Result):
    entries: list[_Item]
    by_name: dict[str, _Item]
    count: int


@result
class _Flat(Result):
    item: _Item | None = field(default=None, metadata=FLATTEN)
    created: bool


def test_the_wire_form_keeps_declared_order_renames_and_leaves_out_only_what_is_marked():
    item = _Item(id="a", sender="Blue")
    assert json.dumps(item.wire()) == '{"id": "a", "from": "Blue", "note": null}'
    assert list(_Item(id="a", sender="Blue", topic="t").wire()) == ["id", "from", "topic", "note"]


def test_results_inside_lists_dicts_and_flattened_fields_become_objects():
    item = _Item(id="a", sender="Blue")
    batch = _Batch(entries=[item], by_name={"a": item}, count=1)
    assert batch.wire() == {"entries": [{"id": "a", "from": "Blue", "note": None}],
                            "by_name": {"a": {"id": "a", "from": "Blue", "note": None}}, "count": 1}
    assert _Flat(item=item, created=True).wire() == {"id": "a", "from": "Blue", "note": None, "created": True}
    assert _Flat(created=False).wire() == {"created": False}
    assert wire([batch, {"k": item}]) == [batch.wire(), {"k": item.wire()}]


@result
class _Held(Result):
    item: _Item | None
    count: int = 0


def test_a_result_is_read_back_from_its_json_object_or_from_one_with_more_keys():
    item = _Item.from_wire({"id": "a", "from": "Blue", "topic": "t", "unrelated": 1})
    assert item == _Item(id="a", sender="Blue", topic="t") and item.note is None  # renamed key, default, extra key
    assert _Item.from_wire(item, sender="Green").sender == "Green"  # given fields win over the view
    held = _Held.from_wire({"item": {"id": "b", "from": "Red"}, "count": 2})
    assert type(held.item) is _Item and held.wire() == {"item": {"id": "b", "from": "Red", "note": None}, "count": 2}
    assert _Held.from_wire({"item": None}).item is None
    with pytest.raises(KeyError, match="no 'from'"):
        _Item.from_wire({"id": "a"})
    with pytest.raises(TypeError, match="flattened field item"):
        _Flat.from_wire({"id": "a", "from": "Blue", "created": True})
    assert _Flat.from_wire({"created": True}, item=item).wire() == {**item.wire(), "created": True}


def test_a_result_is_its_json_object_and_cannot_change():
    item = _Item(id="a", sender="Blue")
    assert item["from"] == "Blue" and "topic" not in item and dict(item) == item.wire()
    assert json.dumps(item) == json.dumps(item.wire()) and pickle.loads(pickle.dumps(item)) == item
    assert item == {"id": "a", "from": "Blue", "note": None} and item == _Item(id="a", sender="Blue")
    assert item != {"id": "a"} and item != _Item(id="b", sender="Blue")
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.id = "b"  # type: ignore[misc]
    for change in (lambda: item.__setitem__("id", "b"), lambda: item.update(id="b"), lambda: item.pop("id"),
                   item.clear, lambda: item.setdefault("x", 1), lambda: item.__delitem__("id")):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert dataclasses.replace(item, id="b")["id"] == "b" and item["id"] == "a"
    with pytest.raises(TypeError):
        _Item("a", "Blue")  # type: ignore[misc]  # keyword-only: fields are named where they are filled


def test_a_field_named_as_a_dict_method_is_refused():
    with pytest.raises(TypeError, match="items"):
        @result
        class _Page(Result):
            items: list[str]


def test_a_schema_derived_from_a_result_names_the_wire_keys():
    from pydantic import TypeAdapter

    schema = TypeAdapter(_Item).json_schema(mode="serialization")
    assert list(schema["properties"]) == ["id", "from", "topic", "note"]
    assert schema["required"] == ["id", "from"]


def test_a_listed_schema_says_a_choice_of_types_as_a_list_and_lists_a_shared_part_briefly():
    from typing import Annotated

    from gitmail.server.schemas import Brief, Unschemable, output_schema

    @result
    class _Ack(Result):
        message_id: str | int
        item: _Item = field(metadata=FLATTEN)
        count: int

    assert output_schema(_Ack)["properties"]["message_id"] == {"type": ["string", "integer"]}
    brief = output_schema(Annotated[_Ack, Brief("item", "from")])
    # only the named key of the shared part, typed; the object stays open to the rest of it
    assert brief == {"type": "object", "properties": {"message_id": {"type": ["string", "integer"]},
                                                      "from": {"type": "string"}, "count": {"type": "integer"}},
                     "required": ["message_id", "from", "count"]}
    with pytest.raises(Unschemable, match="names no flattened field"):
        output_schema(Annotated[_Ack, Brief("count", "from")])


def _loose_returns(path: str) -> list[str]:
    """The functions of a module whose return annotation mentions ``dict[str, Any]``, or a module name for it."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    loose = {"dict[str, Any]"}
    for node in tree.body:  # Stored = dict[str, Any] is the same loose dictionary under another name
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if value is not None and "dict[str, Any]" in ast.unparse(value).replace("Dict[", "dict["):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[union-attr]
            loose |= {t.id for t in targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            names = {n.id for n in ast.walk(node.returns) if isinstance(n, ast.Name)}
            if "dict[str, Any]" in ast.unparse(node.returns).replace("Dict[", "dict[") or names & loose:
                found.append(f"{node.name} (line {node.lineno})")
    return found


def _domain_modules() -> list[str]:
    found = []
    for package in ("coord", "mail"):
        folder = os.path.join(ROOT, "gitmail", package)
        found += [f"gitmail/{package}/{name}" for name in sorted(os.listdir(folder)) if name.endswith(".py")]
    return found


def test_no_domain_operation_answers_a_loose_dictionary():
    loose = {module: _loose_returns(os.path.join(ROOT, module)) for module in _domain_modules()}
    assert not {module: names for module, names in loose.items() if names}


def test_the_scan_sees_a_loose_return_annotation(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from typing import Any\n\nLoose = dict[str, Any]\n\n\n"
                       "def answer(x: int) -> list[dict[str, Any]] | None:\n    return None\n\n\n"
                       "def fine() -> dict[str, int]:\n    return {}\n\n\ndef aliased() -> Loose | None:\n"
                       "    return None\n")
    assert _loose_returns(str(planted)) == ["answer (line 6)", "aliased (line 14)"]
