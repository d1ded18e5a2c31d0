"""Secret scrubbing, applied before anything is hashed, stored, logged or returned.

Each rule pairs literal anchors (``key``, ``eyj``, ``://``: one of them occurs,
case-insensitively, on every line the rule can change) with a regex that only
runs on the lines around the anchors' occurrences. Large payloads find every
anchor of every rule in one vectorised pass (``AnchorScan``: a bigram table
lookup over the bytes, then an exact check of the few candidates), instead of one
byte scan per literal, so clean output costs about a millisecond per megabyte. Rules are specific shapes (AKIA…, ghp_…, xoxb-…, PEM blocks, JWTs,
bearer headers, ``user:pass@`` URLs) plus one generic rule for
``*_KEY=`` / ``*_TOKEN=`` / ``*_SECRET=`` / password assignments whose value
looks random (length and Shannon entropy), so code such as
``cache_key = make_key(x)`` and git SHAs, hashes and UUIDs survive.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

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
    hit_filter: Callable[[bytes, int], object] | None = None  # cheap case-insensitive byte check after a literal hit (truthy: keep)
    requires: re.Pattern[str] | None = None  # a cheap regex that finds a part of every match (window precheck)
    # every match has, right after the anchor, at most 24 name bytes, an optional quote, white space and
    # :=, = or : (``assignment_may_follow``: one vectorised check of all occurrences before ``hit_filter``)
    assignment: bool = False

    @functools.cached_property
    def prefilter(self) -> re.Pattern[bytes]:
        return re.compile("|".join(self.needles).encode())

    @functools.cached_property
    def prefilter_ci(self) -> re.Pattern[bytes]:
        """``prefilter`` matched against the original bytes: ASCII case folding equals ``bytes.lower``."""
        return re.compile("|".join(self.needles).encode(), re.IGNORECASE)

    @functools.cached_property
    def anchor_set(self) -> frozenset[bytes]:
        """``anchors`` as a set: whether any of them occurs is a few lookups."""
        return frozenset(self.anchors)

    @functools.cached_property
    def anchors(self) -> tuple[bytes, ...]:
        """Lower-case literals, one of which starts every prefilter hit (``()``: not anchorable).

        Plain-literal rules use their literals; regex needles (``quick_regex``) their literal
        prefix (``gh`` for ``gh(?:[pousr]_|ithub_pat_)``), each hit then confirmed by the regex.
        """
        if not self.needles:
            return ()
        if self.literals and not self.quick_regex:
            return self.literals
        out = []
        for needle in self.needles:
            prefix = _literal_prefix(needle)
            if not prefix:
                return ()
            out.append(prefix.encode())
        return tuple(out)

    @functools.cached_property
    def next_bytes(self) -> dict[bytes, np.ndarray]:
        """For a regex needle: anchor -> which bytes may follow it in a match (256 booleans).

        Found once per rule by partial matching (``regex``): ``gh`` is followed by one of
        ``pousri`` in either case. ``_hits`` checks that byte for all occurrences in one numpy
        step, so the regex confirms only the few that pass. Anchors any byte may follow are absent.
        """
        import regex

        rx = regex.compile("|".join(self.needles).encode(), regex.IGNORECASE)
        out: dict[bytes, np.ndarray] = {}
        for lit in self.anchors:
            ok = np.array([rx.fullmatch(lit + bytes([b]), partial=True) is not None for b in range(256)])
            if not ok.all():
                out[lit] = ok
        return out

    @functools.cached_property
    def literals(self) -> tuple[bytes, ...]:
        """Byte literals checked with ``in`` (a memchr-speed scan) before any regex runs."""
        if self.quick:
            return tuple(q.encode() for q in self.quick)
        parts = [p for n in self.needles for p in n.split("|")]
        if all(re.fullmatch(r"[a-z0-9_ =.\-]+", p) for p in parts):
            return tuple(p.encode() for p in parts)
        return ()


def _literal_prefix(needle: str) -> str:
    """The literal characters a needle regex starts with (``hooks\\.slack`` -> ``hooks.slack``)."""
    depth = 0
    for i, ch in enumerate(needle):  # a top-level alternation has no common prefix
        if ch in "()" and (i == 0 or needle[i - 1] != "\\"):
            depth += 1 if ch == "(" else -1
        elif ch == "|" and depth == 0 and (i == 0 or needle[i - 1] != "\\"):
            return ""
    out: list[str] = []
    i = 0
    while i < len(needle):
        ch = needle[i]
        if ch == "\\" and i + 1 < len(needle) and needle[i + 1] in ".-_/:":
            if i + 2 < len(needle) and needle[i + 2] in "?*{":
                break
            out.append(needle[i + 1])
            i += 2
            continue
        if not re.fullmatch(r"[a-z0-9_ =\-:/]", ch):
            break
        if i + 1 < len(needle) and needle[i + 1] in "?*{":  # an optional char is not a literal
            break
        out.append(ch)
        i += 1
    return "".join(out)


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


_PASSWORD_NAME = r"[A-Za-z0-9_.-]*?(?:passw(?:or)?d|passphrase|[A-Za-z0-9]_pwd)[A-Za-z0-9_]*?"
_ASSIGN_NAME = r"[A-Za-z0-9_.-]*?(?:_KEY|_TOKEN|_SECRET|SECRET_KEY|_PASSWORD|_PASSWD|_PWD|API_?KEY|ACCESS_?KEY|PASSWORD|PASSWD|SECRET|TOKEN)"

# Everything the rule's regex needs after the anchor: the rest of the name (PASSW|ORD, SECRET|_KEY:
# at most 12 name bytes, possessive as a byte loop would be), an optional quote, white space, :=, =
# or :, white space, an optional quote, then a value of 16-512 characters that ends where the
# regex's lookahead wants it to: at a quote, white space, , ; ) } ] or the end of the line. (The
# value characters and the ends are disjoint, so the regex can only match the whole run of value
# characters: possessive here.) White space is what ``\s`` matches in a line of text: ASCII
# spaces and, as UTF-8 bytes, the non-ASCII ones (none of these bytes is a name or value byte).
_WS = rb"[ \t\r\f\v\x1c-\x1f\x80-\xff]*+"
_ASSIGN_TAIL = re.compile(
    rb"[_.\-0-9a-z]{0,12}+[\"']?" + _WS + rb"(?::=|=|:)" + _WS
    + rb"[\"']?[A-Za-z0-9+/=_\-.~!@#%^*]{16,512}+(?=[\"'\s,;)}\]\x1c-\x1f\x80-\xff]|\Z)",
    re.IGNORECASE,
)


# after a password anchor: the rest of the name, an optional quote, := = or :, then what the rule's
# regex wants next: a quote (password_quoted), or 4 value characters after spaces or tabs
# (password_bare). Skips the many ``check_password(`` / ``self.password`` occurrences in code, and
# most assignments of the other form, before any regex runs.
_PASSWORD_NAME_TAIL = rb"[_.\-0-9a-z]{0,24}+[\"']?"
_PASSWORD_QUOTED_TAIL = re.compile(_PASSWORD_NAME_TAIL + _WS + rb"(?::=|=|:)" + _WS + rb"[\"']", re.IGNORECASE)
_PASSWORD_BARE_TAIL = re.compile(
    _PASSWORD_NAME_TAIL + rb"[ \t]*+(?::=|=|:)[ \t]*+[^\s\"'`,;)}\]\\]{4}", re.IGNORECASE)
# after ``secret`` (the aws_secret_key rule): ``aws`` or ``aws_`` just before it, then the rest of
# the name, :/=, and 40 key characters
_AWS_SECRET_TAIL = re.compile(
    rb"_?(?:access_?)?key[\"']?" + _WS + rb"[:=]" + _WS + rb"[\"']?[A-Za-z0-9/+=]{40}", re.IGNORECASE)


# byte classes of ``assignment_may_follow`` (index 256: past the end of the data)
_OTHER, _NAME, _QUOTE, _SPACE, _OP = 0, 1, 2, 3, 4
_CLASS = np.zeros(257, dtype=np.uint8)
_CLASS[list(b"_.-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")] = _NAME
_CLASS[list(b"\"'")] = _QUOTE
_CLASS[[0x20, 0x09, 0x0D, 0x0C, 0x0B, *range(0x1C, 0x20), *range(0x80, 0x100)]] = _SPACE  # what _WS matches
_CLASS[list(b":=")] = _OP
_NAME_MAX = 24  # name bytes after the anchor (the password tails' bound; the assignment's is 12)
_TAIL_SPAN = 48  # bytes looked at after each anchor; white space running past it passes (unsure)


def assignment_may_follow(data: bytes, ends: list[int]) -> np.ndarray:
    """For each of ``ends`` (anchor ends): whether ``[_.\\-0-9a-z]{0,24}+["']?<white space>(?::=|=|:)`` may
    match there (case-insensitive), checked for all at once (booleans). A superset of where the password
    and assignment tails (``_PASSWORD_QUOTED_TAIL``, ``_PASSWORD_BARE_TAIL``, ``_ASSIGN_TAIL``) match,
    each of which starts so; most ``passw``/``key`` occurrences in code (``self.password)``,
    ``cache_key(x)``) fail it, so their per-occurrence regex calls are skipped."""
    if not ends:
        return np.zeros(0, dtype=bool)
    at = np.array(ends, dtype=np.int64)
    if at.max() + _TAIL_SPAN <= len(data):  # the usual case: every span lies inside the data
        spans = np.ndarray((len(data) - _TAIL_SPAN + 1, _TAIL_SPAN), dtype=np.uint8, buffer=data, strides=(1, 1))
        cls = np.take(_CLASS, spans[at])
    else:
        idx = at[:, None] + np.arange(_TAIL_SPAN)
        raw = np.frombuffer(data, dtype=np.uint8)
        cls = np.take(_CLASS, np.where(idx < len(raw), raw[np.minimum(idx, len(raw) - 1)], 256))
    rows = np.arange(len(at))
    is_name = cls == _NAME
    run = np.argmin(is_name, axis=1)  # the name run's length (0 also when all are name bytes: failed here)
    ok = (run <= _NAME_MAX) & ~is_name[rows, run]
    after = run + (cls[rows, run] == _QUOTE)  # past an optional quote
    rest = (cls != _SPACE) & (np.arange(_TAIL_SPAN) >= after[:, None])  # what follows the white space
    first = np.argmax(rest, axis=1)
    ok &= (cls[rows, first] == _OP) | ~rest[rows, first]  # white space to the span's end: unsure, kept
    return ok


def _aws_secret_follows(data: bytes, end: int) -> bool:
    """``aws_secret_access_key = <40 chars>`` around a ``secret`` that ends at ``end``."""
    start = end - 6
    before = data[max(0, start - 4) : start].lower()
    return (before.endswith((b"aws", b"aws_"))) and _AWS_SECRET_TAIL.match(data, end) is not None




DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        "private_key",
        _rx(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"),
        ("private key",), end_needle="-----end ",
    ),
    # a secret access key under a neutral name ({"id": "AKIA...", "value": "<40 chars>"}): found by
    # the key id beside it, before the id itself is replaced
    Rule(
        "aws_secret_near_key_id",
        _rx(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b.{0,160}?(?<![A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
        ("akia", "asia"), group=1, accept=lambda s: _base64_secret(s),
    ),
    Rule("aws_access_key", _rx(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa")),
    Rule(
        "aws_secret_key",
        _rx(r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"),
        ("secret",), group=1, hit_filter=_aws_secret_follows,
    ),
    Rule("gcp_api_key", _rx(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), ("aiza",)),
    Rule(
        "azure_storage_key",
        _rx(r"(?i)AccountKey=([A-Za-z0-9+/]{80,}={0,2})"),
        ("accountkey=",), group=1,
    ),
    # (the token rules' needles are their prefixes' alternatives written out: anchors of three bytes or
    # more, so that the anchor scan needs no pass over pairs at odd offsets; the same positions hit)
    Rule("github_token", _rx(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Rule("gitlab_token", _rx(r"\b(?:glpat|gldt|glrt|glptt|glcbt|glsoat|glft|glimt|glagent)-[A-Za-z0-9_\-]{20,}"), ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-", "glagent-")),
    Rule("slack_token", _rx(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), ("xox",)),
    Rule("slack_webhook", _rx(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"), (r"hooks\.slack\.com",), quick_regex=True),
    Rule("stripe_key", _rx(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), ("k_live_", "k_test_")),
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
        accept=lambda s: _url_password(s), requires=_rx("@"),
    ),
    # passwords are often short and plain (``hunter2hunter2``), so no entropy gate: the name says
    # what the value is; the checks below keep code (``password=password``, ``get_password()``),
    # paths (``PWD=/home/u``) and placeholders (``${DB_PASSWORD}``, ``changeme``).
    Rule(
        "password_quoted",
        _rx(r"(?i)\b(" + _PASSWORD_NAME + r")[\"']?\s*(?::=|=|:)\s*([\"'])((?:(?!\2)[^\n\\]|\\.){4,256}?)\2"),
        ("passw", "passphrase", "_pwd"), group=3, name_group=1, accept=lambda s: _password_value(s, quoted=True),
        hit_filter=_PASSWORD_QUOTED_TAIL.match, assignment=True,
    ),
    Rule(
        "password_bare",
        _rx(r"(?i)\b(" + _PASSWORD_NAME + r")[\"']?[ \t]*(?::=|=|:)[ \t]*([^\s\"'`,;)}\]\\]{4,256})(?=[\s,;)}\]\\]|$)",
            re.MULTILINE),
        ("passw", "passphrase", "_pwd"), group=2, name_group=1, accept=lambda s: _password_value(s, quoted=False),
        hit_filter=_PASSWORD_BARE_TAIL.match, assignment=True,
        # the operator and a value that ends where the lookahead wants it (code such as
        # ``password = self.cleaned_data.get("password")`` has none: its line is not matched at all)
        requires=_rx(r"(?::=|=|:)[ \t]*[^\s\"'`,;)}\]\\]{4,256}(?=[\s,;)}\]\\]|$)", re.MULTILINE),
    ),
    Rule(
        "password_flag",
        _rx(r"(?i)(?<![\w-])--(?:password|passwd|pass)(?:=|[ \t]+)([\"']?)([^\s\"']{3,256})\1(?=[\s\"']|$)"),
        ("--pass",), group=2, accept=lambda s: _password_value(s, quoted=False),
    ),
    Rule(
        "mysql_password",
        _rx(r"\bmysql(?:dump|admin|import|check|show|slap)?\b[^\n|;&]*?(?<=\s)-p(?:=)?([^\s\"'-][^\s\"']{2,255})"),
        ("mysql",), group=1, accept=lambda s: _password_value(s, quoted=True), requires=_rx(r"\s-p"),
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
        hit_filter=_ASSIGN_TAIL.match, assignment=True,
        requires=_rx(r"[:=]\s*[\"']?[A-Za-z0-9+/=_\-.~!@#%^*]{16}"),  # the assignment and 16 value chars
    ),
)

def _assignment_follows(data: bytes, end: int) -> bool:
    """After a name ending in key/token/..., an assignment of a 16+ character value follows.

    A byte-level check that skips the thousands of ``key`` occurrences in code that are not
    assignments (``cache_key(``, ``keys()``) before any regex runs. Case-insensitive, so it
    reads the original bytes.
    """
    return _ASSIGN_TAIL.match(data, end) is not None


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


def _password_value(value: str, quoted: bool) -> bool:
    """A password value, not code, a path, an empty or templated placeholder, or a redaction marker."""
    v = value.strip()
    low = v.lower()
    if len(v) < 4 or "redacted" in low or low in _PLACEHOLDERS or set(low) <= {"*", "x", ".", "-", "_"}:
        return False
    if any(part in low for part in _PLACEHOLDER_PARTS):
        return False  # 'testpass123', 'somepassword', 'example-secret': fixtures and docs spell out what they are
    if v[0] in "$%<{[(*/~." or low.startswith(("none", "null", "true", "false", "required", "optional")):
        return False
    if not quoted and _CODE_VALUE.match(v) and not any(ch.isdigit() for ch in v):
        return False  # password=password, PASSWORD: str, password = self.password
    # password=get_password(), password=args.password2: code, not a value
    return "(" not in v and not (not quoted and "." in v and _CODE_VALUE.match(v))


def _base64_secret(value: str) -> bool:
    """A 40-character base64 secret: upper, lower and digits mixed, random-looking (not hex, not a word run)."""
    return (any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)
            and not _HEX_ONLY.match(value) and shannon_bits(value) >= 4.0)


_CODE_VALUE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_PLACEHOLDER_PARTS = ("pass", "secret", "test", "example", "sample", "dummy", "fake", "changeme", "placeholder",
                      "xxx", "foo", "your")


# an anchor is looked up by its rarest byte pair (fewest candidates to check); a pair's rank in
# ``_COMMON_PAIRS`` (measured on miniswe tool output) says how common it is, unlisted pairs are rare
_COMMON_PAIRS = (  # the 300 most frequent byte pairs of lower-cased agent output, most frequent first
    b'  inestest==, reseon..atdeerelore  itit '
    b'le--py s ts arcoanalen aasngthn etmerot_'
    b'ioed r f.pratr dli= itodta =fint__nsssno'
    b'isecctf : he cnds.nelfmplaexto opaged  n'
    b'ammatsotnailfo 1ripeefrtr  pursirscepre_'
    b'utf.omcamoims/ocie \'dini elotupo/t 2 "ld'
    b' molifoolsrnue):nculdaveabchllplcl lbeic'
    b'undoe.g igopacvae(emapag beaep_s_c(ssp_m'
    b'"" w __ioubafahod__ts_lumisuaiadm _pfrty'
    b'halthie,gott_f (idpty ckrgrrt.us# ppupja'
    b'e)djaublxt_aquo n_rmial so #gsumke) sa()'
    b'ytsy/st(/d u_dwiyp 3y:.r_na e:wa./s:nf_r'
    b'.cee\',duryof24",r(._.aymir20gr [ hs)ob-r'
    b' vdss,/lr.4 sc 4tbl_ibruph. bud/_ls(xph '
    b'.s/c))ht- r_cugios_ 10msrc -),f,_erdew g'
)
_PAIR_RANK = {_COMMON_PAIRS[i : i + 2]: i // 2 for i in range(0, len(_COMMON_PAIRS), 2)}
_FEW = 12  # candidates of one literal up to which a Python comparison beats a numpy pass
SCAN_ABOVE = 4096  # smaller payloads use plain byte searches (the vectorised pass has a fixed cost)


_COMMON_BYTES = b" etaoinsrlcdhupm\nfg.ybw,_/=-:()kv\"'x0123456789"  # the same idea for single bytes


def _rarity(pair: bytes) -> tuple[int, int]:
    """Higher is rarer: the pair's rank, then (among unlisted pairs) how rare its bytes are."""
    low = pair.lower()
    byte_rank = sum(len(_COMMON_BYTES) if _COMMON_BYTES.find(low[i : i + 1]) < 0 else _COMMON_BYTES.find(low[i : i + 1])
                    for i in range(len(low)))
    return _PAIR_RANK.get(low, len(_PAIR_RANK)), byte_rank


class AnchorScan:
    """Every occurrence of a set of lower-case literals in ``data.lower()``, in one vectorised pass.

    One scan per literal costs 0.3-0.6 ms per megabyte each (about 20 literals); this looks up
    the payload's byte pairs that start at even offsets in a 64 K table (``c | 0x20`` folds case: a
    superset), then checks every candidate of every literal at once, exactly as ``bytes.lower``
    would compare (one comparison of 8-byte words, not a numpy call per literal and byte). The
    positions equal a ``lowered.find`` loop's (overlaps included).

    One table lookup per two bytes, not per byte: a literal of three or more bytes has a pair at an
    even offset and one at an odd offset within it, and whichever of the two starts at an even
    offset of the payload finds the occurrence (each occurrence exactly once). Only a two-byte
    literal needs the pairs at odd offsets too (a second pass, made only when there is one: the
    default rules have none). When there are many candidates, the 8 bytes around each one, as far
    as the literals of its pair fix them, are looked up in a hashed table before any literal is
    compared (``_neighbours``): most candidates end there, in a few numpy calls for all of them.
    Short payloads are searched with ``bytes.find``, a run of literals that share a two-byte prefix
    (``ghp_``, ``gho_``, ...) only when the prefix occurs.
    """

    def __init__(self, literals: Iterable[bytes]) -> None:
        self.literals = tuple(sorted(set(literals)))
        # a short payload's plain searches: a run of literals that share their first two bytes (ghp_, gho_,
        # ...: the token rules' written-out prefixes) is looked for only when that prefix occurs
        runs = [(p, tuple(g)) for p, g in itertools.groupby(self.literals, key=lambda s: s[:2])]
        self.lone = tuple(sorted((lit for _, run in runs if len(run) < _RUN_MIN for lit in run), key=len))
        self.lone_lengths = [len(lit) for lit in self.lone]  # a literal longer than the payload is not looked for
        self.runs = tuple((p, run) for p, run in runs if len(run) >= _RUN_MIN)
        # plan entries: (literal, offset of its pair, pair code, parity of the pass that looks it up)
        self.plan: list[tuple[bytes, int, int, int]] = []
        self.singles: list[bytes] = []
        self.found: list[bytes] = []  # the literals the pair passes find, by id
        for lit in self.literals:
            if any(65 <= c <= 90 for c in lit):
                continue  # never in lower-cased bytes
            if len(lit) < 2:
                self.singles.append(lit)
                continue
            self.found.append(lit)
            if len(lit) == 2:  # its one pair, at even and at odd payload offsets
                self.plan += [(lit, 0, _code(lit, 0), 0), (lit, 0, _code(lit, 0), 1)]
                continue
            for parity in (0, 1):  # a rare pair at an even offset of the literal, and one at an odd offset
                k = max(range(parity, len(lit) - 1, 2), key=lambda i: (_rarity(lit[i : i + 2]), _known(lit, i)))
                self.plan.append((lit, k, _code(lit, k), 0))
        self.tables = [np.zeros(65536, dtype=bool), np.zeros(65536, dtype=bool)]  # even pass, odd pass
        for _, _, code, parity in self.plan:
            self.tables[parity][code] = True
        self.odd_pass = any(parity for *_, parity in self.plan)
        self._neighbours()
        # every candidate of every literal is checked at once, as little-endian 8-byte words: a word of the
        # payload at the literal's start, OR-ed with ``fold`` (0x20 on the literal's letters: either case;
        # 0xff past its end: any byte), must equal ``expect`` (the literal, 0xff past its end)
        self.words = max((len(lit) + 7) // 8 for lit, *_ in self.plan) if self.plan else 0
        width = self.words * 8
        fold = np.full((len(self.plan), width), 0xFF, dtype=np.uint8)
        expect = np.full((len(self.plan), width), 0xFF, dtype=np.uint8)
        for i, (lit, *_) in enumerate(self.plan):
            fold[i, : len(lit)] = [0x20 if 97 <= c <= 122 else 0 for c in lit]
            expect[i, : len(lit)] = list(lit)
        self.fold = [np.ascontiguousarray(col) for col in fold.view("<u8").T]  # word -> its value per plan entry
        self.expect = [np.ascontiguousarray(col) for col in expect.view("<u8").T]
        self.offset = np.array([k for _, k, _, _ in self.plan], dtype=np.int64)  # of the pair in the literal
        self.length = np.array([len(lit) for lit, *_ in self.plan], dtype=np.int64)
        ids = {lit: i for i, lit in enumerate(self.found)}
        self.literal_of = np.array([ids[lit] for lit, *_ in self.plan], dtype=np.int64)
        # per pass, pair code -> its plan entries (CSR: ``first[code]``, ``count[code]`` into ``entries``)
        self.first: list[np.ndarray] = []
        self.count: list[np.ndarray] = []
        self.entries: list[np.ndarray] = []
        for parity in (0, 1):
            mine = sorted((code, i) for i, (_, _, code, p) in enumerate(self.plan) if p == parity)
            count = np.zeros(65536, dtype=np.int64)
            for code, _ in mine:
                count[code] += 1
            self.count.append(count)
            self.first.append(np.cumsum(count) - count)
            self.entries.append(np.array([i for _, i in mine], dtype=np.int64))
        self.single = [int(c.max()) <= 1 for c in self.count]

    def _neighbours(self) -> None:
        """The even pass's second look: the 8 bytes around a candidate's pair (2 before it, its own, 4
        after), as far as every literal of its pair code fixes them (``window_mask``), hashed into a
        table that holds each plan entry's (``window``)."""
        self.window_mask = np.zeros(65536, dtype=np.uint64)
        self.window = np.zeros(_WINDOW_SLOTS, dtype=bool)
        even = [(lit, k, code) for lit, k, code, parity in self.plan if not parity]
        masks: dict[int, int] = {}
        for lit, k, code in even:
            masks[code] = masks.get(code, _ALL) & _window_of(lit, k)[1]
        for code, mask in masks.items():
            self.window_mask[code] = mask
        for lit, k, code in even:
            value = np.array([_window_of(lit, k)[0] & masks[code]], dtype=np.uint64)
            self.window[_window_slot(value)[0]] = True

    def positions(self, data: bytes, lo: int = 0, hi: int | None = None) -> dict[bytes, list[int]]:
        """Literal -> sorted start offsets in ``data.lower()`` of the occurrences that lie within
        ``data[lo:hi]`` (offsets into ``data``); literals that do not occur are absent."""
        out: dict[bytes, list[int]] = {}
        hi = len(data) if hi is None else min(hi, len(data))
        n = hi - lo
        if n < SCAN_ABOVE:
            lowered = data[lo:hi].lower()
            for lit in self.lone[: bisect.bisect_right(self.lone_lengths, n)]:
                i = lowered.find(lit)
                if i < 0:
                    continue
                hits = out[lit] = []
                while i >= 0:
                    hits.append(i + lo)
                    i = lowered.find(lit, i + 1)
            for prefix, run in self.runs:
                if prefix in lowered:  # (absent: none of the run's literals occurs)
                    for lit in run:
                        i = lowered.find(lit)
                        while i >= 0:
                            out.setdefault(lit, []).append(i + lo)
                            i = lowered.find(lit, i + 1)
            return out
        raw = np.frombuffer(data, dtype=np.uint8, count=n, offset=lo)
        folded = raw | 0x20
        for lit in self.singles:
            src = folded if 97 <= lit[0] <= 122 else raw
            single = np.flatnonzero(src == lit[0])
            if len(single):
                out[lit] = (single + lo).tolist()
        if not self.plan or n < 2:
            return out
        starts, entries = self._candidates(folded, 0)
        if self.odd_pass:
            odd_starts, odd_entries = self._candidates(folded, 1)
            starts, entries = np.concatenate((starts, odd_starts)), np.concatenate((entries, odd_entries))
        if not len(starts):
            return out
        begin = starts - self.offset[entries]  # where the literal would start
        keep = (begin >= 0) & (begin <= n - self.length[entries])
        near_end = keep & (begin > n - self.words * 8)  # too close to the end for whole words: checked in Python
        keep &= ~near_end
        tail = [(b, int(i)) for b, i in zip(begin[near_end].tolist(), entries[near_end].tolist(), strict=True)
                if data[lo + b : lo + b + len(self.plan[i][0])].lower() == self.plan[i][0]]
        passed: list[tuple[np.ndarray, np.ndarray]] = []  # candidates whose whole literal matched
        begin, entries_kept = begin[keep], entries[keep]
        for w in range(self.words):  # the payload's 8 bytes at each candidate + 8w (unaligned reads) ...
            if not len(begin):
                break
            words = np.ndarray((n - 8 * w - 7,), dtype="<u8", buffer=data, offset=lo + 8 * w, strides=(1,))
            ok = (words[begin] | self.fold[w][entries_kept]) == self.expect[w][entries_kept]
            begin, entries_kept = begin[ok], entries_kept[ok]
            if w + 1 < self.words:  # ... the next word only for the survivors whose literal reaches it
                longer = self.length[entries_kept] > 8 * (w + 1)
                done = (begin[~longer], entries_kept[~longer])
                begin, entries_kept = begin[longer], entries_kept[longer]
                passed.append(done)
        if passed:
            begin = np.concatenate([begin, *(b for b, _ in passed)])
            entries_kept = np.concatenate([entries_kept, *(e for _, e in passed)])
        if tail:
            begin = np.concatenate((begin, np.array([b for b, _ in tail], dtype=np.int64)))
            entries_kept = np.concatenate((entries_kept, np.array([i for _, i in tail], dtype=np.int64)))
        if not len(begin):
            return out
        ids = self.literal_of[entries_kept]
        order = np.lexsort((begin, ids))  # by literal, then text order
        begin, ids = begin[order] + lo, ids[order]
        bounds = np.searchsorted(ids, np.arange(len(self.found) + 1)).tolist()
        flat = begin.tolist()
        for i, lit in enumerate(self.found):
            if bounds[i] < bounds[i + 1]:
                out[lit] = flat[bounds[i] : bounds[i + 1]]
        return out

    def _candidates(self, folded: np.ndarray, parity: int) -> tuple[np.ndarray, np.ndarray]:
        """Where a pair of the table of ``parity`` starts (offsets of the same parity), once for each
        of its plan entries, and the entries."""
        n = len(folded) - parity
        pairs = folded[parity : parity + n - n % 2].view("<u2")  # pairs starting at parity, parity + 2, ...
        at = np.flatnonzero(np.take(self.tables[parity], pairs))
        codes = pairs[at]
        if not parity and len(at) > _SECOND_LOOK_ABOVE:  # the second look, where the 8 bytes lie in the data
            windows = np.ndarray((len(folded) - 7,), dtype="<u8", buffer=folded, strides=(1,))
            inside = (at >= 1) & (at * 2 + 6 <= len(folded))
            where = np.where(inside, at * 2 - 2, 0)
            ok = np.take(self.window, _window_slot(windows[where] & self.window_mask[codes])) | ~inside
            at, codes = at[ok], codes[ok]
        starts = at * 2 + parity
        count = self.count[parity][codes]
        if self.single[parity] or not (count > 1).any():  # each candidate's code has one entry
            return starts, self.entries[parity][self.first[parity][codes]]
        starts = np.repeat(starts, count)
        rank = np.arange(len(starts)) - np.repeat(np.cumsum(count) - count, count)  # which entry of its code
        return starts, self.entries[parity][np.repeat(self.first[parity][codes], count) + rank]


_RUN_MIN = 5  # literals sharing a two-byte prefix searched behind it (fewer: the prefix is common, e.g. "pa")
_SECOND_LOOK_ABOVE = 512  # candidates above which the second look costs less than the checks it saves
_WINDOW_SLOTS = 1 << 16  # the second look's table (a hash of 8 bytes: a collision only lets more through)
_ALL = (1 << 64) - 1


def _window_of(lit: bytes, k: int) -> tuple[int, int]:
    """The 8 bytes from offset ``k - 2`` of ``lit`` (case-folded, little-endian; past either end of the
    literal: unknown) and the mask of the bytes it fixes."""
    value = mask = 0
    for j in range(8):
        at = k - 2 + j
        if 0 <= at < len(lit):
            value |= (lit[at] | 0x20) << (8 * j)
            mask |= 0xFF << (8 * j)
    return value, mask


def _known(lit: bytes, k: int) -> int:
    """How many bytes around offset ``k``'s pair the literal fixes (the second look's strength)."""
    return bin(_window_of(lit, k)[1]).count("1") // 8


def _window_slot(words: np.ndarray) -> np.ndarray:
    """The second look's table slot of masked 8-byte windows: a multiplicative hash (64-bit wrap)."""
    return (words * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(48)


def _code(lit: bytes, k: int) -> int:
    """The table code of the pair at offset ``k`` of ``lit``: its two bytes, case-folded, little-endian."""
    return (lit[k] | 0x20) | ((lit[k + 1] | 0x20) << 8)


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
        self.scan = AnchorScan(a for r in self.rules for a in r.anchors)
        self.all_anchored = all(r.anchors for r in self.rules)  # no anchor found -> nothing to redact
        self._with: dict[tuple[bytes, ...], AnchorScan] = {}  # the anchors and other literals (redact_bytes_finding)

    def redact_bytes(self, data: bytes) -> tuple[bytes, dict[str, int]]:
        """Scrub UTF-8 ``data``; invalid bytes pass through unchanged (surrogateescape).

        The anchors of every rule are found in one pass (``AnchorScan``); a rule whose anchors
        do not occur costs nothing more, and one that hits runs its regex only on the lines
        around the hits. After a rule changes the bytes the anchors are found again, so each
        rule sees the output of the rules before it.
        """
        return self._redact(data, self.scan)[:2]

    def redact_bytes_finding(self, data: bytes, literals: tuple[bytes, ...]) -> tuple[
            bytes, dict[str, int], dict[bytes, list[int]] | None]:
        """``redact_bytes``, and where ``literals`` (lower case) occur in the result when nothing was
        redacted (``AnchorScan.positions`` of the whole payload; None when something was).

        The outline of a large output looks for its needles in the same bytes: one table pass over
        the megabyte finds the anchors of both, which costs little more than the anchors alone.
        """
        scan = self._with.get(literals)
        if scan is None:
            scan = self._with[literals] = AnchorScan(self.scan.literals + literals)
        data, counts, found = self._redact(data, scan)
        if counts or not data:
            return data, counts, None
        if found is None:
            found = scan.positions(data)
        return data, counts, {lit: found[lit] for lit in literals if lit in found}

    def _redact(self, data: bytes, scan: AnchorScan) -> tuple[bytes, dict[str, int], dict[bytes, list[int]] | None]:
        """``redact_bytes`` with the anchors found by ``scan`` (the rules' anchors and maybe more);
        also the last positions found, which are those of the returned bytes when nothing was redacted."""
        counts: dict[str, int] = {}
        if not data:
            return data, counts, None
        found: dict[bytes, list[int]] | None = None
        shortlist: dict[bytes, list[int]] = {}  # anchor -> its occurrences an assignment may follow (of ``found``)
        if self.all_anchored:
            found = scan.positions(data)
            if not found or (scan is not self.scan and not any(lit in found for lit in self.scan.literals)):
                return data, counts, found
        for rule in self.rules:
            n = 0
            if not rule.needles:
                text = data.decode("utf-8", "surrogateescape")
                new, n = _apply(rule, text)
                if n:
                    data = new.encode("utf-8", "surrogateescape")
            else:
                if rule.anchors:
                    if found is None:
                        found = scan.positions(data)
                        shortlist = {}
                    if found.keys().isdisjoint(rule.anchor_set):
                        continue  # none of its anchors occurs (a few set lookups, not one per anchor)
                    hits = self._hits(rule, data, found, shortlist)
                else:  # a needle regex without a literal prefix: search the lower-cased bytes
                    hits = [m.start() for m in rule.prefilter.finditer(data.lower())]
                if not hits:
                    continue
                data, n = _apply_windows(rule, data, hits)
            if n:
                counts[rule.name] = counts.get(rule.name, 0) + n
                found = None
        return data, counts, found

    @staticmethod
    def _hits(rule: Rule, data: bytes, found: dict[bytes, list[int]],
              shortlist: dict[bytes, list[int]] | None = None) -> list[int]:
        """Positions whose lines the rule's regex must see: anchor occurrences that pass its checks
        (``shortlist``: the occurrences that pass ``assignment_may_follow``, shared by the rules that
        need an assignment after the same anchor)."""
        hits: list[int] = []
        if rule.quick_regex or not rule.literals:  # a regex needle: confirm it at each occurrence of its prefix
            match = rule.prefilter_ci.match
            for lit in rule.anchors:
                occ = found.get(lit, ())
                allowed = rule.next_bytes.get(lit) if len(occ) > _FEW else None
                if allowed is not None:  # the byte after the prefix, for all occurrences at once
                    after = np.asarray(occ, dtype=np.int64) + len(lit)
                    after = after[after < len(data)]
                    occ = (after[allowed[np.frombuffer(data, dtype=np.uint8)[after]]] - len(lit)).tolist()
                hits += [i for i in occ if match(data, i)]
            return hits
        keep = rule.hit_filter
        for lit in rule.anchors:
            occ = found.get(lit, ())
            if not occ:
                continue
            end = len(lit)
            if rule.assignment and len(data) >= SCAN_ABOVE:  # (small texts: a few occurrences at most)
                if shortlist is None:
                    shortlist = {}
                if not shortlist:  # the first such rule: every assignment anchor's occurrences at once
                    _assignment_shortlist(data, found, shortlist)
                occ = shortlist.get(lit, occ)
            if keep is None:
                hits.extend(occ)
            else:
                hits += [i for i in occ if keep(data, i + end)]
        return hits

    def redact(self, text: str) -> Redaction:
        """Replace every secret in ``text`` with ``[REDACTED:<rule>]``."""
        data, counts = self.redact_bytes(text.encode("utf-8", "surrogatepass"))
        out = data.decode("utf-8", "surrogatepass") if counts else text
        return Redaction(out, counts, data)

    def scrub(self, text: str) -> str:
        return self.redact(text).text


_PRECHECK_ABOVE = 48  # anchor occurrences above which ``assignment_may_follow`` pays for its fixed cost
_ASSIGNMENT_ANCHORS = tuple(sorted({a for r in DEFAULT_RULES if r.assignment for a in r.anchors}))


def _assignment_shortlist(data: bytes, found: dict[bytes, list[int]], shortlist: dict[bytes, list[int]]) -> None:
    """Fill ``shortlist`` (anchor -> the occurrences an assignment may follow) for every assignment anchor,
    with one ``assignment_may_follow`` call over all their occurrences (a numpy call has a fixed cost)."""
    ends = [i + len(lit) for lit in _ASSIGNMENT_ANCHORS for i in found.get(lit, ())]
    if len(ends) <= _PRECHECK_ABOVE:  # a few: the rules' own filters cost less than the numpy calls
        shortlist.update((lit, found.get(lit, [])) for lit in _ASSIGNMENT_ANCHORS)
        return
    ok = assignment_may_follow(data, ends).tolist()
    at = 0
    for lit in _ASSIGNMENT_ANCHORS:
        occ = found.get(lit, [])
        shortlist[lit] = list(itertools.compress(occ, ok[at : at + len(occ)]))
        at += len(occ)


def _apply_windows(rule: Rule, data: bytes, hits: list[int]) -> tuple[bytes, int]:
    """Run the rule's regex on the lines around each hit only (single-line shapes), merged."""
    windows: list[list[int]] = []
    end_nb = rule.end_needle.encode() if rule.end_needle else None
    lowered = data.lower() if end_nb is not None else b""
    for pos in sorted(hits):
        if windows and pos < windows[-1][1] and end_nb is None:
            continue  # on a line already in the last window (searching its ends again: quadratic on one long line)
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
        window = data[lo:hi].decode("utf-8", "surrogateescape")
        if rule.requires is not None and rule.requires.search(window) is None:
            continue  # no match can be in this window
        piece, n = _apply(rule, window)
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
