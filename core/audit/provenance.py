"""Where a chunk comes from and how old it is: URL parsing, the allowlist, freshness.

Allowlist entries are a host with an optional path prefix. A host matches
itself and its subdomains (``who.int`` admits ``www.who.int`` and
``apps.who.int``, never ``evilwho.int``); a path prefix matches whole segments
(``nejm.org/doi`` admits ``/doi/10.1056`` but not ``/doify``). ``*.host``
admits only subdomains. An empty allowlist admits every chunk and only warns
about missing or malformed URLs.

Freshness is computed against an explicit ``as_of`` date so the same input
gives the same report tomorrow.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit

from bosun.core.errors import InvalidInput

DATE_KEYS = (
    "published_at", "publication_date", "published_date", "published", "date", "updated_at",
    "last_updated", "last_modified", "modified", "issued_at", "created_at", "year",
)
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_BARE_HOST = re.compile(r"^[A-Za-z0-9.-]+\.[A-Za-z]{2,}(?::\d+)?(?:[/?#].*)?$")


@dataclass(frozen=True)
class ParsedURL:
    """A source URL reduced to what the allowlist compares."""

    host: str
    path: str


@dataclass(frozen=True)
class Rule:
    """One allowlist entry: host (+ subdomains) and an optional path prefix."""

    host: str
    path: str
    subdomains_only: bool
    text: str

    def admits(self, url: ParsedURL) -> bool:
        if self.subdomains_only:
            host_ok = url.host.endswith("." + self.host)
        else:
            host_ok = url.host == self.host or url.host.endswith("." + self.host)
        if not host_ok:
            return False
        if not self.path:
            return True
        return url.path == self.path or url.path.startswith(self.path.rstrip("/") + "/")


def _valid_host(host: str) -> bool:
    if not host or len(host) > 253:
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        pass
    labels = host.split(".")
    return len(labels) >= 2 and all(_HOST_LABEL.match(label) for label in labels) and not labels[-1].isdigit()


def parse_source_url(url: Any) -> tuple[ParsedURL | None, str | None]:
    """(parsed, None) or (None, reason) with reason missing_source_url / malformed_source_url."""
    if url is None or (isinstance(url, str) and not url.strip()):
        return None, "missing_source_url"
    if not isinstance(url, str):
        return None, "malformed_source_url"
    return _parse_url_text(url.strip())


@lru_cache(maxsize=8192)
def _parse_url_text(text: str) -> tuple[ParsedURL | None, str | None]:
    if any(ch.isspace() for ch in text):
        return None, "malformed_source_url"
    if "://" not in text:
        if not _BARE_HOST.match(text):
            return None, "malformed_source_url"
        text = "https://" + text  # dokis accepts host-like bare URLs such as "who.int/page"
    try:
        parts = urlsplit(text)
        host = (parts.hostname or "").rstrip(".").lower()
        _ = parts.port  # raises ValueError on a non-numeric port
    except ValueError:
        return None, "malformed_source_url"
    if parts.scheme.lower() not in {"http", "https"} or not _valid_host(host):
        return None, "malformed_source_url"
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        return None, "malformed_source_url"
    path = re.sub(r"/{2,}", "/", unquote(parts.path or "/"))
    return ParsedURL(host=host, path=path), None


def parse_rules(domains: tuple[str, ...]) -> list[Rule]:
    """Turn allowlist entries into rules; a bad entry is an error naming it."""
    rules: list[Rule] = []
    for i, entry in enumerate(domains):
        text = entry.strip().lower()
        if "://" in text:
            text = text.split("://", 1)[1]
        subdomains_only = text.startswith("*.")
        if subdomains_only:
            text = text[2:]
        host, _, path = text.partition("/")
        host = host.split(":", 1)[0].rstrip(".")
        if host.startswith("www."):
            host = host[4:]
        single_label_ok = subdomains_only and bool(_HOST_LABEL.match(host))  # "*.gov"
        if not (_valid_host(host) or single_label_ok):
            raise InvalidInput(
                f"config.allowed_domains[{i}]", f"{entry!r} is not a domain", "host, *.host or host/path/prefix"
            )
        path = "/" + path.strip("/") if path.strip("/") else ""
        rules.append(Rule(host=host, path=path, subdomains_only=subdomains_only, text=entry))
    return rules


@dataclass(frozen=True)
class SourceCheck:
    """Whether one chunk is admitted, and why not."""

    admitted: bool
    host: str | None
    reason: str | None
    warning: str | None = None


def check_source(url: Any, rules: list[Rule]) -> SourceCheck:
    """Admit or refuse one chunk's URL (cached: a pure function of the URL and the rules)."""
    if isinstance(url, str) or url is None:
        return _check_source_cached(url, tuple(rules))
    return _check_source(url, rules)


@lru_cache(maxsize=16_384)
def _check_source_cached(url: str | None, rules: tuple[Rule, ...]) -> SourceCheck:
    return _check_source(url, list(rules))


