"""Cache-busting volatile tokens: what is found, where, and what is left alone."""

from __future__ import annotations

from bosun.core.task.volatile import find_volatile


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(v.kind, v.text) for v in find_volatile(text)]


def test_finds_each_kind_with_its_position() -> None:
    head = ("You are Claude Code.\n"
            "Today's date: Sunday, November 29, 2026. Local time 10:42 AM.\n"
            "Request ID: req_01HZX9K2M4N5P6Q7R8S9T0 trace_id=4bf92f3577b34da6a3ce929d0e0e4736\n"
            "Built at 1764410000, turn 17, message #42, nonce 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b\n")
    found = find_volatile(head)
    kinds = [v.kind for v in found]
    assert kinds == ["date", "time", "request_id", "request_id", "epoch", "counter", "counter", "hex_id"]
    date = found[0]
    assert date.line == 2 and head[date.start:date.end] == date.text == "Sunday, November 29, 2026"
    assert date.column == head.split("\n")[1].index("Sunday") + 1


def test_iso_timestamp_uuid_and_slash_dates() -> None:
    assert _kinds("at 2026-11-29T10:42:07.123+01:00 id 123e4567-e89b-12d3-a456-426614174000 on 11/29/2026") == [
        ("timestamp", "2026-11-29T10:42:07.123+01:00"), ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
        ("date", "11/29/2026")]


def test_stable_text_has_no_findings() -> None:
    stable = ("You are a careful coding agent. Use Python 3.11 and pytest. Follow PEP 8. Never edit tests/.\n"
              "Tools: bash(command), edit(path, old, new). Answer in at most 3 sentences.")
    assert find_volatile(stable) == []
