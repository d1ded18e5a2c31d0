"""What a test run says about itself: pass or fail, the counts, the failing tests and their first error lines.

Each runner ends with its own summary line (pytest ``4 failed, 3 passed in 1.40s`` with or without
its ``===`` rule, unittest ``Ran N tests`` + ``OK``/``FAILED (...)``, sympy's ``tests finished: 5 passed, 1 failed``, node's test runner ``ℹ pass 2``
or TAP ``# pass 2``, jest ``Tests: 1 failed, 4 passed, 5 total``, vitest ``Tests  1 failed | 4 passed
(5)``, go test ``ok``/``FAIL`` package lines, cargo ``test result: FAILED. 1 passed; 2 failed``, mocha
``N passing``/``N failing``, rspec ``N examples, M failures``). The counts are read from that line,
never guessed from words elsewhere in the log; when one output holds several runs, the last summary
decides (cargo prints one result line per test binary: those are summed). ``pytest -qq`` prints no
summary: its progress line and ``FAILED`` lines say it.

The stub of a test run and ``tests_passed`` are both built from this one reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_FAILURES = 50
_LINE = 200  # characters kept of a failing test's name or error line


@dataclass
class TestRun:
    """One test run's outcome as its runner reported it (``passed``: None when the runner gave no count)."""

    runner: str
    summary: str
    failed: int = 0
    passed: int | None = None
    skipped: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (test name, its first error line)
    end: int = 0  # where the deciding summary ends in the text

    @property
    def ok(self) -> bool:
        """Whether the run passed: nothing failed, and something ran."""
        return self.failed == 0 and not self.failures and bool(self.passed)

    def facts(self) -> dict[str, object]:
        return {"runner": self.runner, "summary": self.summary, "failed": self.failed, "passed": self.passed,
                "skipped": self.skipped, "failures": len(self.failures), "tests_passed": self.ok}


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _LINE else text[: _LINE - 1] + "…"


def _counts(text: str) -> dict[str, int]:
    """``4 failed, 3 passed`` / ``failures=1, errors=2`` -> {"failed": 4, "passed": 3} (plural words folded)."""
    out: dict[str, int] = {}
    for num, word in re.findall(r"(\d+) (\w+)", text) + [(n, w) for w, n in re.findall(r"(\w+)=(\d+)", text)]:
        word = {"failures": "failed", "failure": "failed", "failing": "failed", "errors": "error",
                "passing": "passed", "pass": "passed", "fail": "failed", "examples": "total", "example": "total",
                "pending": "skipped", "ignored": "skipped", "skip": "skipped", "todo": "skipped"}.get(word, word)
        out[word] = out.get(word, 0) + int(num)
    return out


def _next_line(text: str, pos: int, skip: str = "") -> str:
    """The first non-empty line after ``pos`` that does not start with one of ``skip``'s characters."""
    for line in text[pos:].splitlines()[1:40]:
        s = line.strip()
        if s and not (skip and s[0] in skip):
            return s
    return ""



def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of a runner's summary line: the last run decides."""
    matches = list(pattern.finditer(text))
    return matches[-1] if matches else None

# -- pytest ----------------------------------------------------------------------------------------
_PYTEST = re.compile(r"^=*[ \t]*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)"
                     r"(?:, )?)+|no tests ran) in [\d.]+s(?: \([\d:]+\))?[ \t]*=*$", re.M)
_PYTEST_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$", re.M)
_PYTEST_PROGRESS = re.compile(r"^(?:\S+\.py )?([.FEsxX]+)\s*\[\s*\d+%\]$", re.M)


def _pytest(text: str) -> TestRun | None:
    matches = list(_PYTEST.finditer(text))
    start = matches[-2].end() if len(matches) > 1 else 0  # an earlier run's failures are not this run's
    fails = [(m.group(2), m.group(3) or _pytest_error(text, m.group(2)))
             for m in _PYTEST_FAILED.finditer(text, start)]
    if matches and not fails:  # no short summary (-rN, old pytest): the FAILURES section's headers
        fails = _pytest_sections(text, start, matches[-1].start())
    if matches:
        m = matches[-1]
        c = _counts(m.group(1))
        return TestRun("pytest", m.group(0).strip("= "), c.get("failed", 0) + c.get("error", 0), c.get("passed", 0),
                       c.get("skipped", 0), fails, m.end())
    progress = list(_PYTEST_PROGRESS.finditer(text))  # -qq: no summary line
    if not progress:
        return None
    marks = "".join(p.group(1) for p in progress)
    failed = marks.count("F") + marks.count("E")
    end = max(progress[-1].end(), max((m.end() for m in _PYTEST_FAILED.finditer(text)), default=0))
    summary = f"{failed} failed, {marks.count('.')} passed (from the progress line)" if failed else \
        f"{marks.count('.')} passed (from the progress line)"
    return TestRun("pytest", summary, max(failed, len(fails)), marks.count("."), marks.count("s"), fails, end)


