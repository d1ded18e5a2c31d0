"""Pure offloading logic: outlines by content, pruning modes, stubs, recall ops, compaction, ledger."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
import regex

from bosun.core.errors import InvalidInput
from bosun.core.offload.compaction import plan_compaction
from bosun.core.offload.offload import (
    MODES,
    build_stub,
    decide,
    explicit_slice,
    fast_tokens,
    get_mode,
    stub_tokens,
    worth_it,
)
from bosun.core.offload.outline import (
    OUTLINE_LITERALS,
    WINDOW_HEAD,
    WINDOW_TAIL,
    Utf8Text,
    build_outline,
    detect_kind,
    newlines,
    utf8_offset,
    utf8_tail_bytes,
)
from bosun.core.offload.query import (
    branch_literals,
    bytes_pattern,
    compile_pattern,
    error_signature,
    run_query,
)
from bosun.core.redact import Redactor
from bosun.core.task.ledger import ledger_of, parse_prices
from bosun.core.tokens import estimate_tokens

PYTEST_OUT = (
    "============================= test session starts ==============================\n"
    + "".join(f"tests/test_mod.py::test_case_{i} PASSED\n" for i in range(300))
    + "=================================== FAILURES ===================================\n"
    "____________________________ test_parse_dates ____________________________\n"
    "    def test_parse_dates():\n>       assert parse('2020') == 3\nE       AssertionError: assert 2 == 3\n"
    "tests/test_mod.py:42: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_mod.py::test_parse_dates - AssertionError: assert 2 == 3\n"
    "FAILED tests/test_mod.py::test_other - KeyError: 'x'\n"
    "======================== 2 failed, 300 passed in 4.12s =========================\n"
)

PY_SOURCE = "import os\n\n\nclass Parser:\n    def parse(self, s):\n        return s\n\n    def reset(self):\n        pass\n\n\ndef main():\n    Parser().parse('x')\n" * 3

LOG = "".join(
    f"2024-01-01 10:00:{i % 60:02d} INFO worker started job {i}\n" for i in range(200)
) + "2024-01-01 10:01:00 ERROR db connection refused on port 5432\nTraceback (most recent call last):\n  File \"w.py\", line 3, in run\nConnectionError: refused\n"


def test_outline_of_test_output_keeps_failures_and_summary() -> None:
    assert detect_kind(PYTEST_OUT) == "test"
    ol = build_outline(PYTEST_OUT, 200)
    assert "2 failed, 300 passed in 4.12s" in ol.text
    assert "FAILED tests/test_mod.py::test_parse_dates - AssertionError: assert 2 == 3" in ol.text
    assert "FAILED tests/test_mod.py::test_other" in ol.text
    assert ol.facts["failures"] == 2
    assert estimate_tokens(ol.text) < estimate_tokens(PYTEST_OUT) // 10


def test_outline_of_code_lists_symbols_with_lines() -> None:
    ol = build_outline(PY_SOURCE, 200)
    assert ol.kind == "code"
    assert "4: class Parser" in ol.text and "5:   def parse" in ol.text and "12: def main" in ol.text


def test_outline_of_log_json_jsonl_table_diff_text() -> None:
    log = build_outline(LOG, 200)
    assert log.kind == "log" and "ConnectionError: refused" in log.text and "ERROR=1" in log.text
    doc = json.dumps({"items": [{"id": i, "name": f"n{i}"} for i in range(50)], "total": 50})
    js = build_outline(doc, 100)
    # identifiers first; under a tight budget the key names stay, without their types
    assert js.kind == "json" and js.lines[0].startswith("id: 0, 1, 2") and "{items: [50 × {id, name}], total}" in js.text
    assert "items: [50 × {id: int, name: str}]" in build_outline(doc, 400).text  # with room: the types too
    jl = "\n".join(json.dumps({"id": i, "user": {"n": i}}) for i in range(30))
    jo = build_outline(jl, 100)
    assert jo.kind == "jsonl" and "30 records" in jo.text and "id(30)" in jo.text
    table = "name,age,city\n" + "".join(f"p{i},{i},c{i}\n" for i in range(40))
    tb = build_outline(table, 100)
    assert tb.kind == "table" and "40 rows × 3 columns" in tb.text and "name, age, city" in tb.text
    diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n+c\n"
    df = build_outline(diff, 100)
    assert df.kind == "diff" and "x.py: +2 -1 in 1 hunks" in df.text
    prose = "\n".join(f"line number {i} of some prose" for i in range(100))
    tx = build_outline(prose, 100)
    assert tx.kind == "text" and "1: line number 0" in tx.text and "100: line number 99" in tx.text


def test_outline_respects_budget() -> None:
    many = "\n".join(f"FAILED tests/t.py::test_{i} - AssertionError: value {i} differs" for i in range(400))
    ol = build_outline(many + "\n=== 400 failed in 1.0s ===\n", 60)
    assert estimate_tokens(ol.text) <= 80
    assert "more outline lines" in ol.text


def test_modes_and_decisions() -> None:
    assert set(MODES) == {"cache_ttl", "conservative", "balanced", "aggressive"}
    assert get_mode(None).name == "cache_ttl"
    with pytest.raises(InvalidInput, match="mode"):
        get_mode("turbo")
    ttl = get_mode("cache_ttl")
    # cache_ttl: no floor of its own; an output a minimal stub cannot halve stays, anything larger may leave
    assert not decide(90, ttl).offload and decide(120, ttl).offload
    assert decide(5000, ttl).offload
    assert not decide(1500, get_mode("conservative")).offload and decide(1500, get_mode("balanced")).offload
    assert decide(300, get_mode("aggressive")).offload and not decide(300, get_mode("balanced")).offload
    assert not decide(1500, get_mode("conservative"), "sed -n '1,200p' a.py").offload
    # an explicit slice the agent asked for passes through up to slice_factor x threshold
    assert explicit_slice("sed -n '100,180p' a.py") and explicit_slice("nl -ba x.py | sed -n '1,50p'")
    assert not explicit_slice("cat a.py")
    assert not decide(450, ttl, "sed -n '1,200p' a.py").offload  # a slice of up to 500 tokens stays whole
    assert decide(1200, ttl, "sed -n '1,200p' a.py").offload and decide(450, ttl, "cat a.py").offload
    assert decide(10, ttl, force=True).offload and not decide(10**6, ttl, force=False).offload


def test_stub_is_small_and_worth_it() -> None:
    tokens = estimate_tokens(PYTEST_OUT)
    stub = build_stub("mem://sha256:0123456789abcdef", len(PYTEST_OUT), tokens, 320, build_outline(PYTEST_OUT, 120))
    cost = stub_tokens(stub)
    assert worth_it(tokens, cost) and cost < tokens / 5
    assert not worth_it(100, 60)


def test_fast_tokens_close_to_exact_on_large_payloads() -> None:
    big = PYTEST_OUT * 40
    exact = estimate_tokens(big)
    assert abs(fast_tokens(big) - exact) / exact < 0.1
    assert fast_tokens("small text") == estimate_tokens("small text")
    one_line = "x=1;" * 40_000  # no line to align the slices on
    assert abs(fast_tokens(one_line) - estimate_tokens(one_line)) / estimate_tokens(one_line) < 0.1


def test_byte_offsets_of_characters_match_encoding() -> None:
    """The numpy counts behind the outline windows equal what encoding the text would give."""
    texts = ["plain ascii\n" * 50, "é" * 30 + "a" * 7 + "😀" * 5 + "日本語\n" * 9, "😀", "", "a😀b" * 100]
    for text in texts:
        data = text.encode()
        for chars in range(0, len(text) + 3):
            assert utf8_offset(data, chars) == len(text[:chars].encode()), (text[:20], chars)
            assert utf8_tail_bytes(data, chars) == len(text[len(text) - min(chars, len(text)):].encode())
    data = ("line\n" + "x" * 70_000 + "\n") .encode() * 3
    for lo, hi in ((0, len(data)), (3, 70_010), (100, 150), (len(data) - 1, len(data))):
        assert newlines(data, lo, hi) == data.count(b"\n", lo, hi)


def test_recall_ops_outline_aggregate_jsonl() -> None:
    data = PYTEST_OUT.encode()
    ol = run_query(data, "outline")
    assert ol.extra["kind"] == "test" and "2 failed" in ol.text
    agg = run_query(LOG.encode() * 3, "aggregate")
    assert "ConnectionError: refused" in agg.text and agg.extra["distinct"] >= 2
    by = run_query(data, "aggregate", pattern=r"(\w+Error)")
    assert "AssertionError" in by.text and "KeyError" in by.text
    jl = "\n".join(json.dumps({"id": i, "user": {"name": f"u{i % 3}"}, "ok": i % 2 == 0}) for i in range(20)).encode()
    res = run_query(jl, "jsonl", where={"user.name": "u1"}, fields=["id"], max_matches=3)
    assert res.text.splitlines() == ['{"id":1}', '{"id":4}', '{"id":7}'] and res.extra["matches"] == 7
    doc = json.dumps({"a": {"rows": [{"k": 1}, {"k": 2}]}}).encode()
    assert run_query(doc, "jsonl", path="a.rows", where={"k": "2"}).text.strip() == '{"k":2}'
    with pytest.raises(InvalidInput, match="path"):
        run_query(doc, "jsonl", path="a.nope")
    with pytest.raises(InvalidInput, match="where"):
        run_query(jl, "jsonl", where=["x"])  # type: ignore[arg-type]


def test_jsonl_records_and_bad_lines_are_json_loads_line_by_line() -> None:
    """Lines that cannot start a JSON text are counted bad without a parse; the records and the count are
    what ``json.loads`` of every line gives (NaN, Infinity, white space before, U+000B, non-ASCII)."""
    import random

    from bosun.core.offload.query import _records

    rng = random.Random(4)
    kinds = ['{"a": 1}', "[1, 2]", '"text"', "12", "-3.5", "true", "false", "null", "NaN", "Infinity", "-Infinity",
             "  {\"b\": 2}", "\t[3]", "\x0b{}", "nope", "tru", "{broken", "a", "é", "# comment", "Nan", "Inf", "]",
             "\u00a0{}", "{} trailing", "1 2"]
    for _ in range(200):
        # (a bad first line: a text that starts with [ is read as one JSON document first)
        text = "\n".join(["x"] + [rng.choice(kinds) for _ in range(rng.randint(0, 30))])
        want: list[Any] = []
        bad = 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                want.append(json.loads(line))
            except ValueError:
                bad += 1
        got, got_bad = _records(text, None)
        assert json.dumps(got) == json.dumps(want) and got_bad == bad, text


def test_grep_bounded_against_catastrophic_backtracking() -> None:
    data = ("a" * 30_000 + "!\n").encode()
    res = run_query(data, "grep", pattern=r"(a|aa)+$")
    assert res.extra["complete"] is False and "stopped" in (res.note or "")


def test_grep_context_and_limits() -> None:
    data = "".join(f"row {i}\n" for i in range(1, 101)).encode()
    res = run_query(data, "grep", pattern=r"row (5|50)$", context=1)
    assert res.text.splitlines() == ["4-row 4", "5:row 5", "6-row 6", "--", "49-row 49", "50:row 50", "51-row 51"]
    many = run_query(data, "grep", pattern="row", max_matches=5)
    assert many.extra["matches"] == 100 and many.extra["shown"] == 5 and many.truncated


def test_error_signature_masks_volatile_parts() -> None:
    a = error_signature("ValueError: bad value 42 at 0x7ffde1 in 'foo'")
    b = error_signature("ValueError: bad value 97 at 0x1234ab in 'bar'")
    assert a == b


@dataclass
class Ev:
    seq: int
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: float = 1000.0


def _result(seq: int, tokens: int, offloaded: bool = False, t: float = 1000.0) -> Ev:
    ref = f"mem://sha256:{seq:064x}"
    return Ev(seq, "tool_result", {"tool": "bash", "args": {"command": f"c{seq}"}, "tokens": tokens,
                                   "ref": ref if offloaded else None, "stored_ref": ref, "offloaded": offloaded,
                                   "stub_tokens": 80 if offloaded else 0, "response_tokens": 90 if offloaded else 9}, t)


def test_ledger_credits_only_drop_receipts() -> None:
    events = [_result(1, 5000, True), _result(2, 100), Ev(3, "recalled", {"tokens": 40})]
    led = ledger_of(events)
    assert led.credited_tokens == 0 and led.pending_drop_tokens == 5000 and led.offloaded_tokens == 5000
    events.append(Ev(4, "dropped", {"ref": events[0].payload["ref"], "tokens": 5000, "response_tokens": 8}))
    led = ledger_of(events)
    assert led.credited_tokens == 5000 and led.pending_drop_tokens == 0
    assert led.overhead_tokens == 90 + 9 + 8 and led.recalled_tokens == 40
    assert led.net_tokens == 5000 - 107 - 40
    d = led.to_dict(parse_prices("default=2.0,big=10"), "big")
    assert d["cost_usd"]["usd_per_mtok"] == 10.0 and d["cost_usd"]["credited_savings"] == pytest.approx(0.05)
    with pytest.raises(InvalidInput, match="prices"):
        parse_prices("model-without-price")


def test_compaction_plans_are_reversible_and_scoped() -> None:
    events: list[Any] = [_result(i, 400 + i) for i in range(1, 6)]
    events.append(Ev(6, "checkpoint_saved", {"ref": "mem://sha256:" + "f" * 64}))
    events += [_result(i, 1000) for i in range(7, 14)]
    ttl = get_mode("cache_ttl")
    alive = plan_compaction(events, ttl, "compact", now=1010.0)
    assert [i.seq for i in alive.items] == [7, 8, 9]  # working zone only while the cache lives; newest 4 kept
    dead = plan_compaction(events, ttl, "compact", now=1000.0 + ttl.ttl_s + 1)
    assert len(dead.items) == 8 and not dead.cache_alive and dead.kept == 4
    clear = plan_compaction(events, get_mode("conservative"), "clear", now=1010.0)
    assert len(clear.items) == 12 and clear.kept == 0
    # evicting one cached item while the cache lives costs a re-fill of what follows it
    cached = [_result(i, 2000) for i in range(1, 4)] + [Ev(4, "checkpoint_saved", {})] + [_result(5, 100)]
    one = plan_compaction(cached, get_mode("aggressive"), "trim", now=1010.0, target_tokens=1500)
    assert [i.seq for i in one.items] == [1] and one.refill_tokens == 2000 + 2000 + 100
    trim = plan_compaction(events, ttl, "trim", now=1010.0, target_tokens=1500)  # from the 3 eligible
    assert len(trim.items) == 2 and trim.freed_tokens == 2000
    d = clear.to_dict()
    assert d["net_tokens"] == d["freed_tokens"] - d["digest_tokens"] - d["refill_tokens"]
    assert all(r.startswith("mem://sha256:") for r in d["drop"]) and "nothing was deleted" in d["restore"]
    with pytest.raises(InvalidInput, match="mode"):
        plan_compaction(events, ttl, "delete", now=0.0)


def test_json_outline_carries_identifiers_and_grep_windows_long_lines() -> None:
    doc = json.dumps([{"flight_number": f"HAT{i:03d}", "origin": "ATL", "prices": {"economy": 100 + i}}
                      for i in range(100)])
    ol = build_outline(doc, 200)
    assert ol.kind == "json" and "flight_number: HAT000, HAT001" in ol.text
    res = run_query(doc.encode(), "grep", pattern="HAT042|HAT090")
    assert '"HAT042"' in res.text and '"HAT090"' in res.text and "of 7400]" in res.text
    assert estimate_tokens(res.text) < estimate_tokens(doc) / 3


@pytest.mark.parametrize("extra", ["", "é", "😀"])  # 1-, 2- and 4-byte-per-character strings
def test_outline_on_utf8_bytes_matches_the_str_outline(extra: str) -> None:
    """The byte-level searches of a large payload give the same kind and outline as the str ones,
    also for lines cut by the head/tail window edges and hits just before the tail window."""
    block = "".join(
        f"collected item {i}{extra}\nerror while loading fixture {i}\nFAILED tests/test_m.py::test_{i} - ValueError: bad {i}\n"
        if i % 7 == 0 else f"tests/test_m.py::test_{i} PASSED{extra}\n" for i in range(12_000)
    )
    edge = "\nERROR: tests/test_edge.py::test_cut - panic: Fatal Exception\nTraceback (most recent call last):\n"
    for pos in (WINDOW_HEAD - 20, len(block) - WINDOW_TAIL - 3, len(block) - WINDOW_TAIL + 1):
        block = block[:pos] + edge + block[pos:]
    text = "FAILED first line\n" + block + "=== 12 failed, 400 passed in 3.21s ===\n"
    for variant in (text, text.replace("FAILED", "PASSED"), text[: WINDOW_HEAD + 1000]):
        utf8 = Utf8Text.of(variant, variant.encode())
        assert utf8 is not None
        kind = detect_kind(variant)
        assert detect_kind(variant, None, utf8) == kind
        want, got = build_outline(variant, 200), build_outline(variant, 200, utf8=utf8)
        assert (got.kind, got.lines, got.hints, got.facts) == (want.kind, want.lines, want.hints, want.facts)
        assert want.kind == "test" or variant is not text
        # observe's way: the needles found by redaction's scan of the whole payload, cut to the windows
        data, counts, found = Redactor().redact_bytes_finding(variant.encode(), OUTLINE_LITERALS)
        assert not counts and found is not None and found.get(b"error")
        seeded = Utf8Text.of(variant, data, found)
        assert seeded is not None and detect_kind(variant, None, seeded) == kind
        got = build_outline(variant, 200, utf8=seeded)
        assert (got.kind, got.lines, got.hints, got.facts) == (want.kind, want.lines, want.hints, want.facts)


def test_redaction_finds_other_literals_only_in_bytes_it_left_alone() -> None:
    """``redact_bytes_finding`` scrubs exactly as ``redact_bytes`` does; the literals' positions come
    back only when nothing was redacted (after a redaction they would point into other bytes)."""
    r = Redactor()
    clean = ("error: disk full\nFAILED test_x\n" * 400).encode()
    dirty = clean + b"token = 'ghp_" + b"a1B2" * 10 + b"'\n"
    for data in (clean, dirty, clean[:100]):
        scrubbed, counts, found = r.redact_bytes_finding(data, (b"error", b"\nfailed "))
        assert (scrubbed, counts) == r.redact_bytes(data)
        if counts:
            assert found is None
        else:
            low = data.lower()
            assert found == {b"error": [i for i in range(len(low)) if low.startswith(b"error", i)],
                             b"\nfailed ": [i for i in range(len(low)) if low.startswith(b"\nfailed ", i)]}
    assert r.redact_bytes_finding(dirty, (b"error",))[1]


def test_json_outline_puts_codes_first_and_keeps_key_names() -> None:
    """An API result's stub carries what the agent acts on next: lists of codes, ids before names,
    and the key names of small nested objects (the next call's arguments use them)."""
    user = {"name": {"first_name": "Amelia", "last_name": "Sanchez"}, "membership": "gold",
            "payment_methods": {"credit_card_4065275": {"source": "credit_card", "id": "credit_card_4065275"}},
            "reservations": ["3FRNFB", "Q4L9HS"]}
    ol = build_outline(json.dumps(user), 200)
    assert "reservations: 3FRNFB, Q4L9HS" in ol.text and "id: credit_card_4065275" in ol.text
    assert ol.text.index("reservations:") < ol.text.index("first_name:")  # codes before names
    flights = [[{"flight_number": f"HAT{i}{j}", "seats": {"economy": 3, "business": 1}} for j in range(2)]
               for i in range(3)]
    assert "seats: {economy, business}" in build_outline(json.dumps(flights), 200).text


def test_grep_on_ascii_bytes_finds_what_the_text_scan_finds() -> None:
    """The bytes scan (ASCII payloads) keeps str semantics (case-folded properties, the ASCII
    separators, line numbers); non-ASCII payloads take the str scan."""
    lines = [f"line {i} {'Error' if i % 50 == 0 else 'ok'}" for i in range(5000)]
    data = ("\n".join(lines) + "\n").encode()
    res = run_query(data, "grep", pattern=r"Error$", max_matches=3)
    assert res.extra["matches"] == 100 and res.text.startswith("1:line 0 Error\n51:line 50 Error\n")
    assert run_query(data, "grep", pattern=r"(?i)\p{Lu}rror", max_matches=1).extra["matches"] == 100
    assert run_query(data, "grep", pattern=r"(?i)[[:upper:]]rror", max_matches=1).extra["matches"] == 100
    sep = b"a\x1cb\na b\n" * 10
    assert run_query(sep, "grep", pattern=r"a\sb").extra["matches"] == len(regex.findall(r"a\sb", sep.decode()))
    uni = "é\nfoo\nxé\n".encode()
    assert run_query(uni, "grep", pattern=r"\w\b").text == "1:é\n2:foo\n3:xé\n"
    assert run_query(data, "grep", pattern="line 4999", ignore_case=True).text == "5000:line 4999 ok\n"


def test_grep_seeded_at_branch_literals_matches_a_full_scan() -> None:
    """A pattern whose branches all start with a literal is tried only where a literal occurs; the
    lines, matches and counts are those of a full finditer scan (multi-line matches included)."""
    assert branch_literals(r"^FAILED|Traceback") == ["FAILED", "Traceback"]
    assert branch_literals(r"\bdef\b|foo\.bar") == ["def", "foo.bar"]
    for pattern in (r"(?i)error", r"[ab]c|d", r"a?b|c", r"x|(y)", r"Trace(?i)back", r"^$"):
        assert branch_literals(pattern) is None, pattern
    text = "".join(f"l{i} ok\n" if i % 7 else f"FAILED t{i}\nTraceback x\n" for i in range(2000)) + "ünï\n"
    data = text.encode()
    for pattern, ignore_case in ((r"^FAILED|Traceback", False), (r"failed|TRACEBACK", True),
                                 (r"FAILED t\d+\nTrace|back", False), (r"ok|l1", False)):
        rx = compile_pattern(pattern, ignore_case)
        expected = [(m.start(), m.group()) for m in rx.finditer(text)]
        got = run_query(data, "grep", pattern=pattern, ignore_case=ignore_case, max_matches=10_000)
        lines = {text.count("\n", 0, s) + 1 for s, _ in expected}
        assert got.extra["matches"] == len(lines), pattern
        shown = [int(ln.split(":", 1)[0]) for ln in got.text.splitlines()]  # cut to max_tokens
        assert shown and shown == sorted(lines)[: len(shown)], pattern


def _grep_by_text(text: str, pattern: str, ignore_case: bool) -> list[int]:
    """Line numbers a full scan of the decoded text finds (the reference for the bytes scan)."""
    rx = compile_pattern(pattern, ignore_case)
    return sorted({text.count("\n", 0, m.start()) + 1 for m in rx.finditer(text)})


def test_grep_on_utf8_bytes_when_the_pattern_matches_ascii_only() -> None:
    """A non-ASCII payload is scanned as bytes when every piece of the pattern matches ASCII
    characters only (one byte each); ``.`` outside a greedy run, ``\\w``/``\\b`` and negated classes
    keep the str scan, and so does case folding when the text holds a character an ASCII letter
    folds to (the Kelvin sign for k)."""
    text = "".join(f"ligne {i} é: {'Error: ünïcode' if i % 9 == 0 else 'ok'} aéb\n" for i in range(3000))
    text += "x" * 500 + "é" * 300 + " Error: deep in a long line " + "ü" * 200 + "\n"
    data = text.encode()
    for pattern, ignore_case in ((r"^ligne 9 |Error", False), (r"error: .+code", True), (r"é: Error", False),
                                 (r"Error: .*$", False), (r"(?=E)Err", False), (r"ok a", False)):
        if pattern.isascii():
            assert bytes_pattern(pattern, ignore_case, data) is not None, pattern
        got = run_query(data, "grep", pattern=pattern, ignore_case=ignore_case, max_matches=100_000,
                        max_tokens=10**6, max_bytes=10**6)
        lines = _grep_by_text(text, pattern, ignore_case)
        assert got.extra["matches"] == len(lines), pattern
        assert [int(ln.split(":", 1)[0]) for ln in got.text.splitlines()] == lines, pattern
    long_line = run_query(data, "grep", pattern="deep in", max_matches=1).text
    assert long_line.endswith("[chars 648-975 of 1028]\n")  # character offsets, as the str scan counts them
    for pattern, ignore_case in ((r"a.b", False), (r"\bok\b", False), (r"[^x]ok", False), (r"é\w", False)):
        assert bytes_pattern(pattern, ignore_case, data) is None, pattern
        got = run_query(data, "grep", pattern=pattern, ignore_case=ignore_case, max_matches=1)
        assert got.extra["matches"] == len(_grep_by_text(text, pattern, ignore_case)) > 0, pattern
    kelvin = ("line \u212a ok\nline k ok\n" * 5000).encode()
    assert bytes_pattern("k", True, kelvin) is None and bytes_pattern("k", False, kelvin) is not None
    assert run_query(kelvin, "grep", pattern="K", ignore_case=True).extra["matches"] == 10_000
    assert bytes_pattern("ok", False, "é ok\n".encode()) is None  # small: decoding costs less than parsing


def test_byte_seeds_equal_a_find_loop_and_repeat_free_patterns() -> None:
    """The numpy seed search gives the offsets of a ``find`` loop (overlaps, case folding of ASCII
    letters only, the MAX_SEEDS cut); only patterns without repeats skip the engine timeout."""
    from bosun.core.offload.query import MAX_SEEDS, _byte_seeds, repeat_free

    data = "aaa FAILED\nTraceback Traceback failed FAIled ﬁ é\nAAAA".encode()

    def by_find(hay: bytes, needle: bytes) -> list[int]:
        out, i = [], hay.find(needle)
        while i >= 0:
            out.append(i)
            i = hay.find(needle, i + 1)
        return out

    assert _byte_seeds(data, [b"aa"], False) == by_find(data, b"aa")  # overlapping
    assert _byte_seeds(data, [b"FAILED", b"Traceback"], False) == sorted(by_find(data, b"FAILED")
                                                                         + by_find(data, b"Traceback"))
    assert _byte_seeds(data, [b"Failed"], True) == by_find(data.lower(), b"failed")
    assert _byte_seeds(data, [b"zz"], False) == []
    assert _byte_seeds(b"x" * (MAX_SEEDS + 2), [b"x"], False) is None
    assert repeat_free(r"^FAILED|Traceback") and repeat_free(r"(?:def|class) \w")
    for pattern in (r"a+", r"(a|aa)*$", r"x{2}", r"(a)\1", r"foo{e<=1}", r"\p{L}"):
        assert not repeat_free(pattern), pattern


def test_a_text_of_at_most_max_tokens_bytes_fits_without_counting() -> None:
    """``bound`` skips the token count when the answer's UTF-8 bytes are within ``max_tokens``: sound only
    while no piece is estimated above one token per byte (every small recall relies on it)."""
    import random

    from bosun.core import tokens
    from bosun.core.offload.query import bound

    for cls, costs in tokens.COSTS.items():
        assert all(cost <= n for n, cost in enumerate(costs, start=1)), cls
        assert tokens.RATE[cls] <= 1.0, cls
    rng = random.Random(7)
    alphabet = "ab Zé中 \n\t1_.-(){}\u2028😀" + "xyz" * 5
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
        assert tokens.estimate_tokens(text) <= len(text.encode("utf-8"))
        size = len(text.encode("utf-8"))
        # same answer as counting: at the byte size itself and one token either side of the estimate
        for max_tokens in (size, tokens.estimate_tokens(text), max(1, tokens.estimate_tokens(text) - 1)):
            counted = (text, False) if tokens.estimate_tokens(text) <= max_tokens else None
            got = bound(text, 64_000, max_tokens)
            if counted is not None:
                assert got == counted
            else:
                assert got[1] is True


def test_head_and_tail_cut_from_the_bytes_equal_the_split_text() -> None:
    """head/tail on the bytes (``newline_only`` data) answer exactly as splitting the decoded text does:
    fuzzed over invalid UTF-8, the other line breaks str.splitlines knows, and empty and unterminated data."""
    import random

    from bosun.core.offload.query import bound, decode, edge_lines, newline_only

    rng = random.Random(11)
    pieces = [b"a", b"bc ", b"\n", b"\n", b"\n\n", b"\xc3\xa9", b"\xe4\xb8\xad", b"\xff", b"\xe2\x80", b"\xf0\x9f",
              b"\r", b"\r\n", b"\x0b", b"\x0c", b"\x1c", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9", b"\xc2"]
    checked = fast = 0
    for i in range(4000):
        data = b"".join(rng.choice(pieces[: 10 if i % 2 else len(pieces)]) for _ in range(rng.randint(0, 30)))
        all_lines = decode(data).splitlines(keepends=True)
        if newline_only(data):  # then the text's lines are its pieces between newlines, nothing else
            assert all_lines == [line for line in decode(data).replace("\n", "\n\0").split("\0") if line]
        for op in ("head", "tail"):
            for lines in (1, 2, 3, 7, 40):
                chosen = all_lines[:lines] if op == "head" else all_lines[-lines:]
                want = run_query(data, op, lines=lines)
                assert (want.text, want.total_lines) == (bound("".join(chosen), 64_000, 2000)[0], len(all_lines))
                if newline_only(data):
                    fast += 1
                    assert edge_lines(data, op, lines) == ("".join(chosen), len(all_lines))
                checked += 1
    assert fast > checked // 3
