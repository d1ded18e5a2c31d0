"""Parse governance documents into routable policies (pure: text in, records out).

Three formats are read, each for its routing surface, the short statement of
what the document governs, which is the only part the router scores:

* oiax markdown: a ``**Agent-trigger:**`` line, plus optional ``**Family:**``,
  ``**Depends-on:**`` / ``**Requires:**`` / ``**See-also:**`` and ``**Status:**``
  lines (inactive statuses are skipped);
* Claude skills: ``SKILL.md`` with YAML front matter ``name`` and ``description``;
* Cursor rules: ``.mdc`` with a ``description:`` front matter.

A document that declares none of these is still routed: its surface is derived from its
title and opening paragraph (``surface_derived``), because an author who wrote a policy
without a trigger line still expects it to be found; the loader says so in a warning.

The front-matter parser is deliberately tiny (scalars, quoted strings, ``>``/``|``
blocks, inline and dash lists): that is all these formats use, and it keeps
PyYAML out of the dependency list.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

MAX_DOC_BYTES = 1_000_000  # a policy of several MB is a mistake, not a policy
INACTIVE_STATUSES = frozenset(
    {"deprecated", "superseded", "retired", "archived", "withdrawn", "inactive", "obsolete", "rejected", "disabled"}
)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_FIELD_RE = re.compile(r"^\s*[-*]?\s*\*\*(?P<key>[A-Za-z][A-Za-z -]*?)\s*:\s*\*\*\s*(?P<val>.*)$")
_FIELD_RE2 = re.compile(r"^\s*[-*]?\s*\*\*(?P<key>[A-Za-z][A-Za-z -]*?)\s*\*\*\s*:\s*(?P<val>.*)$")
_TITLE_RE = re.compile(r"^#\s+(.+?)\s*#*\s*$")
_REL_KEYS = {"depends-on": "depends_on", "requires": "requires", "see-also": "see_also"}


class PolicyParseError(ValueError):
    """A file cannot be turned into a policy; the message names the file and why."""


@dataclass(frozen=True)
class Policy:
    """One routable document. ``text`` is the whole file, delivered whole by get_policy."""

    name: str
    surface: str  # the routing surface: what the document governs
    text: str
    source: str  # file path (shown to operators, never to telemetry)
    fmt: str  # oiax | skill | cursor
    title: str = ""
    family: str = ""
    status: str = ""
    depends_on: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    see_also: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    surface_derived: bool = False  # no trigger line or description: title + opening paragraph

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()

    def summary(self) -> dict[str, object]:
        """Metadata for listings: never the rule text."""
        out: dict[str, object] = {"name": self.name, "surface": self.surface, "format": self.fmt}
        if self.surface_derived:
            out["surface_derived"] = True
        if self.title:
            out["title"] = self.title
        if self.family:
            out["family"] = self.family
        for key in ("depends_on", "requires", "see_also"):
            value = getattr(self, key)
            if value:
                out[key] = list(value)
        return out


# -- front matter ------------------------------------------------------------------------------


def split_front_matter(text: str) -> tuple[dict[str, object], str]:
    """(front matter mapping, body). No front matter gives ({}, text)."""
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            return parse_front_matter("\n".join(lines[1:end])), "\n".join(lines[end + 1 :])
    return {}, text


def _scalar(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        inner = raw[1:-1]
        return inner.replace("''", "'") if raw[0] == "'" else inner.replace('\\"', '"').replace("\\n", "\n")
    # strip a trailing comment ("value # note") but keep '#' inside words
    return re.sub(r"\s+#.*$", "", raw)


def parse_front_matter(block: str) -> dict[str, object]:
    """Parse the subset of YAML that skill and rule front matter uses."""
    out: dict[str, object] = {}
    lines = block.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#") or line[:1].isspace():
            continue
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        rest = rest.strip()
        if rest in ("|", ">", "|-", ">-", "|+", ">+"):
            block_lines: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace()):
                block_lines.append(lines[i].strip())
                i += 1
            joiner = "\n" if rest.startswith("|") else " "
            out[key] = joiner.join(bl for bl in block_lines if bl or joiner == "\n").strip()
        elif rest.startswith("[") and rest.endswith("]"):
            out[key] = [_scalar(v) for v in rest[1:-1].split(",") if v.strip()]
        elif rest:
            value = _scalar(rest)
            # plain multi-line scalar: indented continuation lines fold into one
            while i < len(lines) and lines[i][:1].isspace() and lines[i].strip() and not lines[i].strip().startswith("- "):
                value += " " + lines[i].strip()
                i += 1
            out[key] = value
        else:
            items: list[str] = []
            while i < len(lines) and (lines[i].strip().startswith("- ") or not lines[i].strip()):
                if lines[i].strip():
                    items.append(_scalar(lines[i].strip()[2:]))
                i += 1
            out[key] = items
    return out


# -- formats -----------------------------------------------------------------------------------


def _split_list(value: str) -> tuple[str, ...]:
    parts = re.split(r"[,;]|\s+and\s+", value)
    return tuple(p.strip().strip("`*_ ").removesuffix(".md") for p in parts if p.strip().strip("`*_ "))


def _title(body: str) -> str:
    for line in body.split("\n"):
        m = _TITLE_RE.match(line.strip())
        if m:
            return m.group(1).strip()
    return ""


DERIVED_MIN_WORDS = 6  # an opening paragraph shorter than this says too little to route on
DERIVED_MAX_CHARS = 400  # about a trigger line's length: the lead, not the whole rulebook


def _opening_paragraph(body: str) -> str:
    """The first prose paragraph of a markdown body (no heading, field line, list, code or table)."""
    lines: list[str] = []
    fence = False
    for raw in body.split("\n"):
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            fence = not fence
            if lines:
                break
            continue
        prose = bool(line) and not fence and not line.startswith(("#", "|", ">", "<!--", "---"))
        prose = prose and not (_FIELD_RE.match(line) or _FIELD_RE2.match(line)) and not re.match(r"^([-*+]|\d+[.)])\s", line)
        if prose:
            lines.append(line)
        elif lines:
            break
    return " ".join(" ".join(lines).split())


def derive_surface(title: str, body: str) -> str:
    """Title plus the opening paragraph's lead, cut at a sentence end near DERIVED_MAX_CHARS; "" if too thin."""
    lead = _opening_paragraph(body)
    if len(lead.split()) < DERIVED_MIN_WORDS:
        return ""
    if len(lead) > DERIVED_MAX_CHARS:
        cut = max(lead.rfind(". ", 0, DERIVED_MAX_CHARS), lead.rfind("; ", 0, DERIVED_MAX_CHARS))
        lead = lead[: cut + 1] if cut > DERIVED_MAX_CHARS // 3 else lead[:DERIVED_MAX_CHARS].rsplit(" ", 1)[0]
    return f"{title}: {lead}" if title else lead