_PYTEST_SECTION = re.compile(r"^_{3,} (\S.*?) _{3,}$", re.M)
_PYTEST_E = re.compile(r"^E\s+(.+)$", re.M)


def _pytest_sections(text: str, start: int, end: int) -> list[tuple[str, str]]:
    """(test, first ``E`` line) of each ``___ test ___`` header after ``= FAILURES =``/``= ERRORS =``."""
    marks = [i for i in (text.find(" FAILURES ==", start, end), text.find(" ERRORS ==", start, end)) if i >= 0]
    if not marks:
        return []
    heads = list(_PYTEST_SECTION.finditer(text, min(marks), end))
    out = []
    for k, h in enumerate(heads):
        stop = heads[k + 1].start() if k + 1 < len(heads) else end
        e = _PYTEST_E.search(text, h.end(), stop)
        out.append((h.group(1).removeprefix("ERROR at setup of ").removeprefix("ERROR collecting "),
                    e.group(1) if e else ""))
    return out


def _pytest_error(text: str, name: str) -> str:
    """The first ``E   `` line of a failure's section (``___ test_x ___``), for FAILED lines without a reason."""
    short = name.rsplit("::", 1)[-1]
    i = text.find(f" {short} _")
    m = re.compile(r"^E\s+(.+)$", re.M).search(text, i if i >= 0 else len(text))
    return m.group(1) if m else ""


# -- unittest --------------------------------------------------------------------------------------
_UNITTEST = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n[ \t]*\n?(OK|FAILED)(?: \((.*)\))?\s*$", re.M)
_UNITTEST_FAIL = re.compile(r"^(FAIL|ERROR): (\S+) \((.*?)\)", re.M)
_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit)\b.*)$", re.M)


