"""A lossless table view of JSON: lists of records written with their keys once, one row per record.

API agents get small JSON answers (a reservation, a user profile, a flight search) whose keys repeat
in every record and whose quotes and separators cost tokens on every prompt that carries them. The
view keeps the document's skeleton, puts a marker string (``"@T1"``) where a list of
records (or an object whose values are all records) stood, and writes that collection below it
(a top-level object is written one ``key: value`` line per key, so the view has few quotes to
escape when it travels inside a JSON answer):

    reservation_id: 2FBBAH
    flights: @T1
    @T1 flight_number|date|price|origin|destination
    HAT080|2024-05-28|107|DEN|PHL
    HAT076|2024-05-28|141|PHL|DEN

Nested objects are flattened into dotted columns (``prices.economy``). A cell is written bare when
it is a string that cannot be read as anything else, else as JSON (``"77271"``, ``107``, ``null``,
``[...]``); an empty cell means the record has no such key; an object's keys sit in an ``@key``
column. ``parse`` reads the view back into the same JSON value (the tests check it on every view),
so nothing is dropped; a document the format cannot carry exactly gets no view (None).
"""

from __future__ import annotations

import json
from typing import Any

MARK = "@T"
KEY_COLUMN = "@key"
MIN_RECORDS = 1  # even one record: its row carries no quotes to escape inside a JSON answer
_LITERAL_START = frozenset('"[{')
_DECODER = json.JSONDecoder()


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, Any] | None:
    """``record`` with nested non-empty objects spread into dotted keys; None when a key cannot be a column."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if not key or "." in key or "|" in key or "\n" in key or key != key.strip() or key.startswith("@"):
            return None
        name = prefix + key
        if isinstance(value, dict) and value:
            inner = _flat(value, name + ".")
            if inner is None:
                return None
            out.update(inner)
        else:
            out[name] = value
    return out


def _unflat(flat: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name, value in flat.items():
        *path, last = name.split(".")
        node = record
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return record


def _bare_ok(text: str) -> bool:
    """Whether a string can be written without quotes and still read back as that same string."""
    if not text or text != text.strip() or text[0] in _LITERAL_START or any(c in text for c in "|\n\r\t\\"):
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return True
    return False  # reads as a number, true, false or null


def _cell(value: Any) -> str:
    if isinstance(value, str) and _bare_ok(value):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _read_cell(line: str, pos: int) -> tuple[Any, int]:
    """The value starting at ``pos`` and the position after it (a bare string runs to the next ``|``)."""
    if pos < len(line) and line[pos] in _LITERAL_START:
        return _DECODER.raw_decode(line, pos)
    end = line.find("|", pos)
    end = len(line) if end < 0 else end
    text = line[pos:end]
    try:
        return json.loads(text), end
    except (ValueError, RecursionError):
        return text, end


def _table(value: Any) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows for a list of records, or an object whose values are all records; None otherwise."""
    if isinstance(value, list):
        keys: list[str] | None = None
        records = value
    elif isinstance(value, dict):
        keys = list(value)
        if any(not isinstance(k, str) or not k for k in keys):
            return None
        records = list(value.values())
    else:
        return None
    if len(records) < MIN_RECORDS or not all(isinstance(r, dict) and r for r in records):
        return None
    flats = [_flat(r) for r in records]
    if any(f is None for f in flats):
        return None
    columns: dict[str, None] = {}
    for f in flats:
        columns.update(dict.fromkeys(f))  # type: ignore[arg-type]
    header = [*([KEY_COLUMN] if keys is not None else []), *columns]
    rows = []
    for i, f in enumerate(flats):
        assert f is not None
        cells = [_cell(keys[i])] if keys is not None else []
        cells += [_cell(f[c]) if c in f else "" for c in columns]
        rows.append(cells)
    return header, rows


def _key(key: str) -> str:
    """An object key as the start of a ``key: value`` line (quoted when it could be misread)."""
    return key if _bare_ok(key) and ": " not in key and not key.startswith(MARK) and not key.endswith(":") \
        else json.dumps(key, ensure_ascii=False)


