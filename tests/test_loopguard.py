"""Loop guard: the five patterns, what counts as progress, bounded memory, bad input."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from bosun.core.actions import args_hash, canonical_args, error_signature
from bosun.core.errors import InvalidInput
from bosun.core.guard.loopguard import LoopGuard, LoopPolicy, fingerprint


def ok(g: LoopGuard, tool: str, args: Any, output: str, ref: str | None = None, tokens: int = 10) -> None:
    sig = hashlib.sha256(output.encode()).hexdigest()
    g.observe("tool_result", {"tool": tool, "args": args, "args_hash": args_hash(args), "result_signature": sig,
                              "sha256": sig, "ref": ref, "tokens": tokens})


def fail(g: LoopGuard, tool: str, args: Any, error: str) -> None:
    g.observe("tool_failure", {"tool": tool, "args": args, "args_hash": args_hash(args), "error": error})


def sh(cmd: str) -> dict[str, str]:
    return {"command": cmd}


def patterns(g: LoopGuard, tool: str, args: Any) -> list[tuple[str, str]]:
    return [(f.pattern, f.verdict) for f in g.check(tool, args)]


def test_canonical_args_is_order_independent_and_fingerprint_includes_result() -> None:
    assert canonical_args({"b": 1, "a": [1, 2]}) == canonical_args({"a": [1, 2], "b": 1})
    assert fingerprint("t", "{}", "r1") != fingerprint("t", "{}", "r2")


def test_exact_duplicate_suggests_the_stored_ref() -> None:
    g = LoopGuard()
    ref = "mem://sha256:" + "a" * 64
    ok(g, "get_reservation_details", {"reservation_id": "X1"}, "{...}", ref=ref, tokens=420)
    found = g.check("get_reservation_details", {"reservation_id": "X1"})
    assert [(f.pattern, f.verdict) for f in found] == [("duplicate", "suggest_alternative")]
    assert found[0].ref == ref and found[0].saved_tokens == 420
    assert g.check("get_reservation_details", {"reservation_id": "X2"}) == []


def test_rerunning_tests_after_an_edit_is_progress_not_a_duplicate() -> None:
    g = LoopGuard()
    ok(g, "bash", sh("python -m pytest tests/test_a.py"), "1 failed")
    assert patterns(g, "bash", sh("python -m pytest tests/test_a.py")) == [("duplicate", "suggest_alternative")]
    ok(g, "bash", sh("sed -i 's/a/b/' src/a.py"), "")
    assert patterns(g, "bash", sh("python -m pytest tests/test_a.py")) == []


@pytest.mark.parametrize("edit", [
    "cat <<'EOF' > src/a.py\nprint(1)\nEOF",
    "patch -p1 < fix.diff",
    "git apply fix.diff",
    "python - <<'EOF'\nopen('src/a.py', 'w').write('x')\nEOF",
    "python3 -c \"p='src/a.py'\nwith open(p, 'w') as f:\n    f.write('x')\"",
    "perl -pi -e 's/a/b/' src/a.py",
    "echo 'x = 1' >> src/a.py",
    "sed -i '32d;34d' src/a.py",
])
def test_shell_edits_are_detected(edit: str) -> None:
    g = LoopGuard()
    ok(g, "bash", sh("python reproduce.py"), "boom")
    ok(g, "bash", sh(edit), "")
    assert patterns(g, "bash", sh("python reproduce.py")) == []


def test_a_script_written_earlier_that_writes_files_counts_as_an_edit_when_run() -> None:
    g = LoopGuard()
    ok(g, "bash", sh("python reproduce.py"), "boom")
    ok(g, "bash", sh("cat <<'EOF' > fix.py\nwith open('src/a.py', 'w') as f:\n    f.write('y')\nEOF"), "")
    ok(g, "bash", sh("python reproduce.py"), "boom")
    ok(g, "bash", sh("python fix.py"), "")
    assert patterns(g, "bash", sh("python reproduce.py")) == []


def test_reads_of_unrelated_files_stay_duplicates_after_an_edit_elsewhere() -> None:
    g = LoopGuard()
    ok(g, "bash", sh("sed -n '1,20p' src/models.py"), "class A: ...")
    ok(g, "bash", sh("cat <<'EOF' > notes.txt\nhello\nEOF"), "")
    assert patterns(g, "bash", sh("sed -n '1,20p' src/models.py")) == [("duplicate", "suggest_alternative")]
    ok(g, "bash", sh("sed -i 's/A/B/' src/models.py"), "")
    assert patterns(g, "bash", sh("sed -n '1,20p' src/models.py")) == []


def test_running_a_program_invalidates_reads_of_outputs_but_not_of_sources() -> None:
    g = LoopGuard()
    ok(g, "bash", sh("cat build/out.html"), "<p>old</p>")
    ok(g, "bash", sh("cat src/app.py"), "code")
    ok(g, "bash", sh("sphinx-build -b html docs build"), "done")
    assert patterns(g, "bash", sh("cat build/out.html")) == []
    assert patterns(g, "bash", sh("cat src/app.py")) == [("duplicate", "suggest_alternative")]


def test_repeated_failure_blocks_the_same_call_after_three_identical_errors() -> None:
    g = LoopGuard()
    err = "Traceback (most recent call last):\n  File \"x.py\", line 3\nModuleNotFoundError: No module named 'foo'"
    fail(g, "bash", sh("python x.py"), err)
    assert patterns(g, "bash", sh("python x.py")) == [("duplicate", "suggest_alternative")]
    fail(g, "bash", sh("python x.py"), err.replace("line 3", "line 4"))
    fail(g, "bash", sh("python x.py"), err)
    found = g.check("bash", sh("python x.py"))
    assert found[0].pattern == "repeated_failure" and found[0].verdict == "block"
    assert found[0].required_action
    ok(g, "bash", sh("pip install foo"), "installed")  # the world changed: try again freely
    assert patterns(g, "bash", sh("python x.py")) == []


def test_transient_errors_are_never_blocked() -> None:
    g = LoopGuard()
    for _ in range(4):
        fail(g, "fetch", {"url": "https://x"}, "Error: request timed out after 30s")
    assert all(f.verdict != "block" for f in g.check("fetch", {"url": "https://x"}))


def test_loop_pattern_warns_on_same_error_across_varying_args() -> None:
    g = LoopGuard()
    for n in (305, 310, 320):
        fail(g, "book_reservation", {"amount": n}, "Error: payment amount does not add up, total price is 355")
    found = patterns(g, "book_reservation", {"amount": 330})
    assert found == [("loop_pattern", "warn")]


def test_oscillation_warns_on_abab() -> None:
    g = LoopGuard()
    a, b = {"id": "A"}, {"id": "B"}
    ok(g, "get", a, "ra")
    ok(g, "get", b, "rb")
    ok(g, "get", a, "ra")
    assert ("oscillation", "warn") in patterns(g, "get", b)


def test_runaway_warns_then_blocks_and_progress_resets_it() -> None:
    g = LoopGuard(LoopPolicy(runaway_warn=3, runaway_block=5))
    ok(g, "think", {"thought": "first"}, "")
    ok(g, "think", {"thought": "second"}, "")
    for i in range(3):  # going round in circles: each call ends as it ended before
        ok(g, "think", {"thought": ("first", "second")[i % 2]}, "")
    assert ("runaway", "warn") in patterns(g, "think", {"thought": "again"})
    for i in range(2):
        ok(g, "think", {"thought": ("first", "second")[i % 2]}, "")
    assert ("runaway", "block") in patterns(g, "think", {"thought": "again"})
    g.observe("step_completed", {"step": "analyse"})
    assert not any(p == "runaway" for p, _ in patterns(g, "think", {"thought": "again"}))


def test_new_searches_that_come_back_empty_are_exploring_not_a_runaway() -> None:
    g = LoopGuard(LoopPolicy(runaway_warn=3, runaway_block=5))
    for name in ("class Foo", "def foo", "FOO =", "foo(", "import foo", "Foo.bar"):
        ok(g, "bash", sh(f"grep -rn '{name}' src"), "")
    assert not any(p == "runaway" for p, _ in patterns(g, "bash", sh("grep -rn 'foo_bar' src")))
    for _ in range(3):  # the same empty search again and again is not
        ok(g, "bash", sh("grep -rn 'foo(' src"), "")
    assert ("runaway", "warn") in patterns(g, "bash", sh("grep -rn 'foo_bar' src"))


def test_file_read_with_a_new_hash_is_a_change() -> None:
    g = LoopGuard()
    g.observe("file_read", {"path": "src/a.py", "sha256": "1" * 64})
    ok(g, "bash", sh("cat src/a.py"), "v1")
    g.observe("file_read", {"path": "src/a.py", "sha256": "1" * 64})
    assert patterns(g, "bash", sh("cat src/a.py")) == [("duplicate", "suggest_alternative")]
    g.observe("file_read", {"path": "/repo/src/a.py", "sha256": "2" * 64})
    g.observe("file_read", {"path": "src/a.py", "sha256": "2" * 64})
    assert patterns(g, "bash", sh("cat src/a.py")) == []


def test_state_flag_change_resets_failure_counts() -> None:
    g = LoopGuard()
    g.observe("state_flag", {"name": "tests_passed", "value": False})
    for _ in range(3):
        fail(g, "bash", sh("pytest"), "AssertionError: 1 != 2")
    assert patterns(g, "bash", sh("pytest"))[0] == ("repeated_failure", "block")
    g.observe("state_flag", {"name": "tests_passed", "value": True})
    assert all(v != "block" for _, v in patterns(g, "bash", sh("pytest")))


def test_memory_is_bounded() -> None:
    policy = LoopPolicy()
    g = LoopGuard(policy)
    for i in range(5000):
        ok(g, "bash", sh(f"cat file{i}.py"), f"content {i}")
        if i % 7 == 0:
            fail(g, "bash", sh(f"python s{i}.py"), f"ValueError: bad {i}")
    assert len(g.calls) <= policy.max_keys
    assert len(g.signatures) <= policy.max_signatures
    assert len(g.failures) <= policy.max_failure_groups
    assert g.memory_bytes() < 400_000


def test_bad_args_are_refused_with_the_field_named() -> None:
    g = LoopGuard()
    with pytest.raises(InvalidInput, match="args: not JSON-serialisable"):
        g.check("bash", {"command": object()})
    with pytest.raises(InvalidInput, match="args: too large"):
        g.check("bash", {"command": "x" * 300_000})
    with pytest.raises(InvalidInput, match="args"):
        g.check("calc", {"x": float("nan")})


def test_error_signature_masks_numbers_and_keeps_names() -> None:
    a = error_signature("Traceback...\n  File 'a.py', line 10\nKeyError: 'user_17'")
    b = error_signature("Traceback...\n  File 'a.py', line 99\nKeyError: 'user_18'")
    assert a == b
    assert error_signature("ModuleNotFoundError: No module named 'foo'") != error_signature(
        "ModuleNotFoundError: No module named 'bar'")


# ---- issue 19: the same failure repeated by command family (builds and installs may write; failing
# identically is the evidence that they changed nothing)
BUILD_FAILURES = [
    ("npm run build", "npm ERR! code ELIFECYCLE\nnpm ERR! errno 2\nnpm ERR! app@1.0.0 build: `tsc -p .`\n"
                      "npm ERR! Exit status 2"),
    ("make build -j4", "ld: error: undefined symbol: frobnicate\n>>> referenced by main.o\n"
                       "make: *** [Makefile:12: build] Error 1"),
    ("cargo build", "error[E0425]: cannot find value `x` in this scope\n --> src/main.rs:2:5\n"
                    "error: could not compile `demo` due to previous error"),
    ("go build ./...", "# demo\n./main.go:5:2: undefined: frob"),
    ("./gradlew build", "* What went wrong:\nExecution failed for task ':compileJava'.\nBUILD FAILED in 3s"),
    ("pip install nosuchpkg==9", "ERROR: Could not find a version that satisfies the requirement nosuchpkg==9\n"
                                 "ERROR: No matching distribution found for nosuchpkg==9"),
    ("python -m pytest tests/test_a.py", "E   assert 1 == 2\n=========== 1 failed in 0.12s ==========="),
]


@pytest.mark.parametrize(("command", "error"), BUILD_FAILURES, ids=[c.split()[0] for c, _ in BUILD_FAILURES])
def test_the_fourth_identical_failure_of_any_family_gets_a_loop_verdict(command: str, error: str) -> None:
    g = LoopGuard()
    fail(g, "bash", sh(command), error)
    for _ in range(2):  # the 2nd and 3rd try: the earlier failure is pointed out
        assert patterns(g, "bash", sh(command)) == [("duplicate", "suggest_alternative")]
        fail(g, "bash", sh(command), error.replace("3s", "4s").replace("0.12s", "0.2s"))
    found = g.check("bash", sh(command))
    assert (found[0].pattern, found[0].verdict) == ("repeated_failure", "block")


@pytest.mark.parametrize(("command", "error"), BUILD_FAILURES, ids=[c.split()[0] for c, _ in BUILD_FAILURES])
def test_an_edit_between_identical_failures_keeps_the_next_run_unflagged(command: str, error: str) -> None:
    g = LoopGuard()
    for i in range(3):
        fail(g, "bash", sh(command), error)
        ok(g, "bash", sh(f"sed -i 's/frob{i}/frob{i + 1}/' src/main.c"), "")
    assert patterns(g, "bash", sh(command)) == []


def test_a_build_that_fails_differently_is_progress() -> None:
    g = LoopGuard()
    fail(g, "bash", sh("make build"), "main.c:3: error: expected ';'\nmake: *** [build] Error 1")
    fail(g, "bash", sh("make build"), "ld: error: undefined symbol: frob\nmake: *** [build] Error 1")
    fail(g, "bash", sh("make build"), "main.c:9: error: unknown type 'x'\nmake: *** [build] Error 1")
    assert all(v != "block" for _, v in patterns(g, "bash", sh("make build")))


def _signature_reading_every_line(text: str) -> str:
    """error_signature as round 10 computed it: every line split and stripped, the whole line masked."""
    from bosun.core.actions import _EXC_LINE, _HEX, _NUM, _SPACE

    if not text or not text.strip():
        return ""
    tail = [ln.strip() for ln in text.strip().splitlines() if ln.strip()][-3:]
    exc = [ln for ln in tail if _EXC_LINE.match(ln)]
    line = exc[-1] if exc else " | ".join(tail)
    return _SPACE.sub(" ", _NUM.sub("<n>", _HEX.sub("<hex>", line)))[:160]


def test_error_signature_reads_the_tail_and_a_long_lines_start_as_the_whole_text_gives() -> None:
    """Blank runs and every line break splitlines knows, long lines of hex, numbers, spaces and punctuation
    (cut where no mask can reach, or not at all): the same signature as splitting every line."""
    import random

    rng = random.Random(8)
    breaks = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
    words = ["KeyError: 'user_17'", "ValueError: bad 0x1F at 12.5", "deadbeefcafe0123", "  ", "\t", "\x1f", "ok",
             "3.14", "..", "-", "{", '"k":', "é", "0x", "a" * 30]
    for case in range(600):
        parts: list[str] = []
        for _ in range(rng.randint(0, 12)):
            kind = rng.random()
            if kind < 0.3:
                parts.append(rng.choice(breaks) * rng.randint(1, 3))
            elif kind < 0.4:  # a long run of one thing across the 2,048-character cut
                parts.append(rng.choice(["7", "ab", " ", "f0", "x", ",", "1.2", "0x9"]) * rng.randint(500, 3000))
            else:
                parts.append(rng.choice(words))
        text = "".join(parts)
        if case % 5 == 0:
            text += "\n" * rng.randint(0, 9000)  # blank lines past the first suffix read
        assert error_signature(text) == _signature_reading_every_line(text), repr(text[:200])
