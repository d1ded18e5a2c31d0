"""Old versus new offload code on real outputs: redaction, observe's measures and recall grep must agree.

The "old" code is a committed revision (default: the one this round started from), read with
``git show`` into private module names (nothing of it is shipped); the new code is the working
tree's. Compared, byte for byte or field for field:

1. redaction of every output and command of the trajectories in ``/work/shared/data/trajectories``
   (miniswe-dev, tau-airline) and of the 1 MB speed-bench payload: redacted bytes and counts;
2. what observe measures of the larger outputs and of concatenations up to 1 MB: line count, token
   estimate, kind, outline lines, hints and facts;
3. recall grep over payloads (ASCII and not, real and concatenated) with agents' kinds of patterns:
   text, counts, notes, line numbers; and old/new time per grep, interleaved;
4. recall grep over random byte strings (invalid UTF-8, carriage returns, the Kelvin sign, long lines);
5. recall head, tail, raw and range over every output and over random byte strings.

    python bench/offload_regress.py [--old-rev d66fd06] [--limit 0] [--fuzz 3000] [--no-grep]

Exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BOSUN_SHARED", ROOT.parent / "shared"))
TRAJ = SHARED / "data" / "trajectories"
START_REV = "d66fd06"  # the commit this round started from
# module files of the old revision, loaded under private names; their bosun imports are rewritten
OLD_MODULES = {
    "redact": ("core/redact.py", "bosun.core.redact"),
    "outline": ("core/offload/outline.py", "bosun.core.offload.outline"),
    "offload": ("core/offload/offload.py", "bosun.core.offload.offload"),
    "query": ("core/offload/query.py", "bosun.core.offload.query"),
}
PATTERNS = (  # what agents grep for: literals, anchors, classes, dots, case folding, multi-line
    (r"^FAILED|Traceback", False), (r"error", True), (r"def .*\(", False), (r"Error$", False),
    (r"^\s+at ", False), (r"\bimport\b", False), (r"[A-Z][a-z]+Error", False), (r"TODO|FIXME", False),
    (r"(?i)warning", False), (r"self\.\w+", False), (r"passed|failed", True), (r"a.b", False),
    (r"x = .+", False), (r"File \"[^\"]+\", line \d+", False), (r"^$", False), (r"é|ü", False),
    (r"FAILED t\w*\nTrace|back", False), (r"(?:assert|raise) ", False), (r"[.,;] ", False), (r"K|s", True),
)


def old_modules(rev: str) -> dict[str, types.ModuleType]:
    """The old revision's modules, importable side by side with the new ones."""
    pkg = types.ModuleType("_bosun_old")
    pkg.__path__ = []
    sys.modules["_bosun_old"] = pkg
    out: dict[str, types.ModuleType] = {}
    for name, (path, _dotted) in OLD_MODULES.items():  # in dependency order
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True,
                             check=True).stdout
        for other, (_p, dotted) in OLD_MODULES.items():
            src = src.replace(f"from {dotted} import", f"from _bosun_old.{other} import")
        mod = types.ModuleType(f"_bosun_old.{name}")
        sys.modules[mod.__name__] = mod
        exec(compile(src, f"{rev}:{path}", "exec"), mod.__dict__)
        out[name] = mod
    return out


