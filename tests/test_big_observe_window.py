"""A huge output measured and shaped from windows of its file (core/offload/outline_window.py): the same
answer as from the whole text, for every kind the outline knows; a JSON document, outlined from its head.

Each case runs the offload worker's ``observe_files`` twice on the same ~1.3 MB text: windowed (the
threshold lowered to 0) and whole (the threshold out of reach), and compares everything it answers.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import bosun.core.offload.outline_window as outline_window
from bosun.server.offload_worker import observe_files

SIZE = 1_300_000  # characters: well over the head and tail windows (~0.27 M characters together)
WHOLE = 1 << 40


def worker(tmp_path: Path, text: str, above: int, **request: Any) -> dict[str, Any]:
    src = tmp_path / "src.txt"
    src.write_bytes(text.encode("utf-8", "surrogatepass"))
    return observe_files({"sources": [{"path": str(src)}], "out": str(tmp_path / f"out-{above}"),
                          "window_above": above, **request})


def both(tmp_path: Path, text: str, **request: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    windowed = worker(tmp_path, text, 0, **request)
    whole = worker(tmp_path, text, WHOLE, **request)
    assert windowed["windowed"] and not whole["windowed"]
    return windowed, whole


def fill(make_line: Any, size: int = SIZE, seed: int = 5) -> str:
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < size:
        lines.append(make_line(len(lines), rng))
        total += len(lines[-1])
    return "".join(lines)


def log_with_errors() -> str:
    body = fill(lambda i, r: f"2026-12-01 10:{i % 60:02d} {r.choice(['INFO', 'DEBUG', 'WARN'])} step {i} ok é\n")
    cut = len(body) // 2
    return ("ERROR boot failed: disk not ready\nTraceback (most recent call last):\nValueError: first\n" + body[:cut]
            + "FATAL lost in the middle\n" + body[cut:] + "RuntimeError: the final one\nERROR shutting down\n")


def pytest_output() -> str:
    head = "============================= test session starts ==============================\n"
    body = fill(lambda i, r: f"tests/test_m{i % 40}.py::test_{i} {'PASSED' if r.random() < 0.97 else 'FAILED'}\n")
    return (head + body + "FAILED tests/test_x.py::test_last - AssertionError: 1 != 2\n"
            "E       AssertionError: 1 != 2\n========== 3 failed, 20000 passed in 61.2s ==========\n")


def plain_text() -> str:
    words = ["the", "agent", "reads", "a", "long", "report", "and", "keeps", "only", "what", "it", "needs", "next", "from", "each", "part"]
    return fill(lambda i, r: " ".join(r.choice(words) for _ in range(r.randint(4, 18))) + ".\n"
                + ("\n" if r.random() < 0.2 else ""))


def json_lines() -> str:
    return fill(lambda i, r: json.dumps({"id": f"R{i:06d}", "status": r.choice(["ok", "late"]), "n": i}) + "\n")


def grep_output() -> str:
    return fill(lambda i, r: f"src/mod{i % 31}/file{i % 7}.py:{i}: def handler_{i}(request):\n")


def code() -> str:
    return fill(lambda i, r: (f"def function_{i}(x):\n    return x + {i}\n\n" if i % 3 == 0 else f"# note {i}\n"))


def binary_like() -> str:
    return "\x00\x01PK\x03\x04" + fill(lambda i, r: "".join(chr(r.randint(0x20, 0x2FF)) for _ in range(60)) + "\n")


def ascii_ends_unicode_middle() -> str:
    """ASCII head and tail, one non-ASCII character in the middle: the whole text is not ASCII, so the
    error search does not fold case (``ERROR`` lines are not found by the needle ``error``)."""
    body = fill(lambda i, r: f"ERROR stage {i % 5} broke\n" if i % 40 == 0 else f"INFO step {i} done\n")
    cut = len(body) // 2
    return body[:cut] + "café\n" + body[cut:]


KINDS = {"log": log_with_errors, "test": pytest_output, "text": plain_text, "jsonl": json_lines,
         "grep": grep_output, "code": code, "binary": binary_like, "log-unicode-middle": ascii_ends_unicode_middle}
SECRETS = "password = \"hunter2hunter2\"\nAKIAIOSFODNN7EXAMPLE\n"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_windowed_answer_is_the_whole_texts(tmp_path: Path, kind: str) -> None:
    text = KINDS[kind]()
    windowed, whole = both(tmp_path, text)
    assert windowed == {**whole, "windowed": True, "peak_rss_kb": windowed["peak_rss_kb"]}
    if kind in ("log", "test", "text", "jsonl", "grep", "code", "binary"):
        assert whole["shaped"]["outline_kind"] == kind
    assert whole["shaped"]["offloaded"]


@pytest.mark.parametrize("kind", ["log", "test", "text"])
def test_a_failed_call_with_secrets_and_a_command_is_shaped_alike(tmp_path: Path, kind: str) -> None:
    text = SECRETS + KINDS[kind]() + SECRETS
    request = {"failed": True, "command": "make check", "prune": "aggressive"}
    windowed, whole = both(tmp_path, text, **request)
    assert whole["redactions"] and whole["shaped"]["error_signature"]
    for key in ("digest", "nbytes", "tokens", "lines", "redactions", "shaped"):
        assert windowed[key] == whole[key], key


def test_an_output_ending_in_blank_lines_keeps_its_error_signature(tmp_path: Path) -> None:
    text = log_with_errors() + "\n" * 200_000  # the last non-empty lines are far before the tail window
    windowed, whole = both(tmp_path, text, failed=True)
    assert windowed["shaped"] == whole["shaped"] and "final one" in whole["shaped"]["error_signature"] + \
        whole["shaped"]["error"] + json.dumps(whole["shaped"]["answer"])


def test_the_sparse_text_has_the_whole_texts_lines_and_windows(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outline_window, "READ", 4096)  # many windows and checkpoints, characters cut across
    monkeypatch.setattr(outline_window, "BLOCK", 1000)
    rng = random.Random(3)
    text = "".join(rng.choice(["a", "é", "✓", "\U0001f600", "\n", " "]) for _ in range(400_000))
    path = tmp_path / "t"
    path.write_bytes(text.encode())
    w = outline_window.window_file(path, 0)
    assert w is not None
    assert (w.chars, w.nbytes, w.text.count("\n")) == (len(text), len(text.encode()), text.count("\n"))
    assert w.text[:200_000] == text[:200_000] and w.text[-72_000:] == text[-72_000:]
    files = outline_window.FileText(path, len(text), outline_window._scan(path)[3])  # type: ignore[index]
    for _ in range(200):
        lo = rng.randrange(len(text))
        hi = lo + rng.randrange(300)
        assert files[lo:hi] == text[lo:hi]
        assert files.find("\n", lo, hi) == text.find("\n", lo, hi)
        assert files.byte_offset(lo) == len(text[:lo].encode())


def test_a_file_that_is_not_utf8_is_not_windowed(tmp_path: Path) -> None:
    path = tmp_path / "bad"
    path.write_bytes(b"ok line\n" * 100_000 + b"\xff\xfe\n" + b"ok line\n" * 100_000)
    assert outline_window.window_file(path, 0) is None


def big_json(items: int, indent: int | None) -> str:
    rows = [{"reservation_id": f"RES{i:05d}", "status": "confirmed", "seats": [f"{i % 30}A"], "price": i * 1.5}
            for i in range(items)]
    return json.dumps({"count": items, "reservations": rows}, indent=indent)


@pytest.mark.parametrize("indent", [2, None])  # pretty-printed, and one line far longer than LINE_MAX
def test_a_huge_json_document_is_outlined_from_the_values_complete_in_its_head(tmp_path: Path,
                                                                               indent: int | None) -> None:
    text = big_json(30_000, indent)
    windowed, whole = both(tmp_path, text)
    assert whole["shaped"]["outline_kind"] == windowed["shaped"]["outline_kind"] == "json"
    outline = windowed["shaped"]["answer"]["outline"]
    assert outline.startswith(f"a JSON document of {len(text)} bytes, outlined from the values complete")
    assert "RES00000" in outline and "reservations" in outline
    assert "RES29999" not in outline  # the tail's items are not in the head
    for key in ("digest", "nbytes", "tokens", "lines"):
        assert windowed[key] == whole[key], key


def test_a_document_with_a_syntax_error_in_its_head_is_not_json_either_way(tmp_path: Path) -> None:
    text = big_json(14_000, 2).replace('"status": "confirmed"', '"status" "confirmed"', 1)
    windowed, whole = both(tmp_path, text)
    assert whole["shaped"]["outline_kind"] != "json"
    assert windowed["shaped"] == whole["shaped"]


def test_intent_lines_are_looked_for_in_the_head_and_tail_windows_only(tmp_path: Path) -> None:
    """``focus`` scores the lines of a whole text: windowed, it sees the head and tail windows (documented)."""
    body = log_with_errors()
    cut = len(body) // 2
    in_middle = body[:cut] + "the flux capacitor overheated at 88 mph\n" + body[cut:]
    windowed, whole = both(tmp_path, in_middle, intent="flux capacitor")
    assert "flux capacitor" in whole["shaped"]["answer"].get("focus", "")
    assert "flux capacitor" not in windowed["shaped"]["answer"].get("focus", "")
    in_head = "the flux capacitor overheated at 88 mph\n" + body
    windowed, whole = both(tmp_path, in_head, intent="flux capacitor")
    assert "flux capacitor" in whole["shaped"]["answer"]["focus"]
    assert windowed["shaped"] == whole["shaped"]


def _tail_start_line_by_line(fh: Any, files: Any, keep_from: int) -> int:
    """The tail's start as round 10 found it, one read of up to LINE_MAX bytes per line back (the reference)."""
    def line_start(at: int) -> int | None:
        lo = max(0, at - outline_window.LINE_MAX)
        fh.seek(lo)
        nl = fh.read(at - lo).rfind(b"\n")
        return lo + nl + 1 if nl >= 0 else 0 if lo == 0 else None

    at = files.byte_offset(keep_from)
    start = line_start(at)
    if start is None:
        return at
    at = start
    fh.seek(at)
    need = outline_window.TAIL_LINES - outline_window._non_empty_lines(fh.read())
    while need > 0 and at > 0:
        start = line_start(at - 1)
        if start is None:
            return at
        fh.seek(start)
        need -= outline_window._non_empty_lines(fh.read(at - start))
        at = start
    return at


