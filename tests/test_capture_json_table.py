"""The JSON table view: lists of records with their keys once, and it always reads back to the same JSON value."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from bosun.core.offload.compress import compress
from bosun.core.offload.json_table import parse, table_view


def _round_trip(value: Any) -> str | None:
    text = json.dumps(value, indent=None)
    found = table_view(text)
    if found is None:
        return None
    view, count = found
    assert count >= 1
    assert parse(view) == value  # nothing dropped, nothing changed
    return view


def test_a_list_of_records_becomes_one_header_and_one_row_per_record() -> None:
    flights = [{"flight_number": "HAT080", "date": "2024-05-28", "price": 107, "origin": "DEN"},
               {"flight_number": "HAT076", "date": "2024-05-28", "price": 141, "origin": "PHL"}]
    view = _round_trip({"reservation_id": "2FBBAH", "flights": flights})
    assert view is not None
    lines = view.split("\n")
    assert "reservation_id: 2FBBAH" in lines and "flights: @T1" in lines
    assert "@T1 flight_number|date|price|origin" in lines
    assert "HAT080|2024-05-28|107|DEN" in lines and "HAT076|2024-05-28|141|PHL" in lines
    assert view.count("flight_number") == 1


def test_nested_objects_are_dotted_columns_and_a_missing_key_is_an_empty_cell() -> None:
    rows = [{"id": "a1", "seats": {"economy": 3, "business": 0}, "note": "x"},
            {"id": "b2", "seats": {"economy": 1, "business": 2}}]
    view = _round_trip(rows)
    assert view is not None and view.startswith("@T1 id|seats.economy|seats.business|note")
    assert "b2|1|2|" in view.split("\n")


def test_an_object_of_records_keeps_its_keys_in_a_key_column() -> None:
    methods = {"gift_card_1": {"source": "gift_card", "amount": 280},
               "credit_card_2": {"source": "credit_card", "brand": "visa", "last_four": "3848"}}
    view = _round_trip({"email": "a@b.c", "payment_methods": methods})
    assert view is not None and "@T1 @key|source|amount|brand|last_four" in view
    assert 'credit_card_2|credit_card||visa|"3848"' in view  # a string of digits stays a string


@pytest.mark.parametrize("value", [
    [{"a": "1"}, {"a": 1}, {"a": "true"}, {"a": True}, {"a": None}, {"a": "null"}, {"a": ""}],
    [{"a": "x|y", "b": "line\nbreak"}, {"a": " padded ", "b": "tab\there"}, {"a": "[not a list", "b": "{"}],
    [{"a": ["x|y", {"n": 1}], "b": {}}, {"a": [], "b": {"c": {}}}],
    [{"név": "Zoë ☃", "b": 1.5e-7}, {"név": "東京", "b": -0.0}],
    {"": {"k": 1}, "@x": {"k": 2}},
    {"list": [1, 2, 3], "deep": {"deeper": {"rows": [{"q": 1}, {"q": 2}]}}},
])
def test_awkward_values_read_back_exactly_or_get_no_view(value: Any) -> None:
    _round_trip(value)  # a view, when there is one, parses back to the same value


def test_no_view_for_text_plain_scalars_or_documents_without_records() -> None:
    assert table_view("FAILED tests/test_x.py::test_y") is None
    assert table_view('{"a": 1, "b": [1, 2]}') is None
    assert table_view("[1, 2, 3]") is None
    assert table_view('{"a": [{"b": 1}]') is None  # not JSON
    assert table_view('[{"a": "@T1"}, {"a": "b"}]') is None  # the marker itself is in the data


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["records", "object", "scalar", "list"] if depth < 3 else ["scalar"])
    keys = ["id", "name", "a.b", "x", "n|m", "", "@key", "price", "tags"]
    if kind == "records":
        return [{k: _random_json(rng, depth + 1) for k in rng.sample(keys, rng.randint(1, 4))}
                for _ in range(rng.randint(1, 4))]
    if kind == "object":
        return {k: _random_json(rng, depth + 1) for k in rng.sample(keys, rng.randint(1, 4))}
    if kind == "list":
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice([0, -3, 2.5, 1e21, True, False, None, "", "HAT080", "12", "a|b", "null", " x", "@T", "é\n",
                       "key: value", '"quoted"', "{", "[1]"])


def test_every_view_of_generated_documents_parses_back_to_the_same_value() -> None:
    rng = random.Random(24)
    viewed = 0
    for _ in range(3000):
        value = {"root": _random_json(rng)} if rng.random() < 0.5 else _random_json(rng)
        viewed += _round_trip(value) is not None
    assert viewed > 100  # the generator does reach the table path (174 of 3000 with this seed)


def test_compress_gives_the_table_view_with_a_note_that_names_it_and_the_way_back() -> None:
    text = json.dumps([{"flight_number": f"HAT{i:03d}", "status": "available", "price": 100 + i} for i in range(6)])
    view = compress(text)
    assert view.changed and view.text.startswith("@T1 flight_number|status|price")
    assert "JSON table view" in view.note() and "recall" in view.note()
    assert parse(view.text) == json.loads(text)
    assert not compress("plain text\nwith lines\n").changed
