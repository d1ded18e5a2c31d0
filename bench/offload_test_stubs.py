"""Do the stubs of failing test runs name a failing test? (issue 37) Measured on the miniswe-dev runs.

    .venv/bin/python bench/offload_test_stubs.py [--out bench/results/offload_test_stubs.md]

Every call of every run whose output names a failing test (oracle below) is observed as the server does
(``measure`` then ``shape``, default pruning mode, no intent); for the outputs that are offloaded, the
answer the agent receives (stub, or compressed view) is searched for the failing tests' names. Outputs
are as the agent saw them (cut at 10,000 characters by mini-swe-agent).

Oracle (independent of the stub code): names from pytest ``FAILED``/``ERROR`` lines and ``___ name ___``
section headers, unittest/Django ``FAIL:``/``ERROR: test (module.Class)`` headers, sympy's
``___ path:test_name ___`` headers, go ``--- FAIL:`` and cargo ``test x ... FAILED`` lines. A stub names a
failing test when it holds one of them or its last part (``test_foo`` of ``a.py::Cls::test_foo``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
from pathlib import Path

from bosun.core.offload.offload import get_mode
from bosun.server.services.observe_shape import measure, shape

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BOSUN_SHARED", ROOT.parent / "shared"))
DATA = "data/trajectories/miniswe-dev.jsonl.gz"
_ORACLE = re.compile(
    r"^(?:FAILED|ERROR) (\S+::\S+)|^_{3,} (\S+?) _{3,}$|^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)|"
    r"^_{3,} (\S+\.py:test\w*) _{3,}$|^\s*--- FAIL: (\S+)|^test (\S+) \.\.\. FAILED$", re.M)


def failing_names(output: str) -> set[str]:
    """The failing tests an output names (see the module docstring)."""
    names: set[str] = set()
    for m in _ORACLE.finditer(output):
        for g in m.groups():
            if g and (g.startswith("test") or "::" in g or ":test" in g or "." in g):
                names.add(g)
    return {n for n in names if not n.startswith(("test session", "tests/"))} | {n for n in names if "::" in n}


def named(answer_text: str, names: set[str]) -> bool:
    for name in names:
        last = re.split(r"::|:|\.", name)[-1]
        if name in answer_text or (len(last) > 5 and last in answer_text):
            return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    with gzip.open(SHARED / DATA, "rt", encoding="utf-8") as fh:
        runs = [json.loads(line) for line in fh]
    prune = get_mode(None)
    total = offloaded = hit = 0
    kinds: dict[str, int] = {}
    misses: list[str] = []
    for run in runs:
        for call in run["calls"]:
            output = call.get("output") or ""
            names = failing_names(output)
            if not names:
                continue
            total += 1
            command = call["args"].get("command") if isinstance(call["args"], dict) else None
            data = output.encode("utf-8", "surrogatepass")
            text = data.decode("utf-8", "replace")
            failed = bool(call.get("error"))
            measured = measure(text, text.encode(), {}, prune, command, None, failed)
            digest = hashlib.sha256(text.encode()).hexdigest()
            shaped = shape(text, len(text.encode()), digest, measured, {}, None, None, failed)
            if not shaped.offloaded and "view" not in shaped.answer:
                continue  # the whole output reached the agent
            offloaded += 1
            kind = shaped.outline_kind or "?"
            kinds[kind] = kinds.get(kind, 0) + 1
            if named(json.dumps(shaped.answer, ensure_ascii=False), names):
                hit += 1
            elif len(misses) < 8:
                misses.append(f"{run['traj_id']}#{call['i']} ({kind}): {sorted(names)[:2]}")
    share = hit / offloaded if offloaded else 0.0
    lines = ["# Stubs of failing test runs on miniswe-dev (issue 37)", "",
             "`.venv/bin/python bench/offload_test_stubs.py` (see its docstring for the oracle).", "",
             f"- outputs naming a failing test: {total}; offloaded (stub or view): {offloaded}",
             f"- stubs naming at least one failing test: {hit}/{offloaded} = {share:.3f}",
             "- outline kinds of those stubs: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
             "", "Misses (first 8): " + ("; ".join(misses) or "none")]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