def _unittest(text: str) -> TestRun | None:
    matches = list(_UNITTEST.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    c = _counts(m.group(3) or "")
    failed = c.get("failed", 0) + c.get("error", 0)
    fails = []
    for f in _UNITTEST_FAIL.finditer(text, matches[-2].end() if len(matches) > 1 else 0):
        exc = _EXC.search(text, f.end())
        where, method = f.group(3), f.group(2)  # "(module.Class.test_x)" (3.11+) or "(module.Class)" (older)
        fails.append((where if where.endswith("." + method) else f"{where}.{method}", exc.group(1) if exc else ""))
    summary = f"Ran {m.group(1)} tests: {m.group(2)}" + (f" ({m.group(3)})" if m.group(3) else "")
    return TestRun("unittest", summary, failed, int(m.group(1)) - failed - c.get("skipped", 0), c.get("skipped", 0),
                   fails, m.end())


# -- sympy's bin/test -----------------------------------------------------------------------------
_SYMPY = re.compile(r"^=*[ \t]*tests finished: ((?:\d+ [a-z][a-z ]*,\s*)+)in [\d.]+ seconds[ \t]*=*$", re.M)
_SYMPY_FAIL = re.compile(r"^_+ (\S+\.py:\w+) _+$", re.M)


def _sympy(text: str) -> TestRun | None:
    matches = list(_SYMPY.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    c = _counts(m.group(1).replace("expected to fail", "xfailed"))
    fails = []
    for f in _SYMPY_FAIL.finditer(text, matches[-2].end() if len(matches) > 1 else 0):
        exc = _EXC.search(text, f.end(), m.start())
        fails.append((f.group(1), exc.group(1) if exc else ""))
    summary = "tests finished: " + " ".join(m.group(1).split()).rstrip(",")
    return TestRun("sympy", summary, c.get("failed", 0) + c.get("exceptions", 0), c.get("passed", 0),
                   c.get("skipped", 0), fails, m.end())


# -- node --test (spec and TAP reporters) -----------------------------------------------------------
_NODE = re.compile(r"^[ℹ#] tests (\d+)\n(?:[ℹ#] suites \d+\n)?[ℹ#] pass (\d+)\n[ℹ#] fail (\d+)\n"
                   r"(?:[ℹ#] cancelled (\d+)\n)?(?:[ℹ#] skipped (\d+)\n)?(?:[ℹ#] todo (\d+))?", re.M)
_NODE_SPEC_FAIL = re.compile(r"^[ \t]*✖ (.+?) \([\d.]+m?s\)$", re.M)
_NODE_TAP_FAIL = re.compile(r"^[ \t]*not ok \d+ - (.+)$", re.M)
_TAP_ERROR = re.compile(r"^[ \t]*error: (?:\|-?\n\s*(.+)|'(.+)'|(.+))$", re.M)


def _node(text: str) -> TestRun | None:
    m = _last(_NODE, text)
    if m is None:
        return None
    failed = int(m.group(3)) + int(m.group(4) or 0)
    fails: dict[str, str] = {}
    for f in _NODE_SPEC_FAIL.finditer(text):
        error = _next_line(text, f.start(), skip="ℹ✔✖▶")
        if error and f.group(1) not in fails and not error.startswith("test at "):
            fails[f.group(1)] = error
    for f in _NODE_TAP_FAIL.finditer(text):
        e = _TAP_ERROR.search(text, f.end(), f.end() + 2000)
        error = next((g for g in e.groups() if g), "") if e else ""
        if not re.match(r"'?\d+ subtests? failed", error) and f.group(1) not in fails:
            fails[f.group(1)] = error.strip()
    summary = f"tests {m.group(1)}, pass {m.group(2)}, fail {m.group(3)}"
    return TestRun("node", summary, failed, int(m.group(2)), int(m.group(5) or 0) + int(m.group(6) or 0),
                   list(fails.items()), m.end())


# -- jest, vitest ----------------------------------------------------------------------------------
_JEST = re.compile(r"^Tests:\s+(.*?\d+ total)\s*$", re.M)
_JEST_FAIL = re.compile(r"^[ \t]*● (.+ › .+|.+)$", re.M)
_VITEST = re.compile(r"^[ \t]*Tests\s+((?:\d+ \w+(?: \| )?)+)\s*\((\d+)\)\s*$", re.M)
_VITEST_FAIL = re.compile(r"^[ \t]*(?:FAIL|×)\s+(\S+.*? > .+?)(?:\s+\d+ms)?$", re.M)


def _jest(text: str) -> TestRun | None:
    m = _last(_JEST, text)
    if m is None:
        return None
    c = _counts(m.group(1))
    fails: dict[str, str] = {}
    for f in _JEST_FAIL.finditer(text):
        if f.group(1).strip() != "Console" and f.group(1) not in fails:
            fails[f.group(1).strip()] = _next_line(text, f.start())
    return TestRun("jest", "Tests: " + m.group(1), c.get("failed", 0), c.get("passed", 0), c.get("skipped", 0),
                   list(fails.items()), m.end())


def _vitest(text: str) -> TestRun | None:
    m = _last(_VITEST, text)
    if m is None:
        return None
    c = _counts(m.group(1))
    fails: dict[str, str] = {}
    for f in _VITEST_FAIL.finditer(text):
        fails.setdefault(f.group(1).strip(), _next_line(text, f.start(), skip="⎯"))
    return TestRun("vitest", f"Tests {m.group(1).strip()} ({m.group(2)})", c.get("failed", 0), c.get("passed", 0),
                   c.get("skipped", 0), list(fails.items()), m.end())


# -- go test ---------------------------------------------------------------------------------------
_GO_RESULT = re.compile(r"^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[build failed\]|\[setup failed\])", re.M)
_GO_TEST = re.compile(r"^[ \t]*--- (FAIL|PASS|SKIP): (\S+) \(", re.M)


def _go(text: str) -> TestRun | None:
    results = list(_GO_RESULT.finditer(text))
    if not results:
        return None
    tests = _GO_TEST.findall(text)
    fails = [(f.group(2), _go_error(text, f)) for f in _GO_TEST.finditer(text) if f.group(1) == "FAIL"]
    bad = sum(1 for r in results if r.group(1) == "FAIL")
    failed = max(len(fails), bad)
    passed = sum(1 for kind, _ in tests if kind == "PASS") or sum(1 for r in results if r.group(1) == "ok")
    summary = f"{len(results)} package(s): {len(results) - bad} ok, {bad} FAIL" + (
        f"; {len(fails)} test(s) failed" if fails else "")
    return TestRun("go", summary, failed, passed, sum(1 for kind, _ in tests if kind == "SKIP"), fails,
                   results[-1].end())


def _go_error(text: str, fail: re.Match[str]) -> str:
    """A failing go test's first logged line: indented right after ``--- FAIL`` (plain), or between its
    ``=== RUN`` and ``--- FAIL`` lines (``-v``)."""
    after = text[fail.end():].split("\n", 1)[1:]
    if after and after[0][:1] in " \t" and after[0].strip():
        return after[0].strip()
    run = text.rfind(f"=== RUN   {fail.group(2)}", 0, fail.start())
    logged = [ln.strip() for ln in text[run:fail.start()].splitlines()[1:] if ln[:1] in " \t" and ln.strip()]
    return logged[0] if run >= 0 and logged else ""


# -- cargo test ------------------------------------------------------------------------------------
_CARGO = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored.*$", re.M)
_CARGO_FAIL = re.compile(r"^test (\S+) \.\.\. FAILED$", re.M)
_CARGO_PANIC = re.compile(r"^thread '([^']+)'(?: \(\d+\))? panicked at [^\n]*:\n(.*)$", re.M)


def _cargo(text: str) -> TestRun | None:
    matches = list(_CARGO.finditer(text))
    if not matches:
        return None
    passed = sum(int(m.group(2)) for m in matches)
    failed = sum(int(m.group(3)) for m in matches)
    panics = {p.group(1): p.group(2).strip() for p in _CARGO_PANIC.finditer(text)}
    fails = [(f.group(1), panics.get(f.group(1), "")) for f in _CARGO_FAIL.finditer(text)]
    summary = f"test result: {'FAILED' if failed else 'ok'}. {passed} passed; {failed} failed" + (
        f" ({len(matches)} test binaries)" if len(matches) > 1 else "")
    return TestRun("cargo", summary, failed, passed, sum(int(m.group(4)) for m in matches), fails, matches[-1].end())


# -- mocha, rspec ----------------------------------------------------------------------------------
_MOCHA = re.compile(r"^[ \t]+(\d+) passing \([\d.]+m?s\)\s*\n(?:\s+(\d+) pending\s*\n)?(?:\s+(\d+) failing)?", re.M)
_MOCHA_FAIL = re.compile(r"^[ \t]+\d+\) (.+)$", re.M)
_RSPEC = re.compile(r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?.*$", re.M)
_RSPEC_FAIL = re.compile(r"^rspec (\S+) # (.+)$", re.M)
_RSPEC_ERROR = re.compile(r"^[ \t]+\d+\) (.+)\n[ \t]+(?:Failure/Error: (.+)|(\S.*))$", re.M)


def _mocha(text: str) -> TestRun | None:
    m = _last(_MOCHA, text)
    if m is None:
        return None
    failed = int(m.group(3) or 0)
    fails = [f for f in map(_mocha_failure, _MOCHA_FAIL.finditer(text, m.end())) if f is not None]
    summary = f"{m.group(1)} passing" + (f", {m.group(2)} pending" if m.group(2) else "") + (
        f", {failed} failing" if failed else "")
    return TestRun("mocha", summary, failed, int(m.group(1)), int(m.group(2) or 0), fails, m.end())


def _mocha_failure(head: re.Match[str]) -> tuple[str, str] | None:
    """``1) Suite`` + indented title lines up to the one ending in ``:``, then the error line (None: not one)."""
    parts = [head.group(1).strip()]
    lines = head.string[head.end():head.end() + 4000].split("\n")[1:]
    for k, line in enumerate(lines[:8]):
        if parts[-1].endswith(":"):
            error = next((ln.strip() for ln in lines[k:k + 8] if ln.strip()), "")
            return " ".join(parts).rstrip(":"), error
        if not line.strip():
            return None
        parts.append(line.strip())
    return None


def _rspec(text: str) -> TestRun | None:
    m = _last(_RSPEC, text)
    if m is None:
        return None
    errors = {e.group(1).strip(): (e.group(2) or e.group(3) or "").strip() for e in _RSPEC_ERROR.finditer(text)}
    fails = [(f.group(2).strip(), errors.get(f.group(2).strip(), "")) for f in _RSPEC_FAIL.finditer(text)]
    total, failed, pending = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    return TestRun("rspec", m.group(0).strip(), failed, total - failed - pending, pending, fails, m.end())


_READERS = (_pytest, _unittest, _sympy, _node, _jest, _vitest, _go, _cargo, _mocha, _rspec)
WINDOW = 256_000  # characters read of a larger output: its head and tail (the summary is at the end)


def read_test_run(text: str) -> TestRun | None:
    """The test run ``text`` reports (the last one when there are several), or None when no runner summary is
    in it. Failures are read from the same text: a name and its first error line each, at most ``MAX_FAILURES``."""
    if len(text) > WINDOW:
        text = text[: WINDOW // 2] + "\n" + text[-WINDOW // 2 :]
    found = [run for run in (reader(text) for reader in _READERS) if run is not None]
    if not found:
        return None
    run = max(found, key=lambda r: r.end)
    run.failures = [(_cut(name), _cut(error)) for name, error in run.failures[:MAX_FAILURES]]
    run.summary = _cut(run.summary)
    return run