def _as_text(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value or "").strip()


def parse_policy(filename: str, text: str, stem: str | None = None) -> Policy | None:
    """Parse one file; None when it has no routing surface, declared or derived (the caller warns).

    ``filename`` picks the format (``SKILL.md``, ``*.mdc``, other ``*.md``); ``stem``
    is the default name (for a skill, its directory name).
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DOC_BYTES:
        raise PolicyParseError(f"{filename}: {len(text.encode())} bytes exceeds the {MAX_DOC_BYTES}-byte policy limit")
    text = text.replace("\r\n", "\n").lstrip("\ufeff")
    base = filename.rsplit("/", 1)[-1]
    default_name = stem or base.rsplit(".", 1)[0]
    front, body = split_front_matter(text)
    if base.lower().endswith(".mdc"):
        fmt = "cursor"
    elif base == "SKILL.md" or (front and "description" in front and "name" in front):
        fmt = "skill"
    else:
        fmt = "oiax"
    meta: dict[str, str] = {}
    for line in body.split("\n")[:80]:
        m = _FIELD_RE.match(line) or _FIELD_RE2.match(line)
        if m:
            meta.setdefault(m.group("key").strip().lower().replace(" ", "-"), m.group("val").strip())
    surface = ""
    name = default_name
    if fmt == "oiax":
        surface = meta.get("agent-trigger", "")
        if not surface and front.get("description"):
            surface = _as_text(front["description"])
    else:
        surface = _as_text(front.get("description"))
        if fmt == "skill" and front.get("name"):
            name = _as_text(front["name"])
        if not surface:
            surface = meta.get("agent-trigger", "")
    surface = " ".join(surface.split())
    title = _title(body) or _as_text(front.get("title"))
    derived = False
    if not surface:
        surface = derive_surface(title, body)
        derived = bool(surface)
    if not surface:
        return None
    if not NAME_RE.match(name):
        raise PolicyParseError(
            f"{filename}: policy name {name!r} must be letters, digits, '.', '_' or '-' (at most 128)"
        )
    status = (meta.get("status") or _as_text(front.get("status"))).strip().strip("*_`").lower()
    rel: dict[str, tuple[str, ...]] = {v: () for v in _REL_KEYS.values()}
    for key, attr in _REL_KEYS.items():
        raw = meta.get(key) or _as_text(front.get(key) or front.get(attr))
        if raw:
            rel[attr] = _split_list(raw)
    known = {"agent-trigger", "family", "status", *_REL_KEYS}
    extra = {k: v for k, v in meta.items() if k not in known}
    return Policy(
        name=name,
        surface=surface,
        text=text,
        source=filename,
        fmt=fmt,
        title=title,
        family=(meta.get("family") or _as_text(front.get("family"))).strip(),
        status=status,
        depends_on=rel["depends_on"],
        requires=rel["requires"],
        see_also=rel["see_also"],
        extra=extra,
        surface_derived=derived,
    )


def is_active(policy: Policy) -> bool:
    """Inactive statuses (deprecated, superseded, ...) are not routed."""
    first = re.split(r"[\s(,;:]", policy.status, maxsplit=1)[0] if policy.status else ""
    return first not in INACTIVE_STATUSES


def corpus_fingerprint(policies: list[Policy]) -> str:
    """sha256 over the sorted (name, surface) pairs: what routing depends on."""
    digest = hashlib.sha256()
    for p in sorted(policies, key=lambda p: p.name):
        digest.update(p.name.encode())
        digest.update(b"\0")
        digest.update(p.surface.encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()