def texts(limit: int) -> list[str]:
    """Every output, error and argument set (commands) of the trajectories, in file order."""
    out: list[str] = []
    for path in sorted(TRAJ.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                for call in json.loads(line).get("calls", []):
                    for key in ("output", "args", "error"):
                        value = call.get(key)
                        if isinstance(value, str) and value:
                            out.append(value)
                        elif value:
                            out.append(json.dumps(value, ensure_ascii=False))
                if limit and len(out) >= limit:
                    return out
    return out


def big_payloads(outputs: list[str]) -> list[str]:
    """Concatenations of real outputs from 20 KB to 1 MB, ASCII and not (the speed bench's kind)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from offload_speed import payload

    out = [payload()]
    plain = [t for t in outputs if t.isascii() and len(t) > 200]
    other = [t for t in outputs if not t.isascii() and len(t) > 50]
    for i, size in enumerate((20_000, 70_000, 150_000, 300_000, 600_000, 1_000_000)):
        for pool in (plain, other + plain[::7]):
            parts: list[str] = []
            total = 0
            j = i * 131
            while total < size and pool:
                parts.append(pool[j % len(pool)])
                total += len(parts[-1])
                j += 17
            out.append("\n".join(parts))
    return out


def compare_redaction(old: types.ModuleType, corpus: list[str], big: list[str]) -> int:
    import bosun.core.redact as new
    from bosun.core.offload.outline import OUTLINE_LITERALS

    ro, rn = old.Redactor(), new.Redactor()
    bad = 0
    for text in [*corpus, *big]:
        data = text.encode("utf-8", "surrogatepass")
        expected = ro.redact_bytes(data)
        scrubbed, counts, found = rn.redact_bytes_finding(data, OUTLINE_LITERALS)  # as observe calls it
        if expected != rn.redact_bytes(data) or expected != (scrubbed, counts):
            bad += 1
            print("redaction differs:", text[:120].replace("\n", " "))
        elif found is not None and found != _find_loop(scrubbed, OUTLINE_LITERALS):
            bad += 1
            print("outline needles found by redaction's scan differ:", text[:120].replace("\n", " "))
    print(f"redaction: {len(corpus):,} texts + {len(big)} large payloads, {bad} differences "
          "(and the outline needles found in the same scan equal a find loop's)")
    return bad


def _find_loop(data: bytes, literals: tuple[bytes, ...]) -> dict[bytes, list[int]]:
    """Every occurrence of each literal in ``data.lower()`` (overlaps included)."""
    low = data.lower()
    out: dict[bytes, list[int]] = {}
    for lit in literals:
        i = low.find(lit)
        while i >= 0:
            out.setdefault(lit, []).append(i)
            i = low.find(lit, i + 1)
    return out


def measures(mod: dict[str, Any], text: str, redactor: Any = None) -> tuple[Any, ...]:
    """What observe computes for an output (as observe calls it: searches on the unredacted bytes;
    with ``redactor``, the outline's needles found by redaction's scan, as the new observe does)."""
    data = text.encode()
    tokens = mod["offload"].fast_tokens(text)
    found = None
    if redactor is not None:
        found = redactor.redact_bytes_finding(data, mod["outline"].OUTLINE_LITERALS)[2]
    u = mod["outline"].Utf8Text.of(text, data, found) if found is not None else mod["outline"].Utf8Text.of(text, data)
    kind = mod["outline"].detect_kind(text, "cat out.log", u)
    budget = mod["offload"].outline_budget(mod["offload"].get_mode("cache_ttl"), tokens, kind)
    ol = mod["outline"].build_outline(text, budget=budget, command="cat out.log", kind=kind, utf8=u)
    return mod["offload"].count_lines(data), tokens, kind, ol.lines, ol.hints, ol.facts


def compare_measures(old: dict[str, types.ModuleType], corpus: list[str], big: list[str]) -> int:
    import bosun.core.offload.offload as n_off
    import bosun.core.offload.outline as n_out
    from bosun.core.redact import Redactor

    new = {"offload": n_off, "outline": n_out}
    cases = [t for t in corpus if len(t) > 2_000] + big
    bad = 0
    redactor = Redactor()
    for text in cases:
        if measures(old, text) != measures(new, text) or measures(old, text) != measures(new, text, redactor):
            bad += 1
            print("observe measures differ:", text[:120].replace("\n", " "))
    print(f"observe measures: {len(cases):,} outputs, {bad} differences")
    return bad


def unbounded(*modules: types.ModuleType) -> None:
    """Lift the grep time budget in both versions: on a loaded machine a scan may hit the 0.5 s
    deadline on one side and not the other, which compares the machine, not the code."""
    for mod in modules:
        setattr(mod, "GREP_TIME_BUDGET_S", 60.0)  # noqa: B010 (the module attribute both versions read)


def compare_grep(old: types.ModuleType, corpus: list[str], big: list[str]) -> int:
    import bosun.core.offload.query as new

    unbounded(old, new)

    cases = [t for t in corpus if len(t) > 5_000][:300] + big
    bad = n = fast = 0
    timing: dict[str, list[float]] = {"old": [], "new": []}
    for text in cases:
        data = text.encode()
        for pattern, ignore_case in PATTERNS:
            for context in (0, 1):
                args = {"pattern": pattern, "ignore_case": ignore_case, "context": context, "max_matches": 30}
                t0 = time.perf_counter()
                a = old.run_query(data, "grep", **args)
                t1 = time.perf_counter()
                b = new.run_query(data, "grep", **args)
                t2 = time.perf_counter()
                if len(data) > 500_000 and context == 0:
                    timing["old"].append(t1 - t0)
                    timing["new"].append(t2 - t1)
                n += 1
                fast += context == 0 and not data.isascii() and new.bytes_pattern(pattern, ignore_case, data) is not None
                if (a.text, a.note, a.extra, a.total_lines, a.returned_lines) != \
                        (b.text, b.note, b.extra, b.total_lines, b.returned_lines):
                    bad += 1
                    print(f"grep differs: {pattern!r} ignore_case={ignore_case} on {text[:80]!r}")
    print(f"recall grep: {n:,} pattern x payload x context cases ({fast:,} non-ASCII ones on the new bytes "
          f"scan), {bad} differences")
    if timing["old"]:
        print(f"  greps over 0.5-1 MB payloads: median old {statistics.median(timing['old']) * 1e3:.2f} ms, "
              f"new {statistics.median(timing['new']) * 1e3:.2f} ms (context 0, {len(timing['old'])} each, interleaved)")
    return bad


LINE_OPS = (("head", {"lines": 5}), ("head", {"lines": 40}), ("tail", {"lines": 1}), ("tail", {"lines": 40}),
            ("head", {"lines": 40, "max_tokens": 60}), ("tail", {"lines": 40, "max_bytes": 300}),
            ("raw", {"max_bytes": 2000}), ("range", {"start": 3, "end": 9}))


def compare_line_ops(old: types.ModuleType, corpus: list[str], big: list[str], fuzz: int, seed: int = 5) -> int:
    """head, tail, raw and range over every output (real and concatenated) and over fuzzed bytes (invalid
    UTF-8, every line break str.splitlines knows): text, counts, notes (head/tail cut from the bytes)."""
    import random

    import bosun.core.offload.query as new

    rnd = random.Random(seed)
    pieces = (b"ab", b" c", b"\n", b"\n\n", b"\r", b"\r\n", b"\x0b", b"\x0c", b"\x1c", b"\x1e", "é".encode(),
              "\x85".encode(), "\u2028".encode(), "\u2029".encode(), b"\xff", b"\xe2\x80", b"\xc2", "😀".encode())
    datas = [t.encode() for t in corpus if t] + [t.encode() for t in big]
    datas += [b"".join(rnd.choice(pieces[: rnd.choice((4, len(pieces)))]) for _ in range(rnd.randrange(0, 200)))
              for _ in range(fuzz)]
    bad = n = 0
    for data in datas:
        for op, args in LINE_OPS:
            a = old.run_query(data, op, **args)
            b = new.run_query(data, op, **args)
            n += 1
            if (a.text, a.note, a.extra, a.total_lines, a.returned_lines, a.truncated, a.total_bytes) != \
                    (b.text, b.note, b.extra, b.total_lines, b.returned_lines, b.truncated, b.total_bytes):
                bad += 1
                print(f"{op} differs: {args} on {data[:80]!r}")
    print(f"recall head/tail/raw/range: {n:,} op x payload cases ({len(datas):,} payloads, {fuzz:,} of them "
          f"fuzzed bytes), {bad} differences")
    return bad


FUZZ_PIECES = (b"a", b"b", b"F", b"FAILED", b"Traceback", b" ", b"\n", b"\r", "é".encode(), "€".encode(), b"\xff",
               b"\xc3", b"\x80", "😀".encode(), b"K", "\u212a".encode(), b"x = ", b"error", b"(", b"def ")
FUZZ_PATTERNS = ((r"^FAILED|Traceback", False), (r"a+b", False), (r"F.*D", False), (r"error|K", True),
                 (r"x = .+", False), (r"(?=a)ab", False), (r"[a-z]+\(", False), (r"b$", False), (r"^a", False),
                 (r"(?i:fail)ed", False), (r"def .*\(", False))


def compare_grep_fuzz(old: types.ModuleType, cases: int, seed: int = 7) -> int:
    """Grep over random byte strings: invalid UTF-8, carriage returns, the Kelvin sign, long lines."""
    import random

    import bosun.core.offload.query as new

    threshold = new.UTF8_SCAN_ABOVE
    unbounded(old, new)
    setattr(new, "UTF8_SCAN_ABOVE", 0)  # noqa: B010 (short strings too take the UTF-8 bytes scan here)
    rnd = random.Random(seed)
    bad = n = 0
    for _ in range(cases):
        data = b"".join(rnd.choice(FUZZ_PIECES) for _ in range(rnd.randrange(1, 400)))
        if rnd.random() < 0.1:
            data *= 50
        for pattern, ignore_case in FUZZ_PATTERNS:
            for max_matches in (1, 5, 1000):
                a = old.run_query(data, "grep", pattern=pattern, ignore_case=ignore_case, max_matches=max_matches)
                b = new.run_query(data, "grep", pattern=pattern, ignore_case=ignore_case, max_matches=max_matches)
                n += 1
                if (a.text, a.note, a.extra, a.total_lines, a.returned_lines) != \
                        (b.text, b.note, b.extra, b.total_lines, b.returned_lines):
                    bad += 1
                    print(f"fuzzed grep differs: {pattern!r} on {data[:80]!r}")
    print(f"recall grep, fuzzed bytes: {n:,} cases, {bad} differences")
    setattr(new, "UTF8_SCAN_ABOVE", threshold)  # noqa: B010
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-rev", default=START_REV)
    ap.add_argument("--limit", type=int, default=0, help="texts read from the trajectories (0: all)")
    ap.add_argument("--fuzz", type=int, default=3000, help="random byte strings for the grep comparison")
    ap.add_argument("--no-grep", action="store_true", help="skip the recall grep comparisons (3 and 4)")
    args = ap.parse_args()
    old = old_modules(args.old_rev)
    corpus = texts(args.limit)
    big = big_payloads([t for t in corpus if len(t) > 200])
    bad = compare_redaction(old["redact"], corpus, big)
    bad += compare_measures(old, corpus, big)
    if not args.no_grep:
        bad += compare_grep(old["query"], corpus, big)
        bad += compare_grep_fuzz(old["query"], args.fuzz)
    bad += compare_line_ops(old["query"], corpus, big, args.fuzz)
    print("IDENTICAL" if not bad else f"{bad} DIFFERENCES")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
