"""Observe with intent (core/offload/intent.py) and the middle-size view (core/offload/compress.py)."""

from __future__ import annotations

from bosun.core.offload.compress import compress
from bosun.core.offload.intent import focus, words
from bosun.core.text import stem
from bosun.core.tokens import estimate_tokens

LOG = "\n".join(
    [f"tests/test_mod.py::test_case_{i} PASSED" for i in range(300)]
    + ["", "______ test_parse_dates ______", "    def test_parse_dates():", ">       assert parse('2024-02-30') is None",
       "E       ValueError: day is out of range for month", "", "tests/test_dates.py:41: ValueError"]
    + [f"tests/test_more.py::test_other_{i} PASSED" for i in range(300)]
)


def test_words_split_identifiers_and_drop_function_words() -> None:
    got = words("why does test_parse_dates fail in DateParser")
    assert {stem("parse"), stem("dates"), stem("parser"), stem("test_parse_dates")} <= set(got)
    assert "why" not in got and "in" not in got


def test_focus_returns_the_lines_bearing_on_the_intent_with_line_numbers() -> None:
    f = focus(LOG, "why does parse dates raise ValueError", budget=120)
    assert f is not None
    assert "E       ValueError: day is out of range for month" in f.text
    lines = LOG.split("\n")
    for first, last in f.ranges:  # the labels are real 1-based line numbers of the output
        assert f"L{first}" in f.text and lines[first - 1] in f.text and lines[last - 1] in f.text
    assert estimate_tokens(f.text) <= 160
    # lines matching only common words ("test") are not padding: at most the context line on each side
    assert f.text.count(" PASSED") <= 2


def test_focus_is_none_without_a_match_or_a_budget() -> None:
    assert focus(LOG, "kubernetes ingress certificate", budget=100) is None
    assert focus(LOG, "parse dates", budget=0) is None
    assert focus(LOG, "the of and", budget=100) is None


def test_view_strips_noise_and_marks_every_collapse() -> None:
    noisy = ("\x1b[32mok\x1b[0m\n" + "progress 10%\rprogress 55%\rprogress 100%\n" + "retrying...\n" * 6
             + "".join(f"Downloading {i}/40\n" for i in range(1, 41)) + "done\n")
    view = compress(noisy)
    assert view.changed
    assert "\x1b" not in view.text and "\r" not in view.text
    assert "progress 100%" in view.text and "progress 10%" not in view.text
    assert "[bosun: the line above repeated 5 more times]" in view.text
    assert "Downloading 1/40" in view.text and "Downloading 40/40" in view.text
    assert "[bosun: 38 similar lines (only numbers differ) omitted]" in view.text
    assert view.text.endswith("done\n")
    note = view.note()
    assert "colour codes" in note and "repeated lines" in note and "number-only" in note


def test_view_leaves_clean_text_alone() -> None:
    clean = "a\nb\nb\nc 1\nc 2\n"
    view = compress(clean)
    assert not view.changed and view.text == clean