def _check_source(url: Any, rules: list[Rule]) -> SourceCheck:
    parsed, problem = parse_source_url(url)
    if not rules:
        return SourceCheck(True, parsed.host if parsed else None, None, problem)
    if parsed is None:
        return SourceCheck(False, None, problem)
    for rule in rules:
        if rule.admits(parsed):
            return SourceCheck(True, parsed.host, None)
    return SourceCheck(False, parsed.host, "domain_not_allowlisted")


# -- dates and freshness --------------------------------------------------------------------

_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
         ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
         ("oct", "october"), ("nov", "november"), ("dec", "december")]
    )
    for m in names
}
_ISO_PREFIX = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})")
_YMD = re.compile(r"^(\d{4})[/.](\d{1,2})[/.](\d{1,2})$")
_YM = re.compile(r"^(\d{4})[-/.](\d{1,2})$")
_DMY_NUM = re.compile(r"^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})$")
_WORDY = re.compile(r"^(?:(\d{1,2})(?:st|nd|rd|th)?\s+)?([A-Za-z]+)\.?,?\s+(?:(\d{1,2})(?:st|nd|rd|th)?,?\s+)?(\d{4})$")


def parse_date_value(value: Any) -> tuple[date | None, str | None]:
    """Parse a metadata date. Returns (date, note); a None date comes with the reason."""
    if isinstance(value, datetime):
        return value.date(), None
    if isinstance(value, date):
        return value, None
    if isinstance(value, bool):
        return None, f"not a date: {value!r}"
    if isinstance(value, int | float):
        number = float(value)
        if number == int(number) and 1000 <= number <= 9999:
            return date(int(number), 1, 1), "year only: taken as January 1"
        if number >= 1e11:  # epoch milliseconds
            number /= 1000.0
        if 1e8 <= number < 1e11:
            return datetime.fromtimestamp(number, tz=UTC).date(), "epoch timestamp (UTC)"
        return None, f"unsupported numeric date {value!r}"
    if not isinstance(value, str):
        return None, f"unsupported date type {type(value).__name__}"
    text = value.strip()
    if not text:
        return None, "empty date value"
    if re.fullmatch(r"\d{4}", text):
        return date(int(text), 1, 1), "year only: taken as January 1"
    try:
        return _parse_date_text(text)
    except ValueError:
        return None, f"impossible date {text!r}"


def _parse_date_text(text: str) -> tuple[date | None, str | None]:
    m = _ISO_PREFIX.match(text)
    if m:
        return date(int(m[1]), int(m[2]), int(m[3])), None
    m = _YMD.match(text)
    if m:
        return date(int(m[1]), int(m[2]), int(m[3])), None
    m = _YM.match(text)
    if m:
        return date(int(m[1]), int(m[2]), 1), "year and month only: taken as the 1st"
    m = _DMY_NUM.match(text)
    if m:
        a, b, year = int(m[1]), int(m[2]), int(m[3])
        if a > 12 >= b:
            return date(year, b, a), None
        if b > 12 >= a:
            return date(year, a, b), None
        if a == b:
            return date(year, a, b), None
        return None, f"ambiguous day/month order in {text!r}: use YYYY-MM-DD"
    m = _WORDY.match(text)
    if m and m[2].lower() in _MONTHS:
        day = m[1] or m[3]
        month = _MONTHS[m[2].lower()]
        if day is None:
            return date(int(m[4]), month, 1), "year and month only: taken as the 1st"
        return date(int(m[4]), month, int(day)), None
    try:
        parsed = parsedate_to_datetime(text)  # RFC 2822, as in HTTP Last-Modified
        return parsed.date(), None
    except (TypeError, ValueError, IndexError):
        pass
    return None, f"unparseable date {text!r}"


@dataclass(frozen=True)
class Freshness:
    """Freshness of one source, as reported in ``source_freshness_details``."""

    status: str  # fresh | stale | unknown | not_applicable
    source_date: date | None = None
    age_days: int | None = None
    metadata_key: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "source_date": self.source_date.isoformat() if self.source_date else None,
            "age_days": self.age_days,
            "metadata_key": self.metadata_key,
            "note": self.note,
        }


_NOT_APPLICABLE = Freshness("not_applicable")


def assess_freshness(
    metadata: dict[str, Any], max_age_days: int | None, as_of: date, preferred_key: str | None
) -> Freshness:
    """Date the source from its metadata (preferred key first, then common keys) and age it."""
    if max_age_days is None:
        return _NOT_APPLICABLE
    if not metadata:
        return Freshness("unknown", note="chunk has no metadata to date it")
    by_lower = {str(k).lower(): k for k in metadata}
    keys = ([preferred_key] if preferred_key else []) + [k for k in DATE_KEYS if k != preferred_key]
    for key in keys:
        actual = by_lower.get(key.lower())
        if actual is None:
            continue
        found, note = parse_date_value(metadata[actual])
        if found is None:
            return Freshness("unknown", metadata_key=str(actual), note=note)
        age = (as_of - found).days
        if age < 0:
            return Freshness(
                "unknown", found, None, str(actual), f"date is after as_of {as_of.isoformat()}"
            )
        status = "stale" if age > max_age_days else "fresh"
        return Freshness(status, found, age, str(actual), note)
    return Freshness("unknown", note="no date key in metadata (" + ", ".join(keys[:4]) + ", ...)")