def table_view(text: str) -> tuple[str, int] | None:
    """The view of a JSON document and how many tables it holds; None when it is not JSON, holds no
    table, or cannot be carried exactly.

    An object at the top is written one ``key: value`` line per key (no quotes to escape when the view
    travels inside a JSON answer); a list of records at the top is just its table; anything else keeps
    a compact JSON skeleton line."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or f'"{MARK}' in text:
        return None
    try:
        document = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    try:
        return _view_of(document)
    except RecursionError:  # nested deeper than the walk goes (a few hundred levels): no view, the text stays
        return None


def _view_of(document: Any) -> tuple[str, int] | None:
    """``table_view`` of a parsed document."""
    tables: list[str] = []

    def walk(value: Any) -> Any:
        found = _table(value)
        if found is not None:
            header, rows = found
            name = f"{MARK}{len(tables) + 1}"
            tables.append("\n".join([f"{name} {'|'.join(header)}", *("|".join(r) for r in rows)]))
            return name
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    if isinstance(document, dict) and _table(document) is None:
        skeleton = {k: walk(v) for k, v in document.items()}
        flat = _flat(skeleton) or skeleton  # nested objects as dotted keys, as in a table's columns
        head = [f"{_key(k)}: {_cell(v)}" for k, v in flat.items()]
    else:
        skeleton = walk(document)
        head = [] if skeleton == f"{MARK}1" else [json.dumps(skeleton, ensure_ascii=False, separators=(",", ":"))]
    if not tables:
        return None
    view = "\n".join([*head, *tables])
    try:
        same = parse(view) == document
    except (ValueError, KeyError, IndexError):
        same = False
    return (view, len(tables)) if same else None


def _header(line: str) -> tuple[str, list[str]] | None:
    """(table name, columns) when ``line`` starts a table."""
    head, space, cols = line.partition(" ")
    if space and head.startswith(MARK) and head[len(MARK):].isdigit():
        return head, cols.split("|")
    return None


def _object_line(line: str) -> tuple[str, Any]:
    if line.startswith('"'):
        key, pos = _DECODER.raw_decode(line, 0)
    else:
        pos = line.index(": ")
        key = line[:pos]
    if line[pos:pos + 2] != ": ":
        raise ValueError(f"not a key: value line: {line[:40]!r}")
    value, end = _read_cell(line, pos + 2)
    if end != len(line):
        raise ValueError(f"trailing text after the value: {line[:40]!r}")
    return key, value


def parse(view: str) -> Any:
    """The JSON value a table view stands for (ValueError when it is not one)."""
    lines = view.split("\n")
    first = lines[0]
    object_lines: list[str] = []
    if _header(first) is not None:
        skeleton: Any = f"{MARK}1"
    elif first[:1] in ("[", "{"):
        skeleton = json.loads(first)
        lines = lines[1:]
    else:
        while lines and _header(lines[0]) is None:
            object_lines.append(lines.pop(0))
        skeleton = _unflat(dict(_object_line(line) for line in object_lines))
    tables: dict[str, Any] = {}
    header: list[str] = []
    name = ""
    for line in lines:
        found = _header(line)
        if found is not None:
            name, header = found
            tables[name] = {} if header[0] == KEY_COLUMN else []
            continue
        if not name:
            raise ValueError("a table row before any table header")
        cells: list[Any] = []
        pos = 0
        for i in range(len(header)):
            if pos < len(line) and line[pos] != "|":
                value, pos = _read_cell(line, pos)
                cells.append(value)
            else:
                cells.append(_ABSENT)
            if i < len(header) - 1:
                if pos >= len(line) or line[pos] != "|":
                    raise ValueError(f"row {line[:40]!r} has fewer cells than its header")
                pos += 1
        if pos != len(line):
            raise ValueError(f"row {line[:40]!r} has more cells than its header")
        flat = {c: v for c, v in zip(header, cells, strict=True) if v is not _ABSENT and c != KEY_COLUMN}
        record = _unflat(flat)
        table = tables[name]
        if isinstance(table, dict):
            table[cells[0]] = record
        else:
            table.append(record)

    def fill(value: Any) -> Any:
        if isinstance(value, str) and value in tables:
            return tables[value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    return fill(skeleton)


class _Absent:
    """A cell with nothing in it: the record has no such key."""


_ABSENT = _Absent()