@pytest.mark.parametrize("back_read", [7, 4096])  # many refills, lines cut across them; whole runs in one buffer
def test_the_tail_start_walks_back_over_lines_as_one_read_per_line_did(tmp_path: Path, back_read: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Blank runs (skipped a buffer at a time), white space lines, \\r and non-ASCII characters, lines longer
    than LINE_MAX (the walk stops there, blank ones too) and the file's start: the block-wise walk lands where
    the line-by-line one did."""
    monkeypatch.setattr(outline_window, "LINE_MAX", 40)
    monkeypatch.setattr(outline_window, "BACK_READ", back_read)
    rng = random.Random(11)
    blank = ["\n", "\n", "\n", "  \n", "\t\n", "\r\n", " " * 39 + "\n", " " * 50 + "\n"]  # 40 bytes: LINE_MAX
    solid = ["x\n", "error here\n", "a\rb\n", "é ✓\n", "\x1c\n", "y" * 45 + "\n", "z" * 39 + "\n"]
    ends = 0
    for case in range(400):
        p_blank = rng.choice([0.3, 0.8, 0.95])
        text = "".join(rng.choice(blank if rng.random() < p_blank else solid) for _ in range(rng.randint(0, 60)))
        if rng.random() < 0.3:
            text = text.rstrip("\n")  # no newline at the end
        path = tmp_path / f"t{case}"
        path.write_bytes(text.encode())
        files = outline_window.FileText(path, len(text), outline_window._scan(path)[3])  # type: ignore[index]
        with open(path, "rb") as fh:
            for keep_from in {0, len(text), rng.randrange(len(text) + 1), max(0, len(text) - 3)}:
                want = _tail_start_line_by_line(fh, files, keep_from)
                assert outline_window._tail_start(fh, files, keep_from) == want, (text, keep_from)
                ends += want == 0
    assert 0 < ends < 1600  # both the file's start and a stop before it were reached
