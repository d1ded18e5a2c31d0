"""Local telemetry: one JSON line per route attempt and per tool outcome, on by default in $BOSUN_HOME.

What is recorded is what the dashboard and ``bosun stats`` show and the journal does not hold:
route outcomes (routed / abstained / failed with a class, degraded, corpus size, route and
delivered latency, the policy names returned), and per tool call its name, latency and error
flag, plus precheck verdicts and rules, seal drift verdicts and audit pass/fail with the issue
codes. Never prompt text, never an argument value, never a path: only bosun's own codes, names,
numbers and task ids.

Where: ``$BOSUN_TELEMETRY_PATH``, else ``$BOSUN_HOME/telemetry.jsonl`` (``~/.bosun``);
``BOSUN_TELEMETRY=off`` turns it off. The daemon binds its own Config's sink (``bind``) so a
process serving a temp home writes there; the hook, a separate stdlib-only process, reads the
environment. The file is rotated at ``MAX_BYTES`` (``.1``, ``.2`` kept): it never grows without
bound. Stdlib only, so the Claude Code hook can record its own failures without numpy. A broken
sink never costs a turn: every error here is swallowed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bosun.server.commands._daemon import append_rotating

ENV = "BOSUN_TELEMETRY_PATH"
SWITCH = "BOSUN_TELEMETRY"
FILE_NAME = "telemetry.jsonl"
MAX_BYTES = 4 * 1024 * 1024  # ~20,000 events per generation
GENERATIONS = 2  # rotated files kept beside the live one: .1 (newer) and .2
FAILURE_CLASSES = ("input", "corpus_load", "model", "route", "daemon", "timeout", "render")
_lock = threading.Lock()
_binding: tuple[bool, str | None, str] | None = None  # (enabled, explicit file, home) of this process's Config


def default_path(home: str | os.PathLike[str] | None = None) -> str:
    """``$BOSUN_HOME/telemetry.jsonl`` (or ``~/.bosun``) for a process with no explicit sink."""
    base = home if home is not None else (os.environ.get("BOSUN_HOME", "").strip() or "~/.bosun")
    return os.path.join(os.path.expanduser(str(base)), FILE_NAME)


def bind(enabled: bool, explicit: str | os.PathLike[str] | None, home: str | os.PathLike[str]) -> None:
    """This process's Config decides from now on (``Config.telemetry``, ``telemetry_path``, ``home``).

    The daemon binds its Config, so one serving a temp home writes there. An explicit file
    (the Config's, else ``$BOSUN_TELEMETRY_PATH``) wins over the home's default file."""
    global _binding
    _binding = (bool(enabled), str(explicit) if explicit else None, str(home))


def unbind() -> None:
    """Back to reading the environment alone (tests)."""
    global _binding
    _binding = None


def sink_of(enabled: bool, explicit: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None) -> str | None:
    """The events file of a configuration, or None when it turns telemetry off (readers use this too)."""
    if not enabled or os.environ.get(SWITCH, "").strip().lower() == "off":
        return None
    chosen = str(explicit) if explicit else (os.environ.get(ENV, "").strip() or None)
    return os.path.expanduser(chosen) if chosen else default_path(home)


def path() -> str | None:
    """The events file this process writes to, or None when telemetry is off."""
    if _binding is not None:
        return sink_of(*_binding)
    return sink_of(True, None, None)


def generations(target: str | os.PathLike[str]) -> list[Path]:
    """The existing files of a sink, oldest first (``.2``, ``.1``, the live file)."""
    live = Path(target)
    names = [live.with_name(f"{live.name}.{i}") for i in range(GENERATIONS, 0, -1)] + [live]
    return [p for p in names if p.is_file()]


_encode = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(..., separators=) builds one per call
_open: tuple[str, int, int] | None = None  # (file, descriptor, inode) this process appends to


def write(event: dict[str, Any]) -> None:
    target = path()
    if not target:
        return
    event.setdefault("ts", round(time.time(), 3))
    line = (_encode(event) + "\n").encode()
    try:
        with _lock:
            _append(target, line)
    except OSError:
        pass


def _append(target: str, line: bytes) -> None:
    """Append ``line`` to ``target`` through a descriptor kept open between events (the daemon writes one
    per tool call: opening, checking the directory and closing each time cost more than the write).

    The same file ``append_rotating`` would write: it is reopened when the path no longer names the
    file we hold (another process rotated or removed it), and past ``MAX_BYTES`` it is closed and
    rotated by ``append_rotating`` itself, as every event used to be."""
    global _open
    held = _open
    if held is not None:
        try:
            same = held[0] == target and os.stat(target).st_ino == held[2]
        except OSError:
            same = False
        if not same:
            _close_held()
            held = None
    if held is None:
        parent = os.path.dirname(target)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, mode=0o700, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        held = _open = (target, fd, os.fstat(fd).st_ino)
    os.write(held[1], line)
    if os.fstat(held[1]).st_size >= MAX_BYTES:
        _close_held()
        append_rotating(target, "", MAX_BYTES, GENERATIONS)  # nothing more to write: it rotates


def _close_held() -> None:
    global _open
    if _open is not None:
        held, _open = _open, None
        try:
            os.close(held[1])
        except OSError:
            pass


def parse_lines(text: str) -> list[dict[str, Any]]:
    """The events of a JSONL text; a torn line (a killed writer) is skipped."""
    events = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            events.append(row)
    return events


def read_events_of(file: Path) -> list[dict[str, Any]]:
    try:
        return parse_lines(file.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return []


def read_events(target: str | os.PathLike[str], since: float | None = None) -> list[dict[str, Any]]:
    """Every event of a sink (its rotated files included), oldest first."""
    events = [e for f in generations(target) for e in read_events_of(f)]
    if since is not None:
        events = [e for e in events if float(e.get("ts") or 0) >= since]
    return events


def is_route(event: dict[str, Any]) -> bool:
    """Route attempts (older files carry no ``event`` field: every line was one)."""
    return event.get("event", "route") == "route"


def record_route(result: dict[str, Any], via: str, delivered_ms: float) -> None:
    hits = result.get("hits") or []
    write({
        "event": "route",
        "outcome": "routed" if hits else "abstained",
        "via": via,
        "degraded": bool(result.get("degraded", False)),
        "corpus_size": int(result.get("corpus_size", 0)),
        "route_ms": round(float(result.get("route_ms", 0.0)), 3),
        "delivered_ms": round(delivered_ms, 3),
        "cached": bool(result.get("cached", False)),
        "names": [h.get("name") for h in hits if isinstance(h, dict)],
        "notices": len(result.get("notices") or []),
    })


def record_failure(failure_class: str, via: str, delivered_ms: float | None = None) -> None:
    event: dict[str, Any] = {"event": "route", "outcome": "failed", "failure_class": failure_class, "via": via}
    if delivered_ms is not None:
        event["delivered_ms"] = round(delivered_ms, 3)
    write(event)


def record_tool(tool: str, ms: float, error: bool, task_id: str | None = None, **codes: Any) -> None:
    """One tool call: its name, latency, error flag, and bosun's own codes about it (verdicts, rules)."""
    event: dict[str, Any] = {"event": "tool", "tool": tool, "ms": round(ms, 3), "error": bool(error)}
    if task_id:
        event["task"] = task_id
    event.update({k: v for k, v in codes.items() if v is not None and v != []})
    write(event)


def codes(values: Iterable[Any]) -> list[str]:
    """Short identifiers only (a code never carries text a caller wrote)."""
    return [str(v)[:64] for v in values if isinstance(v, str | int)]
