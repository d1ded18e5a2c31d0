"""Validated glob patterns for tool names and paths.

``fnmatch`` accepts any string and silently treats a broken class like ``[abc`` as
literal text, so a typo in a guard rail would never match and nobody would know.
This compiles globs itself and rejects invalid ones with a clear message:
``**`` matches across ``/``, ``*`` and ``?`` stay within one path segment,
``[...]`` / ``[!...]`` are character classes.
"""

from __future__ import annotations

import re
from functools import lru_cache

from bosun.core.errors import InvalidInput

MAX_GLOB = 512


class GlobError(ValueError):
    """A glob pattern that cannot be compiled; the message says where and why."""


@lru_cache(maxsize=1024)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """The anchored regex for ``pattern``; GlobError when the pattern is invalid."""
    if not pattern:
        raise GlobError("empty pattern")
    if len(pattern) > MAX_GLOB:
        raise GlobError(f"pattern longer than {MAX_GLOB} characters")
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            if pattern[i : i + 2] == "**":
                i += 2
                if pattern[i : i + 1] == "/":  # "**/" also matches zero directories
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                raise GlobError(f"unclosed '[' at position {i + 1}")
            body = pattern[i + 1 : j]
            if body in ("", "!", "^"):
                raise GlobError(f"empty character class at position {i + 1}")
            if body[0] in "!^":
                body = "^" + body[1:]
            body = body.replace("\\", "\\\\")
            out.append(f"[{body}]")
            i = j
        elif ch == "]":
            raise GlobError(f"unmatched ']' at position {i + 1}")
        else:
            out.append(re.escape(ch))
        i += 1
    try:
        return re.compile("".join(out) + r"\Z", re.DOTALL)
    except re.error as exc:
        raise GlobError(f"invalid character class ({exc})") from exc


def check_glob(field: str, pattern: object) -> str:
    """``pattern`` if it is a valid glob string; InvalidInput naming ``field`` otherwise."""
    if not isinstance(pattern, str):
        raise InvalidInput(field, f"must be a glob string, got {type(pattern).__name__}")
    try:
        compile_glob(pattern)
    except GlobError as exc:
        raise InvalidInput(field, f"invalid glob {pattern!r}: {exc}", "globs like 'tests/**', '*.py', 'git.*', '[!_]*'") from exc
    return pattern


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``text`` matches ``pattern`` entirely."""
    return compile_glob(pattern).match(text) is not None


def path_match(pattern: str, path: str) -> bool:
    """Whether ``path`` (or its tail after any ``/``) matches: ``tests/**`` matches ``/repo/tests/a.py``."""
    rx = compile_glob(pattern)
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    if rx.match(path):
        return True
    if pattern.startswith("/"):
        return False
    start = path.find("/")
    while start != -1:
        if rx.match(path[start + 1 :]):
            return True
        start = path.find("/", start + 1)
    return False
