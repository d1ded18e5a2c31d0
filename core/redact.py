"""Secret scrubbing, applied before anything is hashed, stored, logged or returned.

Each rule pairs a cheap literal prefilter (``str`` containment on the text or
its lower-cased copy, which scans a megabyte in well under a millisecond) with
a regex that only runs when the prefilter hits, so clean output costs almost
nothing. Rules are specific shapes (AKIA…, ghp_…, xoxb-…, PEM blocks, JWTs,
bearer headers, ``user:pass@`` URLs) plus one generic rule for
``*_KEY=`` / ``*_TOKEN=`` / ``*_SECRET=`` / password assignments whose value
looks random (length and Shannon entropy), so code such as
``cache_key = make_key(x)`` and git SHAs, hashes and UUIDs survive.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bosun.core.errors import InvalidInput


@dataclass(frozen=True)
class Rule:
    """One secret shape.

    ``needles`` are lower-case byte regexes (keep a literal prefix: the scan is then fast),
    one of which occurs in every match, looked up in the lower-cased bytes; ``group`` is the part replaced (0 = the whole match); ``end_needle``
    marks a multi-line shape whose window runs from the needle's line to the end marker.
    """

    name: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    group: int = 0
    accept: Callable[[str], bool] | None = None  # extra check on the secret text
    name_group: int | None = None  # the assigned name, when the rule is an assignment
    end_needle: str | None = None
    quick: tuple[str, ...] = ()  # plain literals, one of which occurs when a needle does (for regex needles)
    quick_regex: bool = False  # needles share a literal prefix: one regex search beats several byte scans
    hit_filter: Callable[[bytes, int], bool] | None = None  # cheap byte check after a literal hit

    @functools.cached_property
    def prefilter(self) -> re.Pattern[bytes]:
        return re.compile("|".join(self.needles).encode())

    @functools.cached_property
    def literals(self) -> tuple[bytes, ...]:
        """Byte literals checked with ``in`` (a memchr-speed scan) before any regex runs."""
        if self.quick:
            return tuple(q.encode() for q in self.quick)
        parts = [p for n in self.needles for p in n.split("|")]
        if all(re.fullmatch(r"[a-z0-9_ =.\-]+", p) for p in parts):
            return tuple(p.encode() for p in parts)
        return ()


def shannon_bits(text: str) -> float:
    """Bits of entropy per character of ``text``."""
    if not text:
        return 0.0
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_HEX_ONLY = re.compile(r"^[0-9a-fA-F-]+$")
# names that declare a credential outright: a hex or UUID value under them is still a secret
_EXPLICIT = re.compile(r"(?i)secret|token|passw|pwd|api_?key|access_?key|private_?key|auth")


def looks_random(value: str, min_len: int = 16, min_bits: float = 3.3) -> bool:
    """A value that reads like a credential: long, high entropy, letters and digits mixed.

    Placeholders (``changeme``, ``xxxxxxxx``, ``${VAR}``, ``<token>``) and plain words fail.
    """
    v = value.strip("'\"")
    if len(v) < min_len:
        return False
    if v.startswith(("${", "$(", "<", "{{", "%(")) or v.lower() in {"none", "null", "true", "false"}:
        return False
    if not any(ch.isdigit() for ch in v) or not any(ch.isalpha() for ch in v):
        return False
    return shannon_bits(v) >= min_bits


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


_ASSIGN_NAME = r"[A-Za-z0-9_.-]*?(?:_KEY|_TOKEN|_SECRET|SECRET_KEY|_PASSWORD|_PASSWD|_PWD|API_?KEY|ACCESS_?KEY|PASSWORD|PASSWD|SECRET|TOKEN)"

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        "private_key",
        _rx(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"),
        ("private key",), end_needle="-----end ",
    ),
    Rule("aws_access_key", _rx(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), ("akia", "asia")),
    Rule(
        "aws_secret_key",
        _rx(r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        ("secret",), group=1,
    ),
    Rule("gcp_api_key", _rx(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), ("aiza",)),
    Rule(
        "azure_storage_key",
        _rx(r"(?i)AccountKey=([A-Za-z0-9+/]{80,}={0,2})"),
        ("accountkey=",), group=1,
    ),
    Rule("github_token", _rx(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"), ("gh(?:[pousr]_|ithub_pat_)",),
         quick_regex=True),
    Rule("gitlab_token", _rx(r"\b(?:glpat|gldt|glrt|glptt|glcbt|glsoat|glft|glimt|glagent)-[A-Za-z0-9_\-]{20,}"), ("gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|agent)-",),
         quick_regex=True),
    Rule("slack_token", _rx(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), ("xox",)),
    Rule("slack_webhook", _rx(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"), (r"hooks\.slack\.com",), quick_regex=True),
    Rule("stripe_key", _rx(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), ("k_(?:live|test)_",), quick_regex=True),
    Rule(
        "openai_key", _rx(r"\bsk-(?:proj-|ant-(?:api|admin)\d\d-)?[A-Za-z0-9_\-]{32,}"), ("sk-",),
        accept=lambda s: looks_random(s, 32, 3.5),
    ),
    Rule(
        "jwt",
        _rx(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        ("eyj",),
    ),
    Rule(
        "auth_header",
        _rx(r"(?i)\b(?:authorization|proxy-authorization)\s*[:=]\s*[\"']?(?:bearer|basic|token|digest)\s+([A-Za-z0-9._~+/=\-]{8,})"),
        ("authorization",), group=1,
    ),
    Rule(
        "bearer_token",
        _rx(r"(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{20,}=*)"),
        ("bearer",), group=1,
        accept=lambda s: looks_random(s, 20, 3.0),
    ),
    Rule(
        "url_password",
        _rx(r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s:/@\"'<>]{1,128}:([^\s@/\"'<>]{1,256})@[A-Za-z0-9.\-\[]"),
        (":/(?=/)",), group=1, quick=("://",),
        accept=lambda s: _url_password(s),
    ),
    Rule(
        "secret_assignment",
        _rx(
            r"(?i)\b(" + _ASSIGN_NAME + r")[\"']?\s*(?::=|=|:)\s*[\"']?([A-Za-z0-9+/=_\-.~!@#%^*]{16,512})(?=[\"'\s,;)}\]]|$)",
            re.MULTILINE,
        ),
        ("key|token|secret|passw|pwd",), group=2,
        accept=looks_random,
        name_group=1,
        hit_filter=lambda low, end: _assignment_follows(low, end),
    ),
)

def _assignment_follows(low: bytes, end: int) -> bool:
    """After a name ending in key/token/..., an assignment follows: optional quote, spaces, then = or :.

    A byte-level check that skips the thousands of ``key`` occurrences in code that are not
    assignments (``cache_key(``, ``keys()``) before any regex runs.
    """
    n = len(low)
    j = end
    stop = min(n, end + 12)  # the rest of the name: PASSW|ORD, SECRET|_KEY, TOKEN|_SECRET
    while j < stop and (low[j] in b"_.-" or 48 <= low[j] <= 57 or 97 <= low[j] <= 122):
        j += 1
    if j < n and low[j] in b"\"'":
        j += 1
    while j < n and low[j] in b" \t":
        j += 1
    return j < n and low[j] in b":="


def _url_password(value: str) -> bool:
    """A URL password that is not a documentation placeholder (``user:pass@``, ``:***@``, ``:${PW}@``)."""
    v = value.lower()
    if v.startswith(("$", "<", "{", "%(")) or v.isdigit() or set(v) <= {"*", "x"}:
        return False
    return v not in _PLACEHOLDERS and v.split("%")[0] not in _PLACEHOLDERS


_PLACEHOLDERS = frozenset(
    ["pass", "password", "passwd", "pwd", "pw", "secret", "passw0rd", "p4ssword", "changeme", "example", "test", "user", "username", "foo", "bar", "baz", "mypassword", "yourpassword", "redacted", "dummy", "fake", "token", "pass@word", "pass/word"]
)

RULE_NAMES = tuple(r.name for r in DEFAULT_RULES)


@dataclass
class Redaction:
    """The scrubbed text and what was taken out (rule name -> count); never the secrets."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    data: bytes = b""  # the scrubbed UTF-8 bytes (what gets hashed and stored)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class Redactor:
    """A configured rule set. ``disabled`` drops default rules by name; ``extra`` adds ``name=regex`` rules."""

    def __init__(self, disabled: Iterable[str] = (), extra: Iterable[str] = ()) -> None:
        disabled = {d.strip() for d in disabled if d.strip()}
        unknown = disabled - set(RULE_NAMES)
        if unknown:
            raise InvalidInput("redact_disable", f"unknown rule(s) {sorted(unknown)}", ", ".join(RULE_NAMES))
        rules = [r for r in DEFAULT_RULES if r.name not in disabled]
        for spec in extra:
            spec = spec.strip()
            if not spec:
                continue
            name, sep, pattern = spec.partition("=")
            if not sep or not name.strip() or not pattern:
                raise InvalidInput("redact_extra", f"rule {spec[:60]!r} is not name=regex")
            try:
                rx = re.compile(pattern)
            except re.error as exc:
                raise InvalidInput("redact_extra", f"rule {name!r}: invalid regex: {exc}") from exc
            rules.append(Rule(name.strip(), rx, ()))
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.names = tuple(r.name for r in self.rules)

    def redact_bytes(self, data: bytes) -> tuple[bytes, dict[str, int]]:
        """Scrub UTF-8 ``data``; invalid bytes pass through unchanged (surrogateescape).

        Needles are looked up in the lower-cased bytes (a fast byte search); a rule whose
        needles do not occur costs nothing more, and one that hits runs its regex only on
        the lines around the hits.
        """
        counts: dict[str, int] = {}
        if not data:
            return data, counts
        lowered = data.lower()
        found: dict[bytes, bool] = {}  # literal -> present in ``lowered`` (shared by rules)
        for rule in self.rules:
            if not rule.needles:
                text = data.decode("utf-8", "surrogateescape")
                new, n = _apply(rule, text)
                if n:
                    data, lowered = new.encode("utf-8", "surrogateescape"), b""
            else:
                if rule.quick_regex:
                    if rule.prefilter.search(lowered) is None:
                        continue
                elif rule.literals:
                    present = False
                    for lit in rule.literals:
                        seen = found.get(lit)
                        if seen is None:
                            seen = found[lit] = lit in lowered
                        if seen:
                            present = True
                            break
                    if not present:
                        continue
                if rule.literals and not rule.quick_regex:
                    hits = []
                    for lit in rule.literals:
                        if found.get(lit, True):
                            i = lowered.find(lit)
                            while i >= 0:
                                if rule.hit_filter is None or rule.hit_filter(lowered, i + len(lit)):
                                    hits.append(i)
                                i = lowered.find(lit, i + 1)
                else:
                    hits = [m.start() for m in rule.prefilter.finditer(lowered)]
                if not hits:
                    continue
                data, n = _apply_windows(rule, data, lowered, hits)
            if n:
                counts[rule.name] = counts.get(rule.name, 0) + n
                lowered = data.lower()
                found.clear()
        return data, counts

    def redact(self, text: str) -> Redaction:
        """Replace every secret in ``text`` with ``[REDACTED:<rule>]``."""
        data, counts = self.redact_bytes(text.encode("utf-8", "surrogatepass"))
        out = data.decode("utf-8", "surrogatepass") if counts else text
        return Redaction(out, counts, data)

    def scrub(self, text: str) -> str:
        return self.redact(text).text


def _apply_windows(rule: Rule, data: bytes, lowered: bytes, hits: list[int]) -> tuple[bytes, int]:
    """Run the rule's regex on the lines around each hit only (single-line shapes), merged."""
    windows: list[list[int]] = []
    end_nb = rule.end_needle.encode() if rule.end_needle else None
    for pos in sorted(hits):
        lo = data.rfind(b"\n", 0, pos) + 1
        if end_nb is not None:
            e = lowered.find(end_nb, pos)
            pos = len(data) if e < 0 else e
        hi = data.find(b"\n", pos)
        hi = len(data) if hi < 0 else hi
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
        else:
            windows.append([lo, hi])
    out: list[bytes] = []
    last = 0
    total = 0
    for lo, hi in windows:
        piece, n = _apply(rule, data[lo:hi].decode("utf-8", "surrogateescape"))
        if n:
            out.append(data[last:lo])
            out.append(piece.encode("utf-8", "surrogateescape"))
            last = hi
            total += n
    if not total:
        return data, 0
    out.append(data[last:])
    return b"".join(out), total


def _apply(rule: Rule, text: str) -> tuple[str, int]:
    marker = f"[REDACTED:{rule.name}]"
    count = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal count
        secret = m.group(rule.group)
        if secret is None or (rule.accept is not None and not rule.accept(secret)):
            return m.group(0)
        if rule.name_group is not None and _HEX_ONLY.match(secret) and not _EXPLICIT.search(m.group(rule.name_group)):
            return m.group(0)  # sort_key = <sha>, idempotency_key = <uuid>: identifiers, not credentials
        count += 1
        if rule.group == 0:
            return marker
        start, end = m.span(rule.group)
        base = m.start(0)
        whole = m.group(0)
        return whole[: start - base] + marker + whole[end - base :]

    return rule.pattern.sub(sub, text), count


_DEFAULT: Redactor | None = None


def default_redactor() -> Redactor:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Redactor()
    return _DEFAULT


def redact_value(value: object, redactor: Redactor | None = None) -> object:
    """Scrub every string inside a JSON-like value (dicts, lists), keys included."""
    r = redactor or default_redactor()
    if isinstance(value, str):
        return r.scrub(value)
    if isinstance(value, dict):
        return {r.scrub(str(k)): redact_value(v, r) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, r) for v in value]
    return value
